"""``ksi plugins new``: the generated package installs, registers through its entry point,
and its own tests pass, in a fresh virtual environment as a plugin author would see it."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from run_helpers import env_without_ksi_settings
from test_install_cmd import fresh_venv, ksi
from typer.testing import CliRunner

from ksi.cli import build_app
from ksi.errors import UserInputError
from ksi.scaffold import PluginNames, create_plugin, write_wheel_check

ROOT = Path(__file__).resolve().parent.parent


def plugins_cli() -> typer.Typer:
    return build_app()


def test_generated_plugin_installs_registers_and_its_tests_pass(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        plugins_cli(), ["plugins", "new", "my-bench", "--dir", str(tmp_path / "pkg")]
    )
    assert result.exit_code == 0, result.output
    assert "Created ksi-my-bench" in result.output
    pkg = tmp_path / "pkg"
    assert (pkg / "ksi_my_bench" / "plugin.py").is_file()
    assert 'my-bench = "ksi_my_bench.plugin"' in (pkg / "pyproject.toml").read_text()

    python = fresh_venv(tmp_path / "venv")
    installed = ksi(python, "install", "-e", str(pkg))
    assert installed.returncode == 0, installed.stderr
    assert "my-bench (ksi-my-bench 0.1.0)" in installed.stdout
    assert "task sources: my-bench" in installed.stdout
    assert "evaluators: my-bench" in installed.stdout

    # The skeleton runs: the oracle applies each task's solution and the evaluator agrees.
    ran = ksi(
        python,
        "run",
        "--task-source",
        "my-bench",
        "--tasks-path",
        str(pkg / "tasks" / "example.jsonl"),
        "--agent",
        "oracle",
        "--run-dir",
        str(tmp_path / "run"),
        "--output-json",
        str(tmp_path / "report.json"),
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["solved_tasks"] == 2, report["summary"]

    tests = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pkg / "tests")],
        capture_output=True,
        text=True,
        cwd=pkg,
        timeout=300,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "5 passed" in tests.stdout

    # In KSI's repository, the wheel check .ci/run runs on it (issue 28 #8), and it passes.
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "plugin-wheel-check.sh", repo / ".ci")
    check = write_wheel_check(PluginNames.from_name("my-bench"), repo / "plugins" / "ksi-my-bench")
    assert check == repo / ".ci" / "wheel-check" / "ksi-my-bench.sh"
    wrapper = tmp_path / "ksi-command"
    wrapper.write_text(f'#!/bin/sh\nexec "{python}" -m ksi "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "work").mkdir()
    checked = subprocess.run(
        ["bash", str(check)],
        env={**env_without_ksi_settings(), "ROOT": str(repo), "PLUGIN_DIR": str(pkg),
             "WORK": str(tmp_path / "work"), "VENV": str(python.parent.parent),
             "KSI": str(wrapper)},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "2 tasks, every one solved" in checked.stdout


def test_names_are_derived_and_checked() -> None:
    names = PluginNames.from_name("ksi-Weather-QA")
    assert (names.name, names.dist, names.module, names.cls) == (
        "weather-qa",
        "ksi-weather-qa",
        "ksi_weather_qa",
        "WeatherQa",
    )
    for bad in ("9lives", "my_bench", "a--b", "", "-x"):
        with pytest.raises(UserInputError, match="lowercase letters, digits and single dashes"):
            PluginNames.from_name(bad)


def test_refuses_to_overwrite_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(plugins_cli(), ["plugins", "new", "x", "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "already exists and is not empty" in result.output
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_a_directory_that_cannot_be_created_exits_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "ksi-x"
    result = CliRunner().invoke(plugins_cli(), ["plugins", "new", "x", "--dir", str(target)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: --dir: cannot write the plugin into {target}")
    assert "Traceback" not in result.output


def test_default_location_is_plugins_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, target, written = create_plugin("demo")
    assert target == Path("plugins") / "ksi-demo"
    assert {p.relative_to(target).as_posix() for p in written} >= {
        "pyproject.toml",
        "README.md",
        "ksi_demo/plugin.py",
        "ksi_demo/source.py",
        "ksi_demo/evaluator.py",
        "tests/test_plugin.py",
        "tests/conftest.py",
        "tasks/example.jsonl",
    }


def _checks(cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    bin_dir = Path(sys.executable).parent
    return [
        subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
        for cmd in (
            [str(bin_dir / "ruff"), "check", "."],
            [str(bin_dir / "ruff"), "format", "--check", "."],
        )
    ]


def test_generated_code_passes_ruff_and_mypy_strict_as_generated(tmp_path: Path) -> None:
    """Issue 28 #7: on its own, and inside a project whose ruff config calls ksi first-party."""
    _, pkg, _ = create_plugin("lint-me", tmp_path / "ksi-lint-me")
    for proc in _checks(pkg):
        assert proc.returncode == 0, proc.stdout + proc.stderr
    typed = subprocess.run(
        [str(Path(sys.executable).parent / "mypy"), "--no-incremental"],
        cwd=pkg,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert "Success: no issues found in 6 source files" in typed.stdout

    # As an in-repo plugin: plugins/ksi-NAME under KSI's own pyproject.toml and ksi/.
    repo = tmp_path / "repo"
    (repo / "ksi").mkdir(parents=True)
    (repo / "ksi" / "__init__.py").write_text("")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    create_plugin("lint-me", repo / "plugins" / "ksi-lint-me")
    for proc in _checks(repo):
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generated_evaluator_uses_documented_statuses_only(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "evaluators.md").read_text(encoding="utf-8")
    table = doc.split("| status | when |", 1)[1].split("\n\n", 1)[0]  # the unscored statuses
    documented = {"scored", *re.findall(r"^\| `([a-z_]+)` \| ", table, flags=re.MULTILINE)}
    assert {"timeout", "no_eval"} <= documented
    names, pkg, _ = create_plugin("status-check", tmp_path / "pkg")
    sys.path.insert(0, str(pkg))
    try:
        source = importlib.import_module(f"{names.module}.source")
        evaluator = importlib.import_module(f"{names.module}.evaluator")
        task = source.StatusCheckTaskSource().load(pkg / "tasks" / "example.jsonl")[0]
        workspace = tmp_path / "empty"
        workspace.mkdir()
        result = evaluator.StatusCheckEvaluator().grade(task, workspace)  # no answer.txt
    finally:
        sys.path.remove(str(pkg))
        for name in [m for m in sys.modules if m.startswith(names.module)]:
            del sys.modules[name]
    assert result.status in documented, (result.status, sorted(documented))
    assert result.native_score == 0.0 and "no answer.txt" in result.notes


def test_the_wheel_check_is_written_only_inside_ksis_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / ".ci" / "plugin-wheel-check.sh").write_text("")
    inside = CliRunner().invoke(
        plugins_cli(), ["plugins", "new", "in-repo", "--dir", str(repo / "plugins" / "ksi-in-repo")]
    )
    assert inside.exit_code == 0, inside.output
    check = repo / ".ci" / "wheel-check" / "ksi-in-repo.sh"
    assert f"Wrote {check}" in inside.output
    assert "--task-source in-repo" in check.read_text()
    outside = CliRunner().invoke(
        plugins_cli(), ["plugins", "new", "elsewhere", "--dir", str(tmp_path / "plugins" / "x")]
    )
    assert outside.exit_code == 0, outside.output
    assert "Wrote" not in outside.output
    assert not (tmp_path / ".ci").exists()

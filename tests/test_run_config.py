"""``ksi run -c run.toml``, ``KSI_*`` defaults, ``--dry-run`` and shell completion (issue 15).

Through the real ``ksi`` command (a subprocess), except where an in-process
plugin must add an option to ``ksi run`` (CliRunner on a fresh app).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import attrs
import test_plugins
from test_plugins import Site
from typer.testing import CliRunner

from ksi import hookimpl
from ksi.cli import build_app
from ksi.environments.local import LocalEnvironment
from tests.run_helpers import env_without_ksi_settings, journal_lines, write_tasks

#: The temporary site directory fixture of test_plugins.py (real installed plugins).
site = test_plugins.site


def _tasks(path: Path, ids: tuple[str, ...] = ("a", "b", "c")) -> Path:
    return write_tasks(
        path,
        [
            {"task_id": i, "prompt": "p", "eval": {"command": "test -f ok.txt"},
             "solution": {"files": {"ok.txt": "ok"}}}
            for i in ids
        ],
    )  # fmt: skip


def _clean_env(**extra: str) -> dict[str, str]:
    """os.environ without any KSI_* default a developer may have set, plus ``extra``."""
    return env_without_ksi_settings(**extra)


def _ksi(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The real ``ksi``, with no KSI_* variable but those given."""
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args],
        cwd=cwd,
        env=_clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_config_file_holds_run_options_and_the_command_line_wins(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    _tasks(conf_dir / "tasks.jsonl")
    (conf_dir / "run.toml").write_text(
        textwrap.dedent(
            """\
            # paths are relative to this file
            tasks = "tasks.jsonl"
            agent = "command"
            attempts = 2
            task-id = ["a", "b"]
            run-dir = "runs/first"

            [agent-option]
            cmd = "echo ok > repo/ok.txt"
            """
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _ksi("run", "-c", str(conf_dir / "run.toml"), "--attempts", "1", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    run_dir = conf_dir / "runs" / "first"
    records = journal_lines(run_dir)
    # attempts = 1 from the command line, not 2 from the file; tasks a and b only.
    assert sorted((r["task_id"], r["attempt"]) for r in records) == [("a", 1), ("b", 1)]
    assert all(r["score"] == 1.0 for r in records)
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert config["agent_options"] == {"cmd": "echo ok > repo/ok.txt"}
    assert config["tasks_path"] == str(conf_dir / "tasks.jsonl")


def test_a_config_file_with_mistakes_names_file_line_key_and_fix(tmp_path: Path) -> None:
    _tasks(tmp_path / "tasks.jsonl")
    conf = tmp_path / "run.toml"
    conf.write_text(
        'tasks = "tasks.jsonl"\nagnet = "oracle"\n\nattempts = "three"\n[model]\nx = 1\n'
    )
    proc = _ksi("run", "-c", str(conf), "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert lines[0] == f"error: {conf}: 3 problems found"
    assert lines[1].startswith(f"error: {conf}:line 2: 'agnet': unknown key; did you mean 'agent'?")
    assert lines[2].startswith(f"error: {conf}:line 4: 'attempts': ")
    assert "give a value --attempts takes" in lines[2]
    assert lines[3].startswith(f"error: {conf}:line 5: 'model': expected a value, not a table")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()

    conf.write_text('agent = "oracle\n')
    broken = _ksi("run", "-c", str(conf), cwd=tmp_path)
    assert broken.returncode == 2
    assert broken.stderr.startswith(f"error: {conf}: not valid TOML: ")
    assert "line 1" in broken.stderr


def test_config_keys_come_from_the_command_so_a_plugins_new_option_works(
    tmp_path: Path, ksi_plugin: Callable[..., Any]
) -> None:
    @attrs.define
    class GpuLocal(LocalEnvironment):
        name: ClassVar[str] = "gpu-local"
        cli_options: ClassVar[dict[str, tuple[str, str]]] = {"--gpus": ("gpus", "GPUs.")}
        gpus: int = 0

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_environments(register: Any) -> None:
            register(GpuLocal)

    ksi_plugin(Plugin, name="gpu-plugin")
    tasks = _tasks(tmp_path / "tasks.jsonl")
    conf = tmp_path / "run.toml"
    conf.write_text(f'tasks = "{tasks}"\nagent = "nop"\nenvironment = "gpu-local"\ngpus = "x"\n')
    bad = CliRunner().invoke(build_app(), ["run", "-c", str(conf), "--dry-run"])
    assert bad.exit_code == 2
    # The key is known (the flag takes any string); the environment itself refuses "x".
    assert "unknown key" not in bad.output
    assert "environment 'gpu-local': option 'gpus': expected a whole number, got 'x'" in (
        bad.output
    )

    conf.write_text(f'tasks = "{tasks}"\nagent = "nop"\nenvironment = "gpu-local"\ngpus = 2\n')
    good = CliRunner().invoke(build_app(), ["run", "-c", str(conf), "--dry-run"])
    assert good.exit_code == 0, good.output
    assert "environment: gpu-local" in good.output


def test_ksi_environment_variables_give_defaults_between_file_and_command_line(
    tmp_path: Path,
) -> None:
    tasks = _tasks(tmp_path / "tasks.jsonl")
    conf = tmp_path / "run.toml"
    conf.write_text('agent = "oracle"\nattempts = 3\n')
    plan = _ksi("run", str(tasks), "--dry-run", "-c", str(conf), cwd=tmp_path,
                KSI_AGENT="nop", KSI_ATTEMPTS="2")  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "agent:       nop" in plan.stdout  # the variable beats the file
    assert "attempts:    2 per task, 6 to run" in plan.stdout
    cli = _ksi("run", str(tasks), "--dry-run", "--agent", "oracle", "--attempts", "1",
               cwd=tmp_path, KSI_AGENT="nop", KSI_ATTEMPTS="2")  # fmt: skip
    assert "agent:       oracle" in cli.stdout  # the command line beats the variable
    assert "attempts:    1 per task, 3 to run" in cli.stdout
    bad = _ksi("run", str(tasks), "--dry-run", cwd=tmp_path, KSI_AGENT="nop", KSI_ATTEMPTS="0")
    assert bad.returncode == 2 and "--attempts" in bad.stderr


def test_dry_run_shows_the_plan_and_starts_nothing(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path / "tasks.jsonl")
    run_dir = tmp_path / "run"
    plan = _ksi("run", str(tasks), "--agent", "oracle", "--attempts", "2", "--exclude", "c",
                "--run-dir", str(run_dir), "--dry-run", cwd=tmp_path)  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        "dry run: nothing was started",
        f"run dir:     {run_dir} (new)",
        f"tasks:       2 from {tasks}: a, b",
        "attempts:    2 per task, 4 to run",
        "agent:       oracle",
        "environment: local",
        "evaluator:   command (grades on the host, isolation none)",
        f"executor:    local, {plan.stdout.split('local, ')[1].split(' ')[0]} at once",
    ]
    assert not run_dir.exists() and not (tmp_path / "runs").exists()

    assert _ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(run_dir),
                cwd=tmp_path).returncode == 0  # fmt: skip
    before = (run_dir / "journal.jsonl").read_bytes(), (run_dir / "run.json").read_bytes()
    more = _ksi("run", str(tasks), "--agent", "oracle", "--attempts", "2", "--run-dir",
                str(run_dir), "--dry-run", cwd=tmp_path)  # fmt: skip
    assert more.returncode == 0, more.stderr
    assert f"run dir:     {run_dir} (resumes it: 3 of 6 attempts done)" in more.stdout
    assert "attempts:    2 per task, 3 to run" in more.stdout
    other = _ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run_dir), "--dry-run",
                 cwd=tmp_path)  # fmt: skip
    assert other.returncode == 2
    assert "agent: the run has 'oracle', this command has 'nop'" in other.stderr
    after = (run_dir / "journal.jsonl").read_bytes(), (run_dir / "run.json").read_bytes()
    assert after == before


def test_dry_run_refuses_what_the_run_would_refuse_before_starting(tmp_path: Path) -> None:
    """oracle on a task with no solution: the dry run says so (exit 2), not "nothing wrong"."""
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": "bare", "prompt": "p", "eval": {"command": "true"}}],
    )
    plan = _ksi("run", str(tasks), "--agent", "oracle", "--dry-run", cwd=tmp_path)
    assert plan.returncode == 2
    assert "task 'bare' has no `solution`; oracle cannot attempt it" in plan.stderr
    assert not (tmp_path / "runs").exists()
    # The same tasks with an agent that needs no solution: the plan, exit 0.
    assert _ksi("run", str(tasks), "--agent", "nop", "--dry-run", cwd=tmp_path).returncode == 0


def _complete(words: str, env: dict[str, str] | None = None, shell: str = "bash") -> list[str]:
    """What ``ksi``'s completion offers for the last word (the shells' own protocol)."""
    protocol = {
        "bash": {"COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)},
        "zsh": {"_TYPER_COMPLETE_ARGS": words},
    }[shell]
    proc = subprocess.run(
        [sys.executable, "-m", "ksi"],
        env={**(env or _clean_env()), "_KSI_COMPLETE": f"complete_{shell}", **protocol},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_shell_completion_offers_registered_names(site: Site, tmp_path: Path) -> None:
    assert _complete("ksi run --agent or") == ["oracle"]
    assert {"command", "nop", "oracle"} <= set(_complete("ksi run --agent "))
    assert _complete("ksi run --environment s") == ["sandbox"]
    assert _complete("ksi check --environment lo") == ["local"]
    assert "command" in _complete("ksi grade --evaluator ")
    assert "custom" in _complete("ksi tasks list --task-source ")
    # Names from an installed plugin too, and descriptions for shells that show them.
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    assert _complete("ksi run --task-source fake", env=site.env()) == ["fake-source"]
    assert _complete("ksi regrade run --evaluator fake", env=site.env()) == ["fake-eval"]
    zsh = "\n".join(_complete("ksi run --environment lo", shell="zsh"))
    assert '"local":"Runs the agent as a child process on this machine with NO isolation"' in zsh

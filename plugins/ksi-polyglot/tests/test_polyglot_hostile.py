"""Hostile checkouts: exercise files linking to host files, a config nested 100,000 deep.

A checkout may come from anyone. A link out of an exercise must not put a
host file into the prompt, the agent's repo/, the oracle's answer, the diff
or the journal: every such link is a problem of the task, reported before
anything runs, and a file nested too deeply is a problem naming its field.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import exercise, ksi_cli
from ksi_polyglot.source import PolyglotTaskSource

SECRET = "host-secret-5b1c0ffee"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(
        exercise("python", "digit-sum"), root / "python" / "exercises" / "practice" / "digit-sum"
    )
    return root


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    path = tmp_path / "host" / "private.txt"
    path.parent.mkdir()
    path.write_text(f"def digit_sum(n):\n    return 0  # {SECRET}\n")
    return path


def digit_sum(root: Path) -> Path:
    return root / "python" / "exercises" / "practice" / "digit-sum"


def link(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize(
    "rel", [".docs/instructions.md", ".meta/example.py", ".meta/config.json", "digit_sum_test.py"]
)
def test_an_exercise_file_linking_to_a_host_file_is_a_problem(
    checkout: Path, host_file: Path, rel: str
) -> None:
    link(digit_sum(checkout) / rel, host_file)
    problems = [str(p) for p in PolyglotTaskSource().validate(checkout)]
    assert any(
        p.startswith(f"{digit_sum(checkout) / rel}: task 'python.digit-sum': is a symlink")
        and "outside the exercise" in p
        for p in problems
    ), problems
    res = ksi_cli("tasks", "validate", str(checkout), "--task-source", "polyglot")
    assert res.returncode == 2, res.stdout + res.stderr
    assert SECRET not in res.stdout + res.stderr


def test_the_oracle_never_carries_a_linked_host_file_into_the_run(
    checkout: Path, host_file: Path, tmp_path: Path
) -> None:
    link(digit_sum(checkout) / ".meta" / "example.py", host_file)
    run_dir = tmp_path / "run"
    res = ksi_cli(
        "run", str(checkout), "--task-source", "polyglot", "--agent", "oracle",
        "--run-dir", str(run_dir),
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert "example.py" in res.stderr and "symlink" in res.stderr
    found = [
        os.path.join(d, f)
        for d, _, files in os.walk(run_dir)
        for f in files
        if SECRET in Path(d, f).read_text(errors="replace")
    ]
    assert found == []


def test_links_inside_the_exercise_are_fine(checkout: Path) -> None:
    docs = digit_sum(checkout) / ".docs"
    (docs / "instructions.append.md").unlink()
    (docs / "instructions.append.md").symlink_to("instructions.md")
    [task] = PolyglotTaskSource().load(checkout)
    text = (docs / "instructions.md").read_text()
    assert task.prompt.count(text.strip()) == 2


def test_a_config_nested_100000_deep_is_a_clear_problem(checkout: Path) -> None:
    deep = 100_000
    config = digit_sum(checkout) / ".meta" / "config.json"
    config.write_text('{"files": {"solution": ' + "[" * deep + "]" * deep + "}}")
    [problem] = PolyglotTaskSource().validate(checkout)
    assert problem.file == str(config)
    assert problem.field.startswith("$.files.solution[0]")
    assert "too deep" in problem.message
    res = ksi_cli("tasks", "validate", str(checkout), "--task-source", "polyglot")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "config.json" in res.stderr and "$.files.solution" in res.stderr
    assert "bug in ksi" not in res.stderr and "Traceback" not in res.stderr

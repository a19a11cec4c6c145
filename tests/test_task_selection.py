"""One task selection for every command, and runs that grow (issue 15, points 6-7).

``--task-id`` (repeatable, globs, ``a,b``; ``--task-ids`` its older
spelling), ``--exclude``, ``--limit`` (``--max-tasks``) and TASKS or
``--tasks-path``, on run, check, grade, regrade and tasks validate/list, with
the real ``ksi`` command.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import test_plugins
from test_plugins import Site

from ksi.errors import UserInputError
from ksi.rundir.config import RESUME_RULES, RunConfig
from ksi.tasks.selection import TaskSelection
from tests.run_helpers import journal_lines, ksi, write_tasks

#: The temporary site directory fixture of test_plugins.py (real installed plugins).
site = test_plugins.site

IDS = ["fix-a", "fix-b", "add-c", "add-d", "doc-e"]


def _tasks(tmp_path: Path, ids: list[str] = IDS) -> Path:
    return write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": i,
                "prompt": "write ok.txt",
                "eval": {"command": "test -f ok.txt"},
                "solution": {"files": {"ok.txt": "ok"}},
            }
            for i in ids
        ],
    )


def _run_ids(run_dir: Path) -> list[str]:
    return sorted({r["task_id"] for r in journal_lines(run_dir)})


def test_selection_globs_excludes_and_limit_in_file_order() -> None:
    def pick(**kw: object) -> list[str]:
        return TaskSelection(**kw).select_ids(IDS)  # type: ignore[arg-type]

    assert pick(include=("fix-*",)) == ["fix-a", "fix-b"]
    assert pick(include=("add-c,fix-a",)) == ["fix-a", "add-c"]  # file order, not option order
    assert pick(include=("*",), exclude=("add-*", "doc-e")) == ["fix-a", "fix-b"]
    assert pick(exclude=("fix-?",), limit=2) == ["add-c", "add-d"]
    # Ids are case-sensitive, globs too: 'FIX-*' matches nothing, and says so.
    with pytest.raises(UserInputError) as caught:
        pick(include=("FIX-*", "fix-a"), exclude=("fix-z",))
    message = str(caught.value)
    assert "--task-id: glob 'FIX-*' matches no task (5 tasks)" in message
    assert "--exclude: no task 'fix-z' (5 tasks); did you mean 'fix-b', 'fix-a'?" in message


def test_run_takes_repeated_task_ids_globs_exclude_and_limit(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    # The old spelling, repeated: both are kept (the bug: only the last one was).
    both = ksi("run", str(tasks), "--agent", "nop", "--task-ids", "fix-a",
               "--task-ids", "add-c", "--run-dir", str(tmp_path / "both"))  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert _run_ids(tmp_path / "both") == ["add-c", "fix-a"]

    picked = ksi("run", "--tasks-path", str(tasks), "--agent", "nop", "--task-id", "*-?",
                 "--exclude", "fix-*", "--limit", "2",
                 "--run-dir", str(tmp_path / "glob"))  # fmt: skip
    assert picked.returncode == 0, picked.stderr
    assert _run_ids(tmp_path / "glob") == ["add-c", "add-d"]
    config = json.loads((tmp_path / "glob" / "run.json").read_text())["config"]
    assert (config["task_ids"], config["exclude_task_ids"], config["max_tasks"]) == (
        ["*-?"],
        ["fix-*"],
        2,
    )

    old = ksi("run", str(tasks), "--agent", "nop", "--task-ids", "fix-a,doc-e",
              "--max-tasks", "1", "--run-dir", str(tmp_path / "old"))  # fmt: skip
    assert old.returncode == 0, old.stderr
    assert _run_ids(tmp_path / "old") == ["fix-a"]


def test_run_takes_a_task_ids_file_with_globs_and_comments(tmp_path: Path) -> None:
    """Issue 28 #17: a long selection from a file, one id or glob a line, # comments."""
    tasks = _tasks(tmp_path)
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("# the ones to rerun\nfix-a\n\nadd-*  # both adds\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    ran = ksi("run", str(tasks), "--agent", "nop", "--task-ids-file", str(ids_file),
              "--task-id", "doc-e", "--exclude", "add-d", "--run-dir", str(run_dir))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert _run_ids(run_dir) == ["add-c", "doc-e", "fix-a"]
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert config["task_ids_file"] == str(ids_file)

    ids_file.write_text("fix-a\nfxi-b\n", encoding="utf-8")
    typo = ksi("run", str(tasks), "--agent", "nop", "--task-ids-file", str(ids_file),
               "--run-dir", str(tmp_path / "typo"))  # fmt: skip
    assert typo.returncode == 2
    assert f"--task-ids-file {ids_file}: no task 'fxi-b'" in typo.stderr
    assert "did you mean 'fix-b'" in typo.stderr

    only_comments = tmp_path / "none.txt"
    only_comments.write_text("# nothing yet\n", encoding="utf-8")
    empty = ksi("run", str(tasks), "--agent", "nop", "--task-ids-file", str(only_comments),
                "--run-dir", str(tmp_path / "empty"))  # fmt: skip
    assert empty.returncode == 2
    assert "holds no task id" in empty.stderr
    assert not (tmp_path / "empty").exists()
    missing = ksi("run", str(tasks), "--agent", "nop", "--task-ids-file",
                  str(tmp_path / "absent.txt"), "--run-dir", str(tmp_path / "m"))  # fmt: skip
    assert missing.returncode == 2
    assert "--task-ids-file: cannot read" in missing.stderr


def test_a_pattern_that_matches_nothing_is_an_error_naming_it(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    run_dir = tmp_path / "run"
    for args, expected in (
        (("--task-id", "fix-*", "--task-id", "fxi-b"), "--task-id: no task 'fxi-b'"),
        (("--exclude", "docs-*"), "--exclude: glob 'docs-*' matches no task"),
    ):
        proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run_dir), *args)
        assert proc.returncode == 2
        assert expected in proc.stderr
        assert str(tasks) in proc.stderr
        assert not run_dir.exists()
    everything = ksi("run", str(tasks), "--agent", "nop", "--exclude", "*", "--run-dir",
                     str(run_dir))  # fmt: skip
    assert everything.returncode == 2
    assert "no tasks left to work on" in everything.stderr and "--exclude '*'" in everything.stderr


def test_tasks_validate_and_list_select_too(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    listing = ksi("tasks", "list", str(tasks), "--task-id", "add-*", "--json")
    assert listing.returncode == 0, listing.stderr
    assert [r["task_id"] for r in json.loads(listing.stdout)] == ["add-c", "add-d"]
    valid = ksi("tasks", "validate", "--tasks-path", str(tasks), "--exclude", "add-*")
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout == f"OK: 3 tasks selected by --exclude 'add-*' in {tasks}\n"
    bad = ksi("tasks", "list", str(tasks), "--task-id", "nope")
    assert bad.returncode == 2 and "--task-id: no task 'nope'" in bad.stderr


def test_grade_takes_the_tasks_path_positionally_and_one_task(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ok.txt").write_text("ok")
    graded = ksi("grade", str(tasks), "--task-id", "doc-*", "--workspace", str(ws))
    assert graded.returncode == 0, graded.stderr
    assert "task:       doc-e" in graded.stdout and "score:      1.0" in graded.stdout
    many = ksi("grade", str(tasks), "--task-id", "fix-*", "--workspace", str(ws))
    assert many.returncode == 2
    assert "picks 2 tasks" in many.stderr and "'fix-a', 'fix-b'" in many.stderr


def test_check_and_regrade_select_tasks(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    check = ksi("check", str(tasks), "--task-id", "fix-*", "--run-dir", str(tmp_path / "check"),
                "--json")  # fmt: skip
    assert check.returncode == 0, check.stderr
    assert [t["task_id"] for t in json.loads(check.stdout)["tasks"]] == ["fix-a", "fix-b"]

    run_dir = tmp_path / "run"
    assert ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(run_dir)).returncode == 0
    regrade = ksi("regrade", str(run_dir), "--task-id", "add-*", "--exclude", "add-d")
    assert regrade.returncode == 0, regrade.stderr
    regraded = [r["task_id"] for r in journal_lines(run_dir) if r.get("regraded_at")]
    assert regraded == ["add-c"]
    unknown = ksi("regrade", str(run_dir), "--task-id", "zzz")
    assert unknown.returncode == 2 and "--task-id: no task 'zzz'" in unknown.stderr


# -- resume: runs that grow -----------------------------------------------------


def test_every_run_setting_has_a_resume_rule() -> None:
    assert set(RESUME_RULES) == {f.name for f in attrs.fields(RunConfig)}


def test_raising_attempts_and_adding_tasks_on_resume(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, ["a", "b"])
    run_dir = tmp_path / "run"
    base = ("run", str(tasks), "--agent", "oracle", "--run-dir", str(run_dir))
    assert ksi(*base, "--attempts", "2").returncode == 0
    assert len(journal_lines(run_dir)) == 4

    more = ksi(*base, "--attempts", "3")
    assert more.returncode == 0, more.stderr
    lines = journal_lines(run_dir)
    assert sorted((r["task_id"], r["attempt"]) for r in lines) == [
        (t, n) for t in ("a", "b") for n in (1, 2, 3)
    ]
    assert "solved: 2/2" in more.stdout

    records = [json.loads(line) for line in tasks.read_text().splitlines()]
    write_tasks(tasks, [*records, records[0] | {"task_id": "c"}])
    grown = ksi(*base, "--attempts", "3")
    assert grown.returncode == 0, grown.stderr
    assert "solved: 3/3" in grown.stdout
    assert len(journal_lines(run_dir)) == 9
    state = json.loads((run_dir / "run.json").read_text())
    assert state["task_ids"] == ["a", "b", "c"] and state["run_complete"] is True

    fewer = ksi(*base, "--attempts", "2")
    assert fewer.returncode == 2
    assert "attempts: the run has 3, this command has 2" in fewer.stderr
    assert "give --attempts 3 or more" in fewer.stderr
    other = ksi(*base, "--attempts", "3", "--model", "m2")
    assert other.returncode == 2
    assert "model: the run has None, this command has 'm2'" in other.stderr
    assert "give --model as the run has it, or start a new --run-dir" in other.stderr
    assert len(journal_lines(run_dir)) == 9


def test_a_session_on_some_tasks_keeps_the_others_and_the_run_incomplete(
    tmp_path: Path,
) -> None:
    tasks = _tasks(tmp_path, ["a", "b"])
    run_dir = tmp_path / "run"
    base = ("run", str(tasks), "--agent", "oracle", "--run-dir", str(run_dir))
    assert ksi(*base, "--task-id", "a").returncode == 0
    grown = ksi(*base, "--task-id", "a", "--attempts", "2")
    assert grown.returncode == 0, grown.stderr
    state = json.loads((run_dir / "run.json").read_text())
    assert state["task_ids"] == ["a"]
    assert ksi(*base, "--task-id", "b", "--attempts", "2").returncode == 0
    state = json.loads((run_dir / "run.json").read_text())
    assert state["task_ids"] == ["a", "b"] and state["run_complete"] is True
    more = ksi(*base, "--task-id", "b", "--attempts", "3")
    assert more.returncode == 0
    # a has 2 of its 3 attempts: the run is not complete until a session runs them.
    assert json.loads((run_dir / "run.json").read_text())["run_complete"] is False
    report = ksi("report", str(run_dir))
    assert "solved: 2/2" in report.stdout


def test_check_checks_what_it_can_and_lists_tasks_without_a_solution(tmp_path: Path) -> None:
    records = [
        {"task_id": "good", "prompt": "p", "eval": {"command": "test -f ok.txt"},
         "solution": {"files": {"ok.txt": "ok"}}},
        {"task_id": "no-solution", "prompt": "p", "eval": {"command": "test -f ok.txt"}},
        {"task_id": "free-pass", "prompt": "p", "eval": {"command": "true"},
         "solution": {"files": {"ok.txt": "ok"}}},
    ]  # fmt: skip
    tasks = write_tasks(tmp_path / "tasks.jsonl", records)
    proc = ksi("check", str(tasks), "--run-dir", str(tmp_path / "check"))
    assert proc.returncode == 1, proc.stderr  # free-pass is broken
    lines = proc.stdout.splitlines()
    assert "BROKEN free-pass: passes with no work (nop scored 1.00)" in lines
    assert any(
        ln.startswith("NOT CHECKED no-solution: task 'no-solution' has no `solution`")
        for ln in lines
    )
    assert lines[-1].startswith("1/3 tasks OK, 1 broken, 1 not checked")
    assert _run_ids(tmp_path / "check" / "oracle") == ["free-pass", "good"]
    assert _run_ids(tmp_path / "check" / "nop") == ["free-pass", "good", "no-solution"]


def test_check_grades_with_the_task_sources_own_evaluator(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("first\nsecond\n")
    proc = ksi("check", str(tasks), "--task-source", "fake-source", "--run-dir",
               str(tmp_path / "check"), env=site.env())  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # nothing broken; nothing oracle could check
    assert proc.stdout.splitlines()[-1].startswith("0/2 tasks OK, 0 broken, 2 not checked")
    records = journal_lines(tmp_path / "check" / "nop")
    assert sorted((r["task_id"], r["evaluator"], r["score"]) for r in records) == [
        ("t1", "fake-eval", 0.0),
        ("t2", "fake-eval", 0.0),
    ]
    assert not (tmp_path / "check" / "oracle").exists()

"""Task ids become directory names that never collide (issue 11 item 9), and a run is
never seeded from a directory holding it (item 17)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ksi.errors import TaskLoadError
from ksi.layout import RunLayout, dirname_clashes, folds_case, task_dirname
from ksi.models import TaskSpec
from ksi.tasks.loaders import load_tasks_for_source
from tests.run_helpers import journal_lines, ksi, write_tasks

#: The attack: the second id is the name the first one was given before.
BANG = "a!"
OLD_NAME = "a-242ed53862"


def _collision_tasks(tmp_path: Path) -> Path:
    return write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": BANG,
                "prompt": "p",
                "files": {"first.txt": "first\n"},
                "eval": {"command": "test -f first.txt && test ! -e second.txt"},
            },
            {
                "task_id": OLD_NAME,
                "prompt": "p",
                "files": {"second.txt": "second\n"},
                "eval": {"command": "test -f second.txt && test ! -e first.txt"},
            },
        ],
    )


def test_a_task_never_starts_from_another_tasks_files(tmp_path: Path) -> None:
    tasks = _collision_tasks(tmp_path)
    run = tmp_path / "run"
    proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    scores = {r["task_id"]: r["score"] for r in journal_lines(run)}
    # Each eval checks its own file is there and the other task's is not.
    assert scores == {BANG: 1.0, OLD_NAME: 1.0}
    assert sorted(p.name for p in (run / "seeds").iterdir()) == ["a%21", OLD_NAME]
    assert sorted(p.name for p in (run / "attempts").iterdir()) == ["a%21", OLD_NAME]
    assert [p.name for p in (run / "seeds" / "a%21" / "repo").iterdir()] == ["first.txt"]
    assert [p.name for p in (run / "seeds" / OLD_NAME / "repo").iterdir()] == ["second.txt"]


#: Ids that were already safe under the old rule keep their directory name.
SAFE = ["hello", "t0", "a.b_c-1", "-x", "A" * 80, "Task-7.v2", "x" * 100]


@pytest.mark.parametrize("task_id", SAFE)
def test_readable_ids_keep_their_directory_name(task_id: str) -> None:
    assert task_dirname(task_id) == task_id


TRICKY = [
    BANG,
    OLD_NAME,
    "a",
    "a_",
    "a%21",
    "a%2521",
    "%",
    "~",
    "",
    ".",
    "..",
    ".hidden",
    "%2Ehidden",
    "a/b",
    "a\\b",
    "a b",
    "a\x1b[2Jb",
    "café",
    "cafe\u0301",
    "Foo",
    "foo",
    "\udcff",
    "x" * 100,
    "x" * 101,
    "x" * 300,
    "x" * 299 + "y",
    "é" * 200,
    "é" * 199 + "e",
]


def test_every_id_gets_its_own_short_safe_name() -> None:
    names = [task_dirname(t) for t in TRICKY]
    assert len(set(names)) == len(TRICKY), dict(zip(TRICKY, names, strict=True))
    for name in names:
        assert name not in ("", ".", "..") and not name.startswith(".")
        assert "/" not in name and "\\" not in name and name.isascii() and name.isprintable()
        assert len(name) <= 100


def test_escaped_names_read_back_as_the_id() -> None:
    from urllib.parse import unquote

    for task_id in [BANG, "a b", "a/b", "café", ".hidden", "a%21", "~x", "a\x1b[2Jb"]:
        assert unquote(task_dirname(task_id), errors="strict") == task_id


def test_ids_differing_only_in_case_clash_only_where_case_is_ignored() -> None:
    assert dirname_clashes(["Foo", "foo", BANG, OLD_NAME], fold_case=False) == []
    assert dirname_clashes(["Foo", "foo", BANG, OLD_NAME], fold_case=True) == [("Foo", "foo")]


def test_case_only_ids_run_apart_or_are_refused_by_the_filesystem(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"task_id": "Foo", "prompt": "p", "eval": {"command": "true"}},
            {"task_id": "foo", "prompt": "p", "eval": {"command": "true"}},
        ],
    )
    run = tmp_path / "run"
    proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run))
    if folds_case(tmp_path):  # macOS, Windows: refused before anything is written
        assert proc.returncode == 2
        assert "task 'foo': $.task_id" in proc.stderr and "'Foo'" in proc.stderr
        assert not run.exists()
    else:
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in (run / "attempts").iterdir()) == ["Foo", "foo"]


def test_case_only_ids_are_refused_naming_both_where_case_is_ignored(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": i, "prompt": "p"} for i in ("Foo", "bar", "foo", BANG, OLD_NAME)],
    )
    specs = load_tasks_for_source("custom", tasks)
    with pytest.raises(TaskLoadError) as info:
        RunLayout(tmp_path / "run").check_tasks(specs, str(tasks), fold_case=True)
    (problem,) = info.value.problems
    assert str(problem).startswith(f"{tasks}:line 3: task 'foo': $.task_id: would share ")
    assert "with task 'Foo'" in str(problem) and "rename one of the two" in str(problem)
    RunLayout(tmp_path / "run").check_tasks(specs, str(tasks), fold_case=False)  # no error


def test_folds_case_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "Probe").mkdir()
    expected = (tmp_path / "PROBE").exists()  # this machine's own answer
    assert folds_case(tmp_path / "not" / "yet") is expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Probe"]


def test_a_run_from_before_the_escaping_resumes_and_regrades(tmp_path: Path) -> None:
    """An old run named ``a!`` ``a-242ed53862``: its records keep that path."""
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"task_id": BANG, "prompt": "p", "eval": {"command": "true"}},
            {"task_id": "ok", "prompt": "p", "eval": {"command": "true"}},
        ],
    )
    run = tmp_path / "run"
    args = ["run", str(tasks), "--agent", "nop", "--attempts", "2", "--run-dir", str(run)]
    assert ksi(*args).returncode == 0
    # Make it the run an older KSI would have left after a kill: old names, attempt 2 missing.
    (run / "attempts" / "a%21").rename(run / "attempts" / OLD_NAME)
    (run / "seeds" / "a%21").rename(run / "seeds" / OLD_NAME)
    shutil.rmtree(run / "attempts" / OLD_NAME / "2")
    lines = []
    for rec in journal_lines(run):
        if rec["task_id"] == BANG and rec["attempt"] == 2:
            continue
        rec["attempt_dir"] = rec["attempt_dir"].replace("a%21", OLD_NAME)
        lines.append(json.dumps(rec) + "\n")
    (run / "journal.jsonl").write_text("".join(lines))

    proc = ksi(*args)
    assert proc.returncode == 0, proc.stderr
    records = journal_lines(run)
    keys = [(r["task_id"], r["attempt"]) for r in records]
    assert sorted(keys) == [(BANG, 1), (BANG, 2), ("ok", 1), ("ok", 2)]  # only the gap ran
    dirs = {(r["task_id"], r["attempt"]): r["attempt_dir"] for r in records}
    assert dirs[(BANG, 1)] == f"attempts/{OLD_NAME}/1"
    assert dirs[(BANG, 2)] == "attempts/a%21/2"
    assert (run / "attempts" / OLD_NAME / "1" / "captured" / "repo").is_dir()

    report = ksi("report", str(run), "--json")
    assert report.returncode == 0, report.stderr
    per_task = {t["task_id"]: t for t in json.loads(report.stdout)["summary"]["tasks"]}
    assert per_task[BANG]["attempts"] == 2

    regrade = ksi("regrade", str(run))
    assert regrade.returncode == 0, regrade.stderr
    regraded = [r for r in journal_lines(run) if r.get("regraded_at")]
    assert sorted((r["task_id"], r["attempt"]) for r in regraded) == sorted(keys)


# -- item 17: a run never seeds from a directory that holds it ----------------------


def test_workspace_dir_dot_with_the_run_beside_the_tasks_is_refused(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print(1)\n")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"task_id": "ok", "prompt": "p", "files": {"a.txt": "a"}},
            {"task_id": "whole", "prompt": "p", "workspace_dir": "."},
        ],
    )
    proc = ksi("run", str(tasks), "--agent", "nop", "--runs-root", "runs", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{tasks}:line 2: task 'whole': $.workspace_dir: " in proc.stderr
    assert "contain the run directory" in proc.stderr
    assert "--run-dir or --runs-root" in proc.stderr  # the fix
    assert not (tmp_path / "runs").exists()  # nothing half-done

    # A resume of a run placed there is refused the same way, before anything is copied.
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run))
    assert proc.returncode == 2 and "contain the run directory" in proc.stderr
    assert sorted(p.name for p in run.iterdir()) == []

    # The same tasks with the run elsewhere run fine.
    run.rmdir()
    (tmp_path / "runs").rmdir()
    elsewhere = tmp_path.parent / f"{tmp_path.name}-runs"
    proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(elsewhere))
    try:
        assert proc.returncode == 0, proc.stderr
        seeded = elsewhere / "seeds" / "whole" / "repo"
        assert (seeded / "main.py").read_text() == "print(1)\n"
        assert not (seeded / "runs").exists()
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_starting_files_inside_the_run_are_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    inside = run / "attempts" / "x"
    inside.mkdir(parents=True)
    spec = TaskSpec(id="t", prompt="p", metadata={"repo_path": str(inside)})
    with pytest.raises(TaskLoadError) as info:
        RunLayout(run).check_tasks([spec], "my tasks")
    assert str(info.value.problems[0]).startswith("my tasks: task 't': metadata['repo_path']: ")
    assert "inside the run directory" in str(info.value)
    # A symlinked run directory is the same directory.
    link = tmp_path / "link"
    link.symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(TaskLoadError, match="contain the run directory"):
        RunLayout(run).check_tasks([TaskSpec(id="t", metadata={"repo_path": str(link)})])

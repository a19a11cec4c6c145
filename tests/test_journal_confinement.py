"""``ksi regrade`` and the distillers read only inside the run, whatever its journal says.

A run directory may come from someone else; its journal names each attempt's
directory. A record whose ``attempt_dir`` leaves the run (``../x``, an
absolute path), or an attempt directory that is a symlink to elsewhere, must
not have another directory graded (and its logs written there), nor its files
turned into the notes a distiller writes or the evidence an agent distiller
is shown (issue 29 §1; the view's and ``ksi show``'s are in
tests/test_view_confinement.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import env_without_ksi_settings, journal_lines, ksi, write_tasks

SECRET = "host-secret-9e1f"
TASKS = [
    {"task_id": t, "prompt": "p", "eval": {"command": "test -f done"}}
    for t in ("up", "absolute", "linked", "fine")
]


def _outside(where: Path) -> Path:
    """A directory holding what an attempt directory holds, all secret."""
    (where / "captured" / "repo").mkdir(parents=True)
    (where / "captured" / "repo" / "done").write_text(SECRET)
    (where / "diff.patch").write_text(
        f"diff --git a/{SECRET}.py b/{SECRET}.py\n--- /dev/null\n+++ b/{SECRET}.py\n"
        f"@@ -0,0 +1 @@\n+{SECRET}\n"
    )
    (where / "trajectory.json").write_text(
        json.dumps({"agent": {"name": SECRET}, "steps": [{"source": "user", "message": SECRET}]})
    )
    return where


def _run(tmp_path: Path, *args: str) -> None:
    res = ksi(
        "run", str(tmp_path / "tasks.jsonl"), "--agent", "command",
        "--agent-option", "cmd=touch repo/done", "--run-dir", str(tmp_path / "run"), *args,
        env=env_without_ksi_settings(),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert SECRET not in res.stdout + res.stderr


def _hostile_run(tmp_path: Path, *args: str) -> tuple[Path, list[Path]]:
    """A finished run whose journal and attempt directories point out of it."""
    write_tasks(tmp_path / "tasks.jsonl", TASKS)
    run = tmp_path / "run"
    _run(tmp_path, *args)
    outside = [_outside(tmp_path / f"outside-{n}") for n in range(3)]
    lines = journal_lines(run)
    for line in lines:
        if line["task_id"] == "up":
            line["attempt_dir"] = "../outside-0"
        if line["task_id"] == "absolute":
            line["attempt_dir"] = str(outside[1])
    (run / "journal.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    linked = run / "attempts" / "linked" / "1"
    linked.rename(tmp_path / "was-linked")
    linked.symlink_to(outside[2], target_is_directory=True)
    return run, outside


def _holding(root: Path, text: str) -> list[str]:
    return [
        str(p)
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and text.encode() in p.read_bytes()
    ]


def test_regrade_grades_only_attempt_directories_inside_the_run(tmp_path: Path) -> None:
    run, outside = _hostile_run(tmp_path)
    before = len(journal_lines(run))
    res = ksi("regrade", str(run), env=env_without_ksi_settings())
    assert res.returncode == 0, res.stderr
    regraded = [line for line in journal_lines(run)[before:]]
    assert [line["task_id"] for line in regraded] == ["fine"]  # the one inside: regraded
    assert (run / "attempts" / "fine" / "1" / "regrade").is_dir()
    for where in outside:
        assert not (where / "regrade").exists(), f"regrade wrote its logs in {where}"
    assert SECRET not in res.stdout + res.stderr
    # Each one skipped is named, with why, and counted: never a silent partial regrade.
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert sorted(warnings[:-1]) + warnings[-1:] == [
        f"warning: task absolute attempt 1 not regraded: its journal record names "
        f"'{outside[1]}', outside the run directory",
        "warning: task linked attempt 1 not regraded: attempts/linked/1/captured/repo is "
        "reached through a symlink (or a file stands in its way)",
        "warning: task up attempt 1 not regraded: its journal record names '../outside-0', "
        "outside the run directory",
        "warning: ksi regrade: 1 attempt(s) regraded, 3 not (above): their directory is "
        "outside the run or reached through a symlink, and a run directory from elsewhere "
        "must not have other files graded; restore the attempt directories",
    ]


def test_distillers_take_no_evidence_from_outside_the_run(tmp_path: Path) -> None:
    seen = tmp_path / "seen-evidence.json"
    distil = tmp_path / "distil.sh"
    distil.write_text(f"cp repo/evidence.json {seen}\necho '{{\"notes\": []}}' > repo/notes.json\n")
    agent = ("--distiller", "agent", "--distiller-option", "agent=command")
    agent += ("--distiller-option", f"cmd=sh {distil}")
    run, _ = _hostile_run(tmp_path, *agent)
    _run(tmp_path, "--generations", "2", *agent)  # generation 1 is distilled now
    evidence = json.loads(seen.read_text())["evidence"]
    by_task = {t["task_id"]: t["attempts"][0] for t in evidence}
    assert by_task["fine"]["files_touched"] == ["done"]  # the attempt inside: read
    for task in ("up", "absolute", "linked"):
        assert (by_task[task]["files_touched"], by_task[task]["trajectory"]) == ([], None)
    assert SECRET not in seen.read_text()
    # The evidence distiller's notes (the agent wrote none: its fallback) hold none either.
    assert _holding(run, SECRET) == []

"""Text KSI did not write never drives the terminal (issue 11 item 19).

A task id holding ``ESC [2J`` (clear screen) and an eval printing ``ESC ]0;owned BEL``
(retitle the window) are shown as visible escapes by ``ksi run``, ``report``,
``grade``, ``tasks list`` and error messages, in plain and in rich (terminal) output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ksi.text import printable
from tests.run_helpers import ksi, write_tasks

EVIL_ID = "evil\x1b[2J"
SHOWN_ID = "evil\\x1b[2J"
OSC = "\x1b]0;owned\x07"
SHOWN_OSC = "\\x1b]0;owned\\x07"


def test_printable_escapes_controls_and_keeps_ordinary_text() -> None:
    assert printable(EVIL_ID) == SHOWN_ID
    assert printable(OSC) == SHOWN_OSC
    assert printable("csi\x9b2J del\x7f nul\x00") == "csi\\x9b2J del\\x7f nul\\x00"
    assert printable("rtl\u202eexe.txt iso\u2066") == "rtl\\u202eexe.txt iso\\u2066"
    assert printable("lone \udcff") == "lone \\udcff"
    assert printable("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert printable("a\r\nb\tc\rd\x1b", multiline=True) == "a\nb\tc\\rd\\x1b"
    ordinary = "café 日本語 emoji 🎉 nbsp\u00a0 [bold]x[/] back\\slash"
    assert printable(ordinary) == ordinary == printable(ordinary, multiline=True)


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": EVIL_ID,
                "prompt": "p",
                "eval": {"command": f"printf '{OSC}'; echo; printf 'bad\\033[31m' >&2; exit 1"},
            },
            {"task_id": "markup[/]", "prompt": "p", "eval": {"command": "true"}},
        ],
    )


def _clean(proc: subprocess.CompletedProcess[str]) -> str:
    """stdout + stderr, after checking neither holds a raw ESC or BEL."""
    out = proc.stdout + proc.stderr
    assert "\x1b" not in out and "\x07" not in out, out
    return out


def test_run_report_list_and_grade_show_escapes_not_raw_bytes(
    tmp_path: Path, hostile: Path
) -> None:
    run = tmp_path / "run"
    proc = ksi("run", str(hostile), "--agent", "nop", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    assert SHOWN_ID in _clean(proc) and "markup[/]" in proc.stdout

    report = ksi("report", str(run))
    assert report.returncode == 0
    assert SHOWN_ID in _clean(report)
    report_json = ksi("report", str(run), "--json")
    assert "\\u001b[2J" in _clean(report_json)

    listing = ksi("tasks", "list", str(hostile))
    assert listing.returncode == 0
    out = _clean(listing)
    assert SHOWN_ID in out and SHOWN_OSC in out  # the id and the eval command

    workspace = tmp_path / "ws"
    workspace.mkdir()
    grade = ksi(
        "grade", "--tasks-path", str(hostile), "--task-id", EVIL_ID, "--workspace", str(workspace)
    )
    assert grade.returncode == 0, grade.stderr
    out = _clean(grade)
    assert f"task:       {SHOWN_ID}" in out
    assert SHOWN_OSC in out and "bad\\x1b[31m" in out  # the eval's stdout and stderr tails


def test_error_messages_quoting_user_text_are_escaped(tmp_path: Path, hostile: Path) -> None:
    missing = ksi(
        "grade", "--tasks-path", str(hostile), "--task-id", "nope" + OSC, "--workspace", "."
    )
    assert missing.returncode == 2 and "nope" in _clean(missing)

    bad = write_tasks(
        tmp_path / "bad.jsonl",
        [{"task_id": EVIL_ID, "prompt": "p", "files": {"../" + OSC: "x"}, OSC: 1}],
    )
    for args in (["tasks", "validate", str(bad)], ["run", str(bad), "--agent", "nop"]):
        proc = ksi(*args, cwd=tmp_path)
        assert proc.returncode == 2
        out = _clean(proc)
        assert "unknown key" in out and "owned" in out and "'..' is not allowed" in out

    # A resume refused because a task changed quotes its id as it is.
    tasks = write_tasks(tmp_path / "grow.jsonl", [{"task_id": EVIL_ID, "prompt": "p"}])
    run = tmp_path / "grown"
    assert ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run)).returncode == 0
    write_tasks(tasks, [{"task_id": EVIL_ID, "prompt": "another prompt"}])
    proc = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run))
    assert proc.returncode == 2
    assert f"tasks whose prompt or eval changed: {SHOWN_ID}" in _clean(proc)


def _in_a_terminal(*args: str) -> str:
    """Run ``ksi`` with a pseudo-terminal as stdout and stderr (the rich output path)."""
    master, slave = os.openpty()
    env = {**os.environ, "COLUMNS": "200", "LINES": "50", "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ksi", *args], stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_rich_terminal_output_escapes_task_ids_too(tmp_path: Path, hostile: Path) -> None:
    run = tmp_path / "run"
    for args in (
        ["run", str(hostile), "--agent", "nop", "--run-dir", str(run)],
        ["report", str(run)],
    ):
        out = _in_a_terminal(*args)
        # Rich draws with its own escapes; the task's never reach the terminal.
        assert "\x1b[2J" not in out and "\x1b]0;owned" not in out
        assert SHOWN_ID in out and "markup[/]" in out


def test_the_viewer_shows_a_hostile_run_directory_path_escaped(tmp_path: Path) -> None:
    """A run directory named with an escape sequence and a right-to-left override is
    printed in the page's ``<code>`` path as visible escapes (issue 29 §5)."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p"}])
    run_dir = tmp_path / "run\x1b[31m\u202eevil"
    done = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    page = tmp_path / "page.html"
    viewed = ksi("view", str(run_dir), "-o", str(page))
    assert viewed.returncode == 0, viewed.stderr
    html = page.read_text()
    assert "\x1b" not in html and "\u202e" not in html
    assert "run\\x1b[31m\\u202eevil" in html

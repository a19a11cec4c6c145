"""What a run records and shows about capture: a bounded list, full counts, a line for the user."""

from __future__ import annotations

import json
from pathlib import Path

from ksi.attempt.capture import MAX_LISTED_SKIPS
from tests.run_helpers import journal_lines, write_tasks
from tests.run_helpers import ksi as ksi_cli

PLANTED = 1500


def test_many_planted_test_files_keep_the_journal_line_small_and_are_counted(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": "t",
                "prompt": "p",
                "files": {"a.py": "x = 1\n"},
                "eval": {"command": "true"},
            }
        ],
    )
    plant = (
        f"mkdir -p repo/p && cd repo/p && i=0; "
        f"while [ $i -lt {PLANTED} ]; do : > test_$i.py; i=$((i+1)); done"
    )
    run_dir = tmp_path / "run"
    res = ksi_cli(
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={plant}",
        "--run-dir", str(run_dir),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    [record] = journal_lines(run_dir)
    assert len(record["skipped_files"]) == MAX_LISTED_SKIPS
    assert record["skipped_counts"] == {"test_created": PLANTED}
    line = (run_dir / "journal.jsonl").read_text().splitlines()[0]
    assert len(line) < 40_000, len(line)
    shown = f"capture skipped {PLANTED:,} paths in 1 attempt(s)"
    assert shown in res.stdout
    report = ksi_cli("report", str(run_dir), "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["summary"]["skipped_files"] == PLANTED

"""What a run records and shows about capture: a bounded list, full counts, a line for the user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ksi.attempt.capture import MAX_LISTED_SKIPS
from tests.run_helpers import env_without_ksi_settings, journal_lines, write_tasks
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


def _unprivileged() -> list[str]:
    """Argv prefix that makes permission bits bind on KSI itself (root reads everything)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permission bits do not bind")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize(
    ("cmd", "kind", "says"),
    [
        ("chmod 000 .", "repo_unreadable", "removed the permissions of its workspace"),
        ("cd .. && rm -rf workspace", "repo_missing", "the agent deleted its workspace"),
    ],
    ids=["chmod-000", "deleted"],
)
def test_a_run_records_what_the_agent_did_to_its_workspace(
    tmp_path: Path, cmd: str, kind: str, says: str
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": "t", "prompt": "p", "files": {"a.py": "x\n"}, "eval": {"command": "true"}}],
    )
    run_dir = tmp_path / "run"
    res = subprocess.run(
        [*_unprivileged(), sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "command",
         "--agent-option", f"cmd={cmd}", "--run-dir", str(run_dir)],
        capture_output=True, text=True, timeout=120, env=env_without_ksi_settings(),
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    [record] = journal_lines(run_dir)
    [entry] = record["skipped_files"]
    assert entry["kind"] == kind and says in entry["reason"], entry
    assert "repo/ missing: the agent deleted it;" not in entry["reason"]
    assert record["skipped_counts"] == {kind: 1}

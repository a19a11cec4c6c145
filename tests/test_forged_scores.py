"""Issue 29 §2: a score.json written by the agent's code while the eval command runs it.

The attack, reproduced: the agent writes a wrong ``calc.py`` that, when the
eval command imports it, writes ``{"score": 1.0}`` to ``score.json``. The
tests fail (exit 1), yet by the spec the eval command's ``score.json``
overrides the exit code, and a process cannot tell its own code from the
agent's code it imported. What KSI guarantees instead, on the host and in
the host grading sandbox alike:

* an attempt given full marks by score.json while the eval command failed is
  flagged: in its record, in the run's summary (and the JSON report) and in
  the viewer (``ksi show``, ``ksi view``);
* ``--evaluator-option score_json=false`` makes the exit code alone decide,
  so such a forgery scores 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.run_helpers import journal_lines, ksi, write_tasks

TESTS_PY = """\
import calc
import sys
ok = calc.add(2, 3) == 5
print("tests", "passed" if ok else "FAILED")
sys.exit(0 if ok else 1)
"""
FORGER = (
    "import json\n"
    "json.dump({'score': 1.0}, open('score.json', 'w'))\n"
    "def add(a, b):\n"
    "    return a - b\n"
)
AGENT = f"cat > repo/calc.py <<'EOF'\n{FORGER}EOF\n"
ISOLATIONS = [
    pytest.param("none", id="host"),
    pytest.param(
        "sandbox",
        id="sandbox",
        marks=[
            pytest.mark.sandbox,
            pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
        ],
    ),
]


def _run(tmp_path: Path, isolation: str, *extra: str) -> tuple[Path, Path, str]:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": "forged",
                "prompt": "Make add() add.",
                "files": {"tests.py": TESTS_PY, "calc.py": "def add(a, b):\n    return 0\n"},
                "eval": {"command": "python3 tests.py"},
            },
            {
                "task_id": "honest-partial",
                "prompt": "Half of it.",
                "eval": {
                    "command": 'python3 -c "import json, sys; '
                    "json.dump({'score': 0.5}, open('score.json', 'w')); sys.exit(1)\""
                },
            },
        ],
    )
    run_dir, report = tmp_path / "run", tmp_path / "report.json"
    res = ksi(
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={AGENT}",
        "--eval-isolation", isolation, "--run-dir", str(run_dir),
        "--output-json", str(report), *extra, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return run_dir, report, res.stdout


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_full_marks_from_score_json_while_the_tests_fail_are_flagged(
    tmp_path: Path, isolation: str
) -> None:
    run_dir, report, out = _run(tmp_path, isolation)
    records = {r["task_id"]: r for r in journal_lines(run_dir)}
    forged = records["forged"]
    # The spec's contract holds (score.json overrides the exit code)...
    assert (forged["score"], forged["eval"]["exit_code"]) == (1.0, 1)
    assert forged["eval"]["details"]["isolation"] == isolation
    # ...and the record says plainly that the two disagree.
    assert forged["eval"]["details"]["score_conflict"] is True
    assert any("exited 1" in n and "agent" in n for n in forged["eval"]["notes"])
    # Honest partial credit (exit 1, score 0.5) is the contract working, not a conflict.
    assert "score_conflict" not in records["honest-partial"]["eval"]["details"]
    # The summary: the printed one and the JSON report.
    assert "suspect scores: 1 attempt" in out and "forged/1" in out
    summary = json.loads(report.read_text())["summary"]
    assert summary["score_conflicts"] == 1
    # The viewer: `ksi show` of the run and of the attempt, and the HTML page.
    shown = ksi("show", str(run_dir))
    assert "suspect scores: 1 attempt" in shown.stdout, shown.stdout + shown.stderr
    attempt = ksi("show", str(run_dir), "forged", "1")
    assert "suspect" in attempt.stdout and "exited 1" in attempt.stdout
    page = tmp_path / "page.html"
    assert ksi("view", str(run_dir), "-o", str(page)).returncode == 0
    html = page.read_text(encoding="utf-8")
    assert "solved (1.00), suspect" in html and "1 suspect score" in html


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_score_json_false_lets_only_the_exit_code_decide(tmp_path: Path, isolation: str) -> None:
    run_dir, _, _ = _run(tmp_path, isolation, "--evaluator-option", "score_json=false")
    records = {r["task_id"]: r for r in journal_lines(run_dir)}
    forged = records["forged"]
    assert (forged["score"], forged["eval"]["details"]["score_source"]) == (0.0, "exit_code")
    assert "score.json ignored: only the tests' exit status counts" in forged["eval"]["notes"]
    assert records["honest-partial"]["score"] == 0.0

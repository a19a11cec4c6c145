"""An attempt's steps (``trajectory.json``) in ``ksi view``, ``ksi show --steps`` and
``ksi export trajectories`` (issue 27, "Seeing it")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ksi.trajectories import TRAJECTORY_FILE, from_atif, read_trajectory
from ksi.view.html import render_report
from ksi.view.runs import load_run_view
from tests.run_helpers import ksi
from tests.view_runs import HOSTILE_OUTPUT, make_mixed_run, make_steps_run, record, write_run

#: Steps 7, 14, 21 and 28 of a 30-step trajectory fail (every seventh).
FAILED_OF_30 = 4


def _page(run: Path, out: Path) -> str:
    result = ksi("view", str(run), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out.read_text(encoding="utf-8")


def test_the_report_lists_every_step_collapsed_with_calls_outputs_failures_and_tokens(
    tmp_path: Path,
) -> None:
    run = make_steps_run(tmp_path / "run", 30)
    html = _page(run, tmp_path / "page.html")
    steps = re.findall(r'<div class="step src-(\w+)( failed)?"', html)
    assert len(steps) == 30
    assert steps[0] == ("user", "")
    assert sum(1 for _, failed in steps if failed) == FAILED_OF_30
    counts = re.search(r'data-testid="step-counts">(.*?)</span></span>', html, re.S)
    assert counts is not None
    assert "30 steps" in counts.group(1) and "4 tool errors" in counts.group(1)
    assert "Steps (30 steps, 29 tool calls, " in html
    # Collapsed: the steps piece and every step start closed.
    assert '<details class="piece steps">' in html
    assert not re.search(r'<div class="step[^"]*"[^>]*><details open', html)
    # A call with its arguments and its output, the step's tokens, the file linked whole.
    assert "&#34;command&#34;: &#34;pytest -q tests/test_00007.py&#34;" in html
    assert "step 00007 output\n1 failed" in html
    assert "(exit 1) — failed" in html
    assert "127 tokens" in html  # step 8: 107 in + 20 out
    assert 'href="run/attempts/calc/1/trajectory.json"' in html
    assert 'class="step-search"' in html


def test_a_run_over_its_step_budget_shows_the_first_steps_cut_and_says_where_the_rest_is(
    tmp_path: Path,
) -> None:
    run = make_steps_run(tmp_path / "run", 2000, hostile=False)
    size = (run / "attempts" / "calc" / "1" / TRAJECTORY_FILE).stat().st_size
    view = load_run_view(run, steps_budget=size // 20)
    steps = view.tasks[0].attempts[0].trajectory
    assert steps is not None
    assert steps.total_steps == 2000 and steps.tool_errors == 285  # counted over every step
    assert 10 <= len(steps.steps) < 2000
    html = render_report([view], tmp_path / "page.html")
    assert f"{2000 - len(steps.steps):,} more steps not shown on this page" in html
    assert "ksi show RUN TASK ATTEMPT --steps" in html
    # Without a budget every step is there.
    whole = load_run_view(run).tasks[0].attempts[0].trajectory
    assert whole is not None and len(whole.steps) == 2000


def test_a_long_output_shows_its_end_and_long_arguments_their_start_and_end(
    tmp_path: Path,
) -> None:
    run = make_steps_run(tmp_path / "run", 3)
    path = run / "attempts" / "calc" / "1" / TRAJECTORY_FILE
    doc = json.loads(path.read_text())
    step = doc["steps"][1]
    step["tool_calls"][0]["arguments"] = {"command": "FIRST ARG " + "y" * 9000 + " LAST ARG"}
    step["observation"]["results"][0]["content"] = "FIRST LINE\n" + "x" * 9000 + "\nLAST LINE"
    path.write_text(json.dumps(doc))
    html = _page(run, tmp_path / "page.html")
    assert "FIRST ARG" in html and "LAST ARG" in html
    assert "LAST LINE" in html and "FIRST LINE" not in html  # an output's end, as for logs
    assert html.count("[... KSI cut ") == 2
    assert "x" * 2100 not in html and "y" * 2100 not in html
    assert "trajectory.json</a> holds the step whole" in html


def test_show_steps_prints_each_call_its_arguments_output_and_failure(tmp_path: Path) -> None:
    run = make_steps_run(tmp_path / "run", 30)
    shown = ksi("show", str(run), "calc", "1", "--steps")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "30 steps, 29 tool calls, 4 failed (agent command, model mock-model)" in out
    assert re.search(r"^\s+1 user\s+Fix the bug in calc.py.", out, re.M)
    assert re.search(r"^\s+8 agent\s+Bash\s+FAILED\s+\(127 tokens\)", out, re.M)
    assert '"command": "pytest -q tests/test_00007.py"' in out
    assert "Bash output, exit 1, failed:" in out
    task = ksi("show", str(run), "calc")
    assert task.returncode == 0, task.stderr
    assert "30 (4 tool errors)" in task.stdout
    attempt = ksi("show", str(run), "calc", "1")
    assert "steps: 30 (4 tool errors)" in attempt.stdout and "--steps" in attempt.stdout
    refused = ksi("show", str(run), "calc", "--steps")
    assert refused.returncode == 2 and "name it" in refused.stderr


def test_hostile_steps_are_text_in_the_terminal_and_the_page(tmp_path: Path) -> None:
    run = make_steps_run(tmp_path / "run", 4, hostile=True)
    shown = ksi("show", str(run), "calc", "1", "--steps")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout
    assert "\\x1b[31mRED-STEP\\x1b[0m" in shown.stdout
    html = _page(run, tmp_path / "page.html")
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    assert "<b onclick" not in html
    assert "&lt;/pre&gt;&lt;script&gt;window.__pwned = 5&lt;/script&gt;" in html
    assert "\x1b" not in html
    assert HOSTILE_OUTPUT not in html


def test_an_unreadable_trajectory_says_so_everywhere(tmp_path: Path) -> None:
    run = make_steps_run(tmp_path / "run", 3)
    (run / "attempts" / "calc" / "1" / TRAJECTORY_FILE).write_text('{"steps": "nope"')
    html = _page(run, tmp_path / "page.html")
    assert "Steps (unreadable)" in html and "not a trajectory KSI can read" in html
    shown = ksi("show", str(run), "calc", "1", "--steps")
    assert shown.returncode == 0 and "unreadable: not a trajectory KSI can read" in shown.stdout
    exported = ksi("export", "trajectories", str(run), "-o", str(tmp_path / "out"))
    assert exported.returncode == 0, exported.stderr
    assert "wrote 0 trajectories" in exported.stdout
    assert "not exported, unreadable: calc/1" in exported.stderr
    assert (tmp_path / "out" / "index.jsonl").read_text() == ""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_mixed_run(tmp_path_factory.mktemp("export"), "a", "A")


def test_export_writes_each_attempts_atif_file_and_an_index(mixed: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    result = ksi("export", "trajectories", str(mixed), "-o", str(out))
    assert result.returncode == 0, result.stderr
    index = [json.loads(line) for line in (out / "index.jsonl").read_text().splitlines()]
    records = {r.task_id: r for r in load_run_view(mixed).summary.records}
    assert {e["task_id"] for e in index} == set(records)
    assert f"wrote {len(index)} trajectories" in result.stdout
    for entry in index:
        rec = records[entry["task_id"]]
        assert (entry["attempt"], entry["generation"], entry["score"], entry["status"]) == (
            rec.attempt,
            rec.generation,
            rec.score,
            str(rec.status),
        )
        assert entry["solved"] == (None if rec.score is None else rec.score >= 1.0)
        exported = out / entry["file"]
        source = mixed / rec.attempt_dir / TRAJECTORY_FILE
        assert exported.read_bytes() == source.read_bytes()
        doc = json.loads(exported.read_text())
        assert doc["schema_version"].startswith("ATIF-")
        traj = from_atif(doc)
        assert entry["steps"] == len(traj.steps) == len(read_trajectory(source).steps)
        assert entry["tool_errors"] == traj.failure_count
    # Exporting again writes the same files (no duplicates in the index).
    again = ksi("export", "trajectories", str(mixed), "-o", str(out))
    assert again.returncode == 0, again.stderr
    assert len((out / "index.jsonl").read_text().splitlines()) == len(index)


def test_export_refuses_a_directory_among_the_runs_own_files(mixed: Path, tmp_path: Path) -> None:
    before = sorted(p.relative_to(mixed) for p in mixed.rglob("*"))
    for target in (mixed / "attempts", mixed / "attempts" / "x", mixed / "knowledge" / "t"):
        refused = ksi("export", "trajectories", str(mixed), "-o", str(target))
        assert refused.returncode == 2, refused.stdout
        assert "one of its own files" in refused.stderr
    assert sorted(p.relative_to(mixed) for p in mixed.rglob("*")) == before
    a_file = tmp_path / "file.txt"
    a_file.write_text("keep me\n")
    refused = ksi("export", "trajectories", str(mixed), "-o", str(a_file))
    assert refused.returncode == 2 and "is a file" in refused.stderr
    assert a_file.read_text() == "keep me\n"


def test_export_of_a_run_whose_task_is_named_like_a_runs_own_folder_is_refused_there(
    tmp_path: Path,
) -> None:
    run = make_steps_run(tmp_path / "run", 3, task_id="attempts")
    refused = ksi("export", "trajectories", str(run), "-o", str(run))
    assert refused.returncode == 2 and "one of its own files" in refused.stderr
    assert not (run / "index.jsonl").exists()
    beside = ksi("export", "trajectories", str(run), "-o", str(run / "exported"))
    assert beside.returncode == 0, beside.stderr
    assert (run / "exported" / "attempts" / "1.json").is_file()


def test_attempts_without_a_trajectory_are_counted_not_written(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", ["a"], [record("a", 1, 1.0)])
    result = ksi("export", "trajectories", str(run), "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "wrote 0 trajectories" in result.stdout and "1 attempt(s) left none" in result.stdout
    html = _page(run, tmp_path / "page.html")
    assert "step-counts" not in html and 'class="piece steps"' not in html

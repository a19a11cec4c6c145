"""What the views read from a run: excerpts, diff lines, verdicts, generations, comparisons."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksi.layout import RunLayout
from ksi.records import SkippedFile
from ksi.reporting.summary import summarize_run
from ksi.rundir.run_state import load_run_state
from ksi.view.chart import percent_line_chart
from ksi.view.compare import compare_runs, run_labels
from ksi.view.diffs import classify, file_changes
from ksi.view.excerpt import read_excerpt_inside, text_excerpt
from ksi.view.generations import learning_tasks, newly_solved_ids, notes_given
from ksi.view.runs import fair_limit, load_run_view
from ksi.view.verdict import verdict
from tests.view_runs import make_generations_run, record, write_run


def test_fair_limit_shows_small_pieces_whole_and_shares_the_rest() -> None:
    assert fair_limit([10, 20, 30], budget=100) == 30  # everything fits
    # 10 and 20 fit whole; 70 left for the two big ones: 35 each.
    limit = fair_limit([10, 20, 1000, 5000], budget=100)
    assert limit == 35
    assert sum(min(s, limit) for s in [10, 20, 1000, 5000]) <= 100
    assert fair_limit([], budget=100) == 0
    assert fair_limit([1000] * 10_000, budget=1_000_000) == 100


def test_an_excerpt_of_a_log_keeps_its_end_cut_at_a_line_and_says_so(tmp_path: Path) -> None:
    log = tmp_path / "agent.stdout.log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))
    tail = read_excerpt_inside(tmp_path, log.name, 2000, end="tail")
    assert tail.cut and tail.size == log.stat().st_size and tail.shown <= 2000
    assert tail.text.endswith("line 9999\n")
    assert tail.text.startswith("line ")  # no half line at the cut
    head = read_excerpt_inside(tmp_path, log.name, 2000, end="head")
    assert head.text.startswith("line 0\n") and head.text.endswith("\n") and head.cut
    whole = read_excerpt_inside(tmp_path, log.name, 10**9)
    assert not whole.cut and whole.omitted == 0
    assert not read_excerpt_inside(tmp_path, "missing.log", 100).exists


def test_an_excerpt_shows_control_characters_as_text(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"\x1b[31mred\x1b[0m\n\xff bad utf-8\n\xe2\x80\xae rtl\n")
    text = read_excerpt_inside(tmp_path, log.name, 1000).text
    assert "\\x1b[31mred\\x1b[0m" in text and "\x1b" not in text
    assert "\ufffd bad utf-8" in text
    assert "\\u202e rtl" in text
    assert text_excerpt("abc\x07", 100).text == "abc\\x07"
    assert text_excerpt("x" * 100 + "END", 10, end="tail").text.endswith("END")


DIFF = """\
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return 0
+    return a + b
\\ No newline at end of file
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+--- not a header
+two
diff --git a/logo.png b/logo.png
Binary files a/logo.png and b/logo.png differ
# ksi: diff truncated
"""


def test_diff_lines_are_classified_for_highlighting() -> None:
    kinds = [(line.kind, line.text) for line in classify(DIFF)]
    assert kinds[0] == ("file", "diff --git a/calc.py b/calc.py")
    assert kinds[1][0] == "meta" and kinds[2][0] == "meta"
    assert ("del", "-    return 0") in kinds and ("add", "+    return a + b") in kinds
    assert ("context", " def add(a, b):") in kinds
    assert ("meta", "\\ No newline at end of file") in kinds
    # Inside a hunk, "+--- x" is an added line, not a header.
    assert ("add", "+--- not a header") in kinds
    assert kinds[-1] == ("note", "# ksi: diff truncated")
    changes = file_changes(classify(DIFF))
    assert [(c.path, c.added, c.removed, c.binary) for c in changes] == [
        ("calc.py", 1, 1, False),
        ("new.txt", 2, 0, False),
        ("logo.png", 0, 0, True),
    ]


def test_verdicts_say_why_in_words() -> None:
    solved = verdict(record("a", 1, 1.0))
    assert solved.label == "solved (1.00)" and solved.tone == "good"
    assert "the eval command exited with code 0" in solved.reasons
    failed = verdict(record("a", 1, 0.0))
    assert failed.tone == "bad" and "the eval command exited with code 1" in failed.reasons
    partial = verdict(record("a", 1, 0.5), solved_threshold=1.0)
    assert partial.label == "partial (0.50)"
    assert verdict(record("a", 1, 0.5), solved_threshold=0.5).tone == "good"
    timeout = verdict(record("a", 1, None))
    assert timeout.label == "unscored"
    assert timeout.reasons[0] == "the eval command timed out after 5 s"
    crashed = verdict(
        record("a", 1, None, agent_exit_code=3, agent_timed_out=False, error="boom happened")
    )
    assert "the agent exited with code 3" in crashed.reasons and "boom happened" in crashed.reasons
    skipped = verdict(record("a", 1, 1.0, skipped_files=(SkippedFile("test_x.py", "restored"),)))
    assert any("capture skipped or restored 1 path" in r for r in skipped.reasons)


def test_the_view_carries_the_runs_generations_summary_and_the_notes_each_attempt_got(
    tmp_path: Path,
) -> None:
    run = make_generations_run(tmp_path / "gens")
    view = load_run_view(run)
    summary = summarize_run(run)
    # One computation: the view's figures are the run summary's, hold-outs apart.
    assert view.generations == summary.generations and view.generations is not None
    assert view.show_generations
    gens = view.generations
    assert gens.holdout_task_ids == ("greet",)
    assert [(g.tasks_attempted, g.solved, g.holdout_attempted) for g in gens.generations] == [
        (3, 1, 1),
        (3, 3, 1),
        (3, 3, 1),
    ]
    assert learning_tasks(gens) == 3
    assert newly_solved_ids(gens, 2) == ("gateway-port", "log-level")
    # The generation that first reached each task's best score.
    best = {t.task_id: t.best_generation for t in view.tasks}
    assert best == {"greet": 1, "gateway-port": 2, "log-level": 2, "version": 1}
    # Generation 1 got no notes; an attempt of generation 2 names generation 1's notes.
    port = view.task("gateway-port")
    first, second = port.attempts[0], port.attempts[1]
    assert first.record.generation == 1 and first.record.knowledge is None
    assert first.notes_link is None
    ref = second.record.knowledge
    assert second.record.generation == 2 and ref is not None and ref.generation == 1
    assert ref.note_ids and len(ref.sha256) == 64
    assert second.notes_link == "knowledge/1/KNOWLEDGE.md"
    assert (run / second.notes_link).is_file()
    assert notes_given(ref).startswith("generation 1's notes: " + ", ".join(ref.note_ids))
    assert view.notes == {g: f"knowledge/{g}/KNOWLEDGE.md" for g in (1, 2, 3)}


def test_a_run_of_one_generation_has_no_generations_section(tmp_path: Path) -> None:
    run = write_run(tmp_path / "one", ["a"], [record("a", 1, 1.0)])
    view = load_run_view(run)
    assert view.generations is None and not view.show_generations
    assert view.tasks[0].best_generation is None


def test_a_journal_line_with_a_generation_reads_it(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", ["a"], [record("a", 1, 1.0, generation=4)])
    (rec,) = summarize_run(run).records
    assert rec.generation == 4
    line = (run / "journal.jsonl").read_text()
    assert '"generation":4' in line


def test_comparison_lists_flipped_tasks_first_with_the_change(tmp_path: Path) -> None:
    tasks = ["same", "better", "gained", "lost", "only-a"]
    a = write_run(
        tmp_path / "knowledge-none",
        tasks,
        [
            record("same", 1, 1.0),
            record("better", 1, 0.2),
            record("gained", 1, 0.0),
            record("lost", 1, 1.0),
            record("only-a", 1, 1.0),
        ],
        config={"knowledge": "none"},
    )
    b = write_run(
        tmp_path / "knowledge-notes",
        ["same", "better", "gained", "lost", "only-b"],
        [
            record("same", 1, 1.0),
            record("better", 1, 0.6),
            record("gained", 1, 1.0),
            record("lost", 1, 0.5),
            record("only-b", 1, 1.0),
        ],
        config={"knowledge": "notes"},
    )
    runs = [(p.name, summarize_run(p), load_run_state(RunLayout(p))) for p in (a, b)]
    comparison = compare_runs(runs)
    order = [t.task_id for t in comparison.tasks]
    assert order[:2] == ["gained", "lost"]  # flipped first, largest change first
    assert order[2] == "better"
    assert set(order[3:5]) == {"only-a", "only-b"} and order[-1] == "same"
    by_id = {t.task_id: t for t in comparison.tasks}
    assert by_id["gained"].change == 1.0 and by_id["gained"].direction == "gained"
    assert by_id["lost"].change == -0.5 and by_id["lost"].direction == "lost"
    assert by_id["better"].change == pytest.approx(0.4)
    assert by_id["only-a"].solved == (True, None) and by_id["only-a"].direction == "missing"
    assert comparison.gained == ("gained",) and comparison.lost == ("lost",)
    assert comparison.differences["knowledge"] == ("none", "notes")
    assert "agent" not in comparison.differences
    with pytest.raises(ValueError):
        compare_runs(runs[:1])
    assert run_labels(["demo", "demo", "x"]) == ["demo", "demo (2)", "x"]


def test_chart_points_map_fractions_onto_the_frame() -> None:
    chart = percent_line_chart([1, 2, 3], [("rate", "s-rate", [0.0, 0.5, 1.0])])
    (series,) = chart.series
    ys = [p.y for p in series.points]
    assert ys == [chart.bottom, (chart.top + chart.bottom) / 2, chart.top]
    xs = [p.x for p in series.points]
    assert xs[0] == chart.left and xs[-1] == chart.right and xs[1] == (chart.left + chart.right) / 2
    assert series.path.startswith(f"M{chart.left:.1f} {chart.bottom:.1f} L")
    assert series.points[1].label == "rate, generation 2: 50%"
    assert [t.label for t in chart.y_ticks] == ["0%", "25%", "50%", "75%", "100%"]
    assert [t.label for t in chart.x_ticks] == ["1", "2", "3"]
    one = percent_line_chart([7], [("r", "c", [2.0])])  # clamped, centred
    assert one.series[0].points[0].y == one.top
    assert one.series[0].points[0].x == (one.left + one.right) / 2
    with pytest.raises(ValueError, match="has 1 values for 2"):
        percent_line_chart([1, 2], [("r", "c", [0.5])])

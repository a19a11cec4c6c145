"""``ksi view``, ``ksi show``, ``ksi compare`` and ``ksi report --format`` on real runs."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.run_helpers import ksi
from tests.view_runs import EVIL_ID, make_generations_run, make_mixed_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two real runs of the mixed tasks: B fixes ``broken`` and breaks ``fixed``."""
    tmp = tmp_path_factory.mktemp("view-runs")
    return make_mixed_run(tmp, "a", "A"), make_mixed_run(tmp, "b", "B")


def _page(run: Path, out: Path) -> str:
    result = ksi("view", str(run), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout
    return out.read_text(encoding="utf-8")


def test_view_writes_a_self_contained_page_whose_script_the_csp_allows(
    runs: tuple[Path, Path],
) -> None:
    a, _ = runs
    result = ksi("view", str(a))
    assert result.returncode == 0, result.stderr
    page = (a / "report.html").read_text(encoding="utf-8")
    assert "file://" in result.stdout
    # No resource from anywhere else: no stylesheet links, no script or image sources.
    assert "<link" not in page
    assert not re.search(r"""\ssrc=["']?(https?:|//)""", page)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp and "default-src 'none'" in csp.group(1)
    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    assert len(scripts) == 1, "the page's own script is its only script"
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp.group(1)
    # What a new user needs without opening record.json.
    for fact in ("1 / 5", "failed", "partial", "unscored", "the eval command timed out after 1 s"):
        assert fact in page, fact
    assert "FAIL: expected 42, got 41" in page  # the failing eval's output
    assert "test_guard.py" in page and "seed version restored" in page  # protected file


def test_hostile_content_is_shown_as_text(runs: tuple[Path, Path], tmp_path: Path) -> None:
    page = _page(runs[0], tmp_path / "r.html")
    body = page.split("<script>")[0]  # everything before the page's own script
    assert "<script" not in body.replace("<script>", "")
    assert "window.__pwned" in body  # the text is there...
    for raw in ("<script>window.__pwned", "<img src=x", "</pre><script>", "<b>hostile"):
        assert raw not in body, raw  # ...never as markup
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in body
    assert "&lt;img src=x onerror=" in body
    assert "\\x1b[31mRED\\x1b[0m" in body and "\\x1b]0;owned\\x07" in body
    assert "\\u202eTXT.EXE" in body
    assert "\x1b" not in page and "\u202e" not in page and "\x07" not in page


def test_links_are_relative_to_the_report_and_reach_the_files(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "elsewhere" / "deeper" / "report.html"
    page = _page(runs[0], out)
    hrefs = [h for h in re.findall(r'href="([^"]+)"', page) if not h.startswith("#")]
    assert hrefs and all(not h.startswith(("/", "file:", "http")) for h in hrefs)
    for href in hrefs:
        target = (out.parent / unquote(href)).resolve()
        assert target.exists(), href
    # The hostile task's directory name has %XX escapes: the link escapes the % itself.
    assert any("evil%253Cscript%253E" in h and h.endswith("agent.stdout.log") for h in hrefs)


def test_a_long_log_is_cut_with_a_note_and_a_link(runs: tuple[Path, Path], tmp_path: Path) -> None:
    page = _page(runs[0], tmp_path / "r.html")
    log = runs[0] / "attempts" / "broken" / "1" / "agent.stdout.log"
    assert log.stat().st_size > 200_000
    assert "LAST LINE OF THE AGENT LOG" in page
    assert "thinking step 00000" not in page
    assert re.search(r"Cut: showing the last [\d.]+ KB of [\d.]+ KB", page)
    assert len(page) < 200_000


def test_several_runs_make_a_comparison_page(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    result = subprocess.run(
        [sys.executable, "-m", "ksi", "view", str(a), str(b)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert 'id="comparison"' in page and 'id="r0-overview"' in page and 'id="r1-overview"' in page
    table = page[page.index('id="cmp-table"') :]
    rows = re.findall(r'<tr data-state="(\w+)" data-id="([^"]*)"', table)
    assert rows[:2] == [("lost", "fixed"), ("gained", "broken")]
    assert "agent_options" in page  # what differs between the runs


def test_show_prints_a_run_a_task_and_an_attempt(runs: tuple[Path, Path]) -> None:
    a, _ = runs
    run = ksi("show", str(a))
    assert run.returncode == 0, run.stderr
    assert "solved: 1/5" in run.stdout and "agent command" in run.stdout
    task = ksi("show", str(a), "broken")
    assert task.returncode == 0, task.stderr
    assert "failed (0.00)" in task.stdout and "the eval command exited with code 1" in task.stdout
    attempt = ksi("show", str(a), "broken", "1")
    assert attempt.returncode == 0, attempt.stderr
    out = attempt.stdout
    assert "+41" in out and "FAIL: expected 42, got 41" in out
    assert "LAST LINE OF THE AGENT LOG" in out and "earlier output not shown" in out
    assert str(a / "attempts" / "broken" / "1" / "agent.stdout.log") in out
    evil = ksi("show", str(a), EVIL_ID, "1")
    assert evil.returncode == 0, evil.stderr
    assert "\x1b" not in evil.stdout and "\\x1b[31mRED" in evil.stdout
    assert "test_guard.py" in evil.stdout


def test_show_names_what_does_not_exist(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = runs
    task = ksi("show", str(a), "nope")
    assert task.returncode == 2 and "no task 'nope'" in task.stderr and "'broken'" in task.stderr
    attempt = ksi("show", str(a), "broken", "7")
    assert attempt.returncode == 2 and "no attempt 7 (its attempts: 1)" in attempt.stderr
    not_run = ksi("show", str(tmp_path))
    assert not_run.returncode == 2 and "not a KSI run directory" in not_run.stderr


def test_compare_in_the_terminal_and_as_json(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    data = json.loads(ksi("compare", str(a), str(b), "--json").stdout)
    assert data["gained"] == ["broken"] and data["lost"] == ["fixed"]
    assert [r["label"] for r in data["runs"]] == ["a", "b"]
    first = data["tasks"][0]
    assert first["task_id"] == "fixed" and first["scores"] == [1.0, 0.0]
    assert first["change"] == -1.0 and first["direction"] == "lost"
    text = ksi("compare", str(a), str(b))
    assert text.returncode == 0, text.stderr
    assert "flipped: 1 gained (solved in b, not in a), 1 lost" in text.stdout
    lines = text.stdout.splitlines()
    fixed = next(i for i, line in enumerate(lines) if line.strip().startswith("fixed"))
    partial = next(i for i, line in enumerate(lines) if line.strip().startswith("partial"))
    assert fixed < partial and "lost" in lines[fixed]
    one = ksi("compare", str(a))
    assert one.returncode == 2 and "at least two run directories" in one.stderr
    missing = ksi("compare", str(a), str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "no such run directory" in missing.stderr


def test_report_formats_csv_and_markdown(runs: tuple[Path, Path]) -> None:
    a, _ = runs
    as_csv = ksi("report", str(a), "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [r["task_id"] for r in rows] == ["fixed", "partial", "broken", "slow", EVIL_ID]
    by_id = {r["task_id"]: r for r in rows}
    assert by_id["partial"]["best_score"] == "0.5" and by_id["partial"]["status"] == "partial"
    assert by_id["slow"]["best_score"] == "" and by_id["slow"]["unscored"] == "1"
    md = ksi("report", str(a), "-f", "markdown")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("**Run a**: solved 1/5 (20.0%), mean best score 0.38")
    assert "| broken | failed | 0.00 | 1 | 1 | 0 | 0 |" in md.stdout
    assert "| evil&lt;script&gt;alert(1)&lt;/script&gt; | failed |" in md.stdout
    as_json = json.loads(ksi("report", str(a), "--format", "json").stdout)
    assert as_json["summary"]["solved_tasks"] == 1
    both = ksi("report", str(a), "--json", "--format", "csv")
    assert both.returncode == 2 and "two formats" in both.stderr
    bad = ksi("report", str(a), "--format", "xml")
    assert bad.returncode == 2 and "'xml' is not one of table, json, csv, markdown" in bad.stderr


def test_view_without_jinja2_says_how_to_install_it(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    code = (
        "import sys; sys.modules['jinja2'] = None; from ksi.cli import main; "
        f"main(['view', {str(runs[0])!r}, '-o', {str(tmp_path / 'x.html')!r}])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "pip install 'ksi[view]'" in result.stderr
    assert not (tmp_path / "x.html").exists()
    not_run = ksi("view", str(tmp_path))
    assert not_run.returncode == 2 and "not a KSI run directory" in not_run.stderr


def test_open_hands_the_report_to_the_browser(runs: tuple[Path, Path], tmp_path: Path) -> None:
    seen = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(f"import sys; open({str(seen)!r}, 'w').write(sys.argv[1])\n")
    out = tmp_path / "r.html"
    result = ksi(
        "view", str(runs[0]), "-o", str(out), "--open",
        env={"BROWSER": f"{sys.executable} {browser} %s"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert seen.read_text() == out.resolve().as_uri()


def _cells(row: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    ]


def test_generations_page_show_and_markdown_render_the_runs_generations_summary(
    tmp_path: Path,
) -> None:
    run = make_generations_run(tmp_path / "gens")
    report = json.loads(ksi("report", str(run), "--json").stdout)["summary"]["generations"]
    gens = report["generations"]
    page = _page(run, tmp_path / "out" / "gens.html")

    # The page's table is the summary's figures, row for row; hold-outs in their own column.
    table = re.search(r'data-testid="generations">(.*?)</table>', page, re.S)
    assert table
    assert "<th>hold-outs solved</th>" in table.group(1)
    rows = [_cells(r) for r in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)[1:]]
    assert [r[:5] for r in rows] == [
        [str(g["generation"]), str(g["tasks_attempted"]), str(g["solved"]),
         f"{g['solve_rate']:.0%}",
         f"{g['cumulative_solved']} / 3 ({g['cumulative_solve_rate']:.0%})"]
        for g in gens
    ]  # fmt: skip
    assert [r[5] for r in rows] == ["version", "gateway-port log-level", "–"]  # noqa: RUF001
    assert [r[6] for r in rows] == [
        f"{g['holdout_solved']} / {g['holdout_attempted']}" for g in gens
    ]
    assert [r[6] for r in rows] == ["0 / 1"] * 3
    assert re.search(r'data-testid="holdouts">Hold-outs [^<]*<code>greet</code>', page)
    # The chart plots the same rates.
    titles = re.findall(r"<title>([^<]+)</title>", page)
    for g in gens:
        n, rate = g["generation"], g["solve_rate"]
        cumul = g["cumulative_solve_rate"]
        assert f"solve rate (of tasks scored), generation {n}: {rate:.0%}" in titles
        assert f"cumulative solved (of all learning tasks), generation {n}: {cumul:.0%}" in titles

    # An attempt of generation 2 names the notes it was given and links to them.
    record = json.loads((run / "attempts" / "gateway-port" / "2" / "record.json").read_text())
    ref = record["knowledge"]
    assert record["generation"] == 2 and ref["generation"] == 1 and ref["note_ids"]
    given = re.findall(r'data-testid="notes-given">(.*?)</dd>', page, re.S)
    named = [g for g in given if ", ".join(ref["note_ids"]) in g and ref["sha256"][:12] in g]
    assert named, given
    link = re.search(r'href="([^"]+)">KNOWLEDGE.md</a>', named[0])
    assert link and unquote(link.group(1)) == "../gens/knowledge/1/KNOWLEDGE.md"
    assert (tmp_path / "out" / unquote(link.group(1))).is_file()

    shown = ksi("show", str(run), "gateway-port", "2")
    assert shown.returncode == 0, shown.stderr
    assert (
        f"notes given: generation 1's notes: {', '.join(ref['note_ids'])} "
        f"(sha256 {ref['sha256'][:12]}) ({run / 'knowledge' / '1' / 'KNOWLEDGE.md'})"
    ) in shown.stdout
    first = ksi("show", str(run), "gateway-port", "1")
    assert first.returncode == 0 and "notes given" not in first.stdout
    overview = ksi("show", str(run))
    assert "hold-outs (never learned from): greet" in overview.stdout
    assert overview.stdout.count("per generation:") == 1  # one table, the summary's

    md = ksi("report", str(run), "-f", "markdown")
    assert md.returncode == 0, md.stderr
    assert "| 2 | 3 | 3 | 100.0% | 3/3 | gateway-port, log-level | 0/1 |" in md.stdout
    assert "Hold-outs (run every generation, never learned from): greet." in md.stdout

"""``ksi view`` reports in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

Each page is opened from ``file://`` as a user would open it, with every
console error, page error and network request recorded: a report must load
with none (a script the page's Content-Security-Policy refused would show up
here as a console error). Screenshots go to ``test-artifacts/view/`` (git
ignores it; CI keeps it as an artifact).

Needs ``playwright`` (pip) and a Chromium binary (``chromium`` on PATH, or
``KSI_CHROMIUM``); Playwright's own browser downloads are never used. Without
them the tests skip, unless ``KSI_REQUIRE_BROWSER=1`` (set by ``.ci/run``),
which turns the skip into a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ksi.reporting.summary import summarize_run
from tests.run_helpers import ROOT, ksi
from tests.view_runs import (
    EVIL_ID,
    HOSTILE_TOOL,
    make_generations_run,
    make_mixed_run,
    make_steps_run,
)

ARTIFACTS = ROOT / "test-artifacts" / "view"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; .ci/setup-browser.sh)"
    if not _chromium():
        return "no Chromium binary (apt-get install chromium, or set KSI_CHROMIUM)"
    return None


def _chromium() -> str | None:
    return os.environ.get("KSI_CHROMIUM") or shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = _missing()
    if why:
        if os.environ.get("KSI_REQUIRE_BROWSER") == "1":
            pytest.fail(f"KSI_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


class Opened:
    """A page opened from a file, with what went wrong on it recorded."""

    def __init__(self, browser: Any, html: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(html.resolve().as_uri())

    def check_clean(self) -> None:
        assert self.problems == []
        outside = [u for u in self.requests if not u.startswith(("file:", "data:", "about:"))]
        assert outside == [], "the page must make no network request"

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.page.close()


def _view(*runs: Path, out: Path) -> Path:
    result = ksi("view", *map(str, runs), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("browser-runs")
    return make_mixed_run(tmp, "a", "A"), make_mixed_run(tmp, "b", "B")


def _visible_task_ids(page: Any, table: str) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        f"#{table} tbody tr:not([hidden]) td:first-child", "cells => cells.map(c => c.innerText)"
    )
    return ids


def test_the_example_run_report_loads_sorts_filters_and_opens_an_attempt(
    browser: Any, tmp_path: Path
) -> None:
    run = tmp_path / "demo"
    result = ksi(
        "run", str(ROOT / "examples" / "tasks.jsonl"), "--agent", "oracle", "--run-dir", str(run)
    )
    assert result.returncode == 0, result.stderr
    opened = Opened(browser, _view(run, out=tmp_path / "demo.html"))
    page = opened.page
    try:
        assert page.inner_text("[data-testid=solved]") == "4 / 4"
        order = ["slugify", "median-bug", "wordfreq-normalize", "roman-numerals"]
        assert _visible_task_ids(page, "r0-table") == order
        page.click("#r0-table th:has-text('task')")
        assert _visible_task_ids(page, "r0-table") == sorted(order)
        page.click("#r0-table th:has-text('task')")
        assert _visible_task_ids(page, "r0-table") == sorted(order, reverse=True)

        page.fill(".text-filter[data-table=r0-table]", "ROMAN")
        assert _visible_task_ids(page, "r0-table") == ["roman-numerals"]
        assert page.inner_text("#r0-table-count") == "1 of 4 tasks"
        page.fill(".text-filter[data-table=r0-table]", "")
        page.select_option(".state-filter[data-table=r0-table]", "failed")
        assert _visible_task_ids(page, "r0-table") == []
        page.select_option(".state-filter[data-table=r0-table]", "")

        # A task link opens its details; the attempt's diff and eval output are a click away.
        page.click("#r0-table a:has-text('median-bug')")
        task = page.locator("details.task", has_text="median-bug")
        # The page opens it on "hashchange", which fires after the click returns; a selector wait
        # (not wait_for_function, whose string the report's CSP refuses to eval).
        page.locator("details.task[open]", has_text="median-bug").wait_for(state="attached")
        assert task.get_attribute("open") is not None
        assert page.locator("details.task[open]").count() == 1
        attempt = task.locator("details.attempt").first
        attempt.locator("summary").first.click()
        diff = attempt.locator("pre.diff")
        assert diff.is_visible()
        assert "+    return (ordered[mid - 1] + ordered[mid]) / 2" in diff.inner_text()
        assert attempt.locator(".d-add").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        ) not in ("rgba(0, 0, 0, 0)", "transparent"), "added lines are highlighted"
        attempt.locator("details.eval > summary").click()
        assert "Ran 6 tests" in attempt.locator("details.eval").inner_text()
        opened.shot("example-run")
        opened.check_clean()
    finally:
        opened.close()


def test_status_filter_and_the_full_log_link(browser: Any, mixed: tuple[Path, Path]) -> None:
    a, _ = mixed
    opened = Opened(browser, _view(a, out=a / "report.html"))
    page = opened.page
    try:
        page.select_option(".state-filter[data-table=r0-table]", "failed")
        assert _visible_task_ids(page, "r0-table") == ["broken", EVIL_ID]
        page.select_option(".state-filter[data-table=r0-table]", "unscored")
        assert _visible_task_ids(page, "r0-table") == ["slow"]
        page.select_option(".state-filter[data-table=r0-table]", "")
        page.click("#r0-table th:has-text('best score')")
        ids = _visible_task_ids(page, "r0-table")
        assert ids[0] == "slow" and ids[-1] == "fixed"  # no score sorts below 0.00

        page.click("#r0-table a:has-text('broken')")
        attempt = page.locator("details.task[open] details.attempt").first
        attempt.locator("summary").first.click()
        logs = attempt.locator("details.agent-out")
        logs.locator("summary").click()
        assert "LAST LINE OF THE AGENT LOG" in logs.inner_text()
        assert "Cut: showing the last" in logs.inner_text()
        opened.shot("mixed-run-broken-attempt")
        opened.check_clean()
        with page.expect_navigation():
            logs.locator("a:has-text('the whole file')").first.click()
        assert page.url.endswith("/attempts/broken/1/agent.stdout.log")
        assert "thinking step 00000" in page.inner_text("body")
    finally:
        opened.close()


def test_a_hostile_attempt_shows_its_text_and_runs_no_script(
    browser: Any, mixed: tuple[Path, Path]
) -> None:
    a, _ = mixed
    opened = Opened(browser, _view(a, out=a / "report.html"))
    page = opened.page
    try:
        page.click("#r0-table a.task-link >> nth=4")
        task = page.locator("details.task[open]")
        task.first.wait_for(state="attached")  # opened on "hashchange", after the click returns
        assert task.count() == 1
        assert EVIL_ID in task.locator("summary").first.inner_text()
        page.evaluate(
            "document.querySelectorAll('details.task[open] details').forEach(d => d.open = true)"
        )
        text = task.inner_text()
        assert "<script>window.__pwned = 1</script>" in text
        assert '</pre><img src=x onerror="window.__pwned = 2">' in text
        assert "+<script>window.__pwned = 3</script>" in text
        assert "</pre><script>window.__pwned = 4</script>" in text
        assert "\\x1b[31mRED\\x1b[0m" in text and "\\x1b[2Jcleared" in text
        assert "test_guard.py" in text
        assert "test file edited by the agent: seed version restored" in text
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert task.locator("img, script").count() == 0
        assert page.locator("script").count() == 1
        opened.shot("hostile-attempt")
        opened.check_clean()
    finally:
        opened.close()


def test_a_two_run_comparison_lists_flips_first_and_sorts(
    browser: Any, mixed: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = mixed
    opened = Opened(browser, _view(a, b, out=tmp_path / "compare.html"))
    page = opened.page
    try:
        assert "1 gained" in page.inner_text("[data-testid=flips]")
        assert _visible_task_ids(page, "cmp-table")[:2] == ["fixed", "broken"]
        page.select_option(".state-filter[data-table=cmp-table]", "gained")
        assert _visible_task_ids(page, "cmp-table") == ["broken"]
        page.select_option(".state-filter[data-table=cmp-table]", "")
        page.click("#cmp-table th:has-text('change')")
        assert _visible_task_ids(page, "cmp-table")[0] == "fixed"  # -1.00 first, ascending
        page.click("#cmp-table th:has-text('change')")
        assert _visible_task_ids(page, "cmp-table")[0] == "broken"
        # Each run keeps its own full section (and table) below the comparison; a score opens
        # that run's task.
        assert page.locator("#r0-table").count() == 1 and page.locator("#r1-table").count() == 1
        page.click("#cmp-table tr[data-id=broken] td:nth-child(3) a")
        opened_task = page.locator("#r1-tasks details.task[open]")
        # The page opens it on "hashchange", which fires after the click returns.
        opened_task.first.wait_for(state="attached")
        assert opened_task.count() == 1
        assert "broken" in opened_task.locator("summary").first.inner_text()
        opened.shot("comparison")
        opened.check_clean()
    finally:
        opened.close()


def test_the_generations_chart_and_table_show_the_runs_generations_summary(
    browser: Any, tmp_path: Path
) -> None:
    run = make_generations_run(tmp_path / "gens")
    gens = summarize_run(run).generations
    assert gens is not None
    opened = Opened(browser, _view(run, out=tmp_path / "gens.html"))
    page = opened.page
    try:
        chart = page.locator("#r0-generations svg")
        assert chart.is_visible()
        assert chart.locator("path.line").count() == 2
        assert chart.locator("circle").count() == 2 * len(gens.generations)
        titles = chart.locator("circle title").all_text_contents()
        for g in gens.generations:
            assert f"solve rate (of tasks scored), generation {g.generation}: " \
                f"{g.solve_rate:.0%}" in titles  # fmt: skip
        assert "cumulative solved (of all learning tasks), generation 2: 100%" in titles
        rows = page.locator("[data-testid=generations] tbody tr").all_inner_texts()
        cells = [r.split("\t") for r in rows]
        assert [c[:3] for c in cells] == [
            [str(g.generation), str(g.tasks_attempted), str(g.solved)] for g in gens.generations
        ]
        assert cells[1][5].strip() == "gateway-port log-level"  # newly solved in generation 2
        assert [c[6].strip() for c in cells] == ["0 / 1"] * 3  # the hold-out, apart
        assert "greet" in page.inner_text("[data-testid=holdouts]")
        opened.shot("generations")
        opened.check_clean()
        # An attempt of generation 2 names its notes; the link opens them.
        task = page.locator("details.task", has_text="gateway-port").first
        task.locator("summary").first.click()
        attempt = task.locator("details.attempt", has_text="generation 2").first
        attempt.locator("summary").first.click()
        given = attempt.locator("[data-testid=notes-given]")
        assert given.inner_text().startswith("generation 1's notes: g1-")
        with page.expect_navigation():
            given.locator("a:has-text('KNOWLEDGE.md')").click()
        assert page.url.endswith("/gens/knowledge/1/KNOWLEDGE.md")
        assert "gateway-port" in page.inner_text("body")
    finally:
        opened.close()


def test_anchors_a_person_can_type_open_a_task_and_an_attempt(browser: Any, tmp_path: Path) -> None:
    """``report.html#task-<id>`` and ``#task-<id>-<attempt>`` (issue 28 #14)."""
    run = tmp_path / "demo"
    result = ksi(
        "run", str(ROOT / "examples" / "tasks.jsonl"), "--agent", "oracle", "--run-dir", str(run)
    )
    assert result.returncode == 0, result.stderr
    html = _view(run, out=tmp_path / "demo.html")
    page = browser.new_page()
    try:
        page.goto(html.resolve().as_uri() + "#task-median-bug")
        task = page.locator("details.task#task-median-bug")
        assert task.get_attribute("open") is not None
        assert page.locator("details.task[open]").count() == 1
        page.goto(html.resolve().as_uri() + "#task-roman-numerals-1")  # a "hashchange"
        page.locator("details#task-roman-numerals-1[open]").wait_for(state="attached")
        attempt = page.locator("details.attempt#task-roman-numerals-1")
        assert attempt.get_attribute("open") is not None
        assert page.locator("details.task#task-roman-numerals").get_attribute("open") is not None
        # The oracle reports no usage: the task table says so as the overview does, not "0".
        cells = page.eval_on_selector_all(
            "#r0-table tbody td:nth-child(8)", "cells => cells.map(c => c.innerText)"
        )
        assert cells == ["\u2013"] * 4
        assert "none reported" in page.inner_text("#r0-overview")
    finally:
        page.close()


def test_the_flips_card_never_breaks_a_phrase(
    browser: Any, mixed: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = mixed
    html = _view(a, b, out=tmp_path / "compare.html")
    page = browser.new_page(viewport={"width": 360, "height": 800})
    try:
        page.goto(html.resolve().as_uri())
        lines = page.eval_on_selector_all(
            "[data-testid=flips] span", "spans => spans.map(s => s.getClientRects().length)"
        )
        assert lines == [1, 1], "'1 gained' and '0 lost' each stay on one line"
    finally:
        page.close()


def _open_steps(page: Any) -> Any:
    """Open the only task, its attempt and its steps; the steps' list."""
    page.click("#r0-table a.task-link >> nth=0")
    attempt = page.locator("details.task[open] details.attempt").first
    attempt.locator("summary").first.click()
    attempt.locator("details.steps > summary").click()
    return attempt.locator("div.steps")


def test_a_2000_step_trajectory_opens_collapsed_searches_and_filters_failures(
    browser: Any, tmp_path: Path
) -> None:
    run = make_steps_run(tmp_path / "run", 2000)
    out = _view(run, out=tmp_path / "steps.html")
    opened = Opened(browser, out)
    page = opened.page
    try:
        # How long the page took to open (printed with -s; a benchmark, not an assertion).
        loaded = page.evaluate(
            "() => { const t = performance.getEntriesByType('navigation')[0];"
            " return [t.domContentLoadedEventEnd, t.loadEventEnd]; }"
        )
        size_kb = out.stat().st_size / 1024
        steps = _open_steps(page)
        summary = page.locator("[data-testid=step-counts]").first.inner_text()
        assert summary == "2,000 steps · 285 tool errors"
        items = steps.locator("div.step")
        assert items.count() == 2000
        assert steps.locator("details[open]").count() == 0  # every step collapsed
        failed = steps.locator("div.step.failed").first
        assert failed.locator(".step-no").inner_text() == "8"
        assert failed.evaluate("e => getComputedStyle(e).backgroundColor") not in (
            "rgba(0, 0, 0, 0)",
            "transparent",
        ), "a failed step is highlighted"

        # Search: text inside collapsed steps (arguments, outputs) is found.
        started = page.evaluate("performance.now()")
        page.fill(".step-search", "TESTS/TEST_01234")
        searched_ms = page.evaluate("performance.now()") - started
        visible = steps.locator("div.step:not([hidden])")
        assert visible.count() == 1
        assert visible.first.locator(".step-no").inner_text() == "1235"
        count_id = steps.get_attribute("id")
        assert page.inner_text(f"[id='{count_id}-count']") == "1 of 2000 steps"
        page.fill(".step-search", "")
        page.check(".step-failed")
        assert visible.count() == 285
        page.uncheck(".step-failed")
        assert visible.count() == 2000

        # A step opens to its call's arguments and output.
        step = items.nth(7)
        step.locator("summary").click()
        body = step.inner_text()
        assert '"command": "pytest -q tests/test_00007.py"' in body
        assert "output (exit 1) — failed" in body and "1 failed" in body
        print(
            f"\n2,000-step page: {size_kb:.0f} KB, DOMContentLoaded {loaded[0]:.0f} ms, "
            f"load {loaded[1]:.0f} ms, search over 2,000 steps {searched_ms:.0f} ms"
        )
        opened.shot("steps-2000")
        opened.check_clean()
    finally:
        opened.close()


def test_a_hostile_trajectory_shows_its_text_and_runs_no_script(
    browser: Any, tmp_path: Path
) -> None:
    run = make_steps_run(tmp_path / "run", 5, hostile=True)
    opened = Opened(browser, _view(run, out=tmp_path / "hostile-steps.html"))
    page = opened.page
    try:
        steps = _open_steps(page)
        page.evaluate("document.querySelectorAll('div.steps details').forEach(d => d.open = true)")
        text = steps.inner_text()
        assert HOSTILE_TOOL in text
        assert "<img src=x onerror='window.__pwned = 6'> 1" in text
        assert "</pre><script>window.__pwned = 5</script>\\x1b[31mRED-STEP\\x1b[0m" in text
        page.fill(".step-search", "window.__pwned = 5")  # search reads text, runs none
        assert steps.locator("div.step:not([hidden])").count() == 4
        assert steps.locator("b, img, script").count() == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.locator("script").count() == 1
        opened.shot("hostile-steps")
        opened.check_clean()
    finally:
        opened.close()

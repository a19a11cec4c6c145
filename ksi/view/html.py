"""``ksi view``: one self-contained HTML file from one or more run directories.

Rendered with Jinja2 from the templates in ``ksi/view/templates/`` (the page,
its stylesheet and its script, all inlined: no server, no network, it opens
from ``file://`` and as a CI artifact). Jinja2 is the optional extra
``ksi[view]``, imported only here, only when a report is written: every
other command, ``ksi show`` and ``ksi compare`` included, runs without it.

Hostile content is shown, never obeyed, by two independent guards:

* autoescape is on for every template, and every value a template prints
  first goes through :func:`ksi.text.printable` (the environment's
  ``finalize``), so ``<script>`` is text and an ANSI escape shows as
  ``\\x1b[31m``;
* the page's Content-Security-Policy allows exactly one script, the report's
  own (by its SHA-256), and no network at all: even markup that escaped the
  escaping could not run or fetch anything.

Links to full logs are relative to the report file, so a report written next
to (or inside) its run directory keeps working when both are moved together.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ksi._version import __version__
from ksi.errors import UserInputError
from ksi.layout import task_dirname
from ksi.records import GenerationsSummary
from ksi.text import printable
from ksi.view import fmt
from ksi.view.chart import LineChart, percent_line_chart
from ksi.view.compare import Comparison, compare_runs, run_labels
from ksi.view.diffs import DiffLine
from ksi.view.generations import learning_tasks, newly_solved_ids, notes_given
from ksi.view.runs import RunView

TEMPLATES = Path(__file__).parent / "templates"
INSTALL_HINT = "pip install 'ksi[view]'"


def _environment() -> Any:
    try:
        # optional: jinja2 and markupsafe (the `view` extra)
        import jinja2
        import markupsafe
    except ImportError as exc:
        raise UserInputError(
            f"ksi view needs Jinja2, which is not installed ({exc}). Install the extra: "
            f"{INSTALL_HINT} (or `ksi install jinja2` into KSI's own environment)"
        ) from exc

    def finalize(value: Any) -> Any:
        if isinstance(value, os.PathLike):  # a run directory's path is text it did not choose
            value = os.fspath(value)
        if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
            return printable(value, multiline=True)
        return value

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        score=fmt.score,
        pct=fmt.pct,
        money=fmt.money,
        secs=fmt.secs,
        size=fmt.size,
        num=fmt.num,
        tokens=fmt.tokens,
        signed=fmt.signed,
        blocks=diff_blocks,
    )
    return env


def diff_blocks(lines: Sequence[DiffLine]) -> list[DiffLine]:
    """Consecutive lines of one kind joined: one ``<span>`` per block keeps pages small."""
    blocks: list[DiffLine] = []
    kind = None
    texts: list[str] = []
    for line in lines:
        if line.kind != kind and texts:
            blocks.append(DiffLine(kind or "context", "\n".join(texts) + "\n"))
            texts = []
        kind = line.kind
        texts.append(line.text)
    if texts:
        blocks.append(DiffLine(kind or "context", "\n".join(texts) + "\n"))
    return blocks


def generations_chart(summary: GenerationsSummary) -> LineChart:
    """The summary's two rates per generation (hold-outs are in neither)."""
    gens = summary.generations
    return percent_line_chart(
        [g.generation for g in gens],
        [
            ("solve rate (of tasks scored)", "s-rate", [g.solve_rate for g in gens]),
            (
                "cumulative solved (of all learning tasks)",
                "s-cumul",
                [g.cumulative_solve_rate for g in gens],
            ),
        ],
    )


def _run_prefix(run_root: Path, out_dir: Path) -> str:
    """The URL prefix of a run directory as seen from the report's directory (``""`` inside)."""
    rel = Path(os.path.relpath(run_root, out_dir)).as_posix()
    return "" if rel == "." else quote(rel) + "/"


class Anchors:
    """Ids a person can type after ``#``: ``task-<id>`` and ``task-<id>-<attempt>``.

    The task part is the task's directory name (:func:`ksi.layout.task_dirname`,
    injective and URL-safe but for ``%`` escapes, which the page's script also
    matches undecoded); runs after the first of a comparison prefix ``r<n>-``. An
    attempt id that would equal another task's id (``task-a-1`` for the task
    ``a-1``) takes ``-attempt-<n>`` instead.
    """

    def __init__(self, runs: Sequence[RunView]) -> None:
        self._tasks = [
            {
                t.task_id: ("" if r == 0 else f"r{r}-") + "task-" + task_dirname(t.task_id)
                for t in run.tasks
            }
            for r, run in enumerate(runs)
        ]
        self._taken = [set(tasks.values()) for tasks in self._tasks]

    def task(self, r: int, task_id: str) -> str:
        return self._tasks[r][task_id]

    def attempt(self, r: int, task_id: str, attempt: int) -> str:
        plain = f"{self.task(r, task_id)}-{attempt}"
        return (
            plain if plain not in self._taken[r] else f"{self.task(r, task_id)}-attempt-{attempt}"
        )


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def render_report(runs: Sequence[RunView], out_path: Path) -> str:
    """The HTML page for ``runs`` (a comparison first when there are several)."""
    if not runs:
        raise ValueError("render_report needs at least one run")
    env = _environment()
    # optional: jinja2 and markupsafe (the `view` extra)
    import markupsafe

    out_dir = out_path.resolve().parent
    labels = run_labels([r.name for r in runs])
    comparison: Comparison | None = None
    if len(runs) > 1:
        pairs = zip(labels, runs, strict=True)
        comparison = compare_runs([(label, run.summary, run.state) for label, run in pairs])
    prefixes = {id(run): _run_prefix(run.root, out_dir) for run in runs}
    script = env.get_template("report.js").render()
    style = env.get_template("report.css").render()
    page = env.get_template("report.html.j2")
    return str(
        page.render(
            runs=runs,
            labels=labels,
            comparison=comparison,
            anchors=Anchors(runs),
            href=lambda run, rel: prefixes[id(run)] + quote(rel),
            chart=generations_chart,
            newly_solved=newly_solved_ids,
            learning_tasks=learning_tasks,
            notes_given=notes_given,
            usage_reported=fmt.usage_reported,
            script=markupsafe.Markup(script),
            style=markupsafe.Markup(style),
            script_hash=_csp_hash(script),
            generated_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            version=__version__,
        )
    )


def write_report(runs: Sequence[RunView], out_path: Path) -> Path:
    """Write the report atomically to ``out_path``; returns it."""
    html = render_report(runs, out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(html, encoding="utf-8")
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out_path

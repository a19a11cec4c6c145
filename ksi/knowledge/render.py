"""Rendering notes as Markdown: for one attempt (under the budget), or all of them.

The budget is the one size limit of generations: the most bytes of notes an
attempt receives. Notes are taken in order of use (the task's own, newest
generation first, then shared ones), and what does not fit is left out and
counted; the attempt's record lists the ids of the notes it got and the hash
of the text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import attrs

from ksi.knowledge.models import Knowledge, Note
from ksi.text import printable

#: Where the file goes, relative to the attempt's workspace (beside ``repo/``).
KNOWLEDGE_FILE = "KNOWLEDGE.md"
#: What the prompt says about it (``{path}``: the file as the agent sees it).
PROMPT_POINTER = (
    "Note: `{path}` (beside `repo/`, never graded) holds notes from earlier attempts at "
    "these tasks: what was tried, what the tests said, what worked. Read it before you start."
)
_TITLE = "# Knowledge from earlier generations\n\n"
_KIND_ORDER = {
    k: n
    for n, k in enumerate(
        (
            "constraint",
            "pitfall",
            "insight",
            "check",
            "next_step",
            "rejected_hypothesis",
            "eval_output",
            "score_history",
            "best_diff",
            "final_message",
            "files_touched",
        )
    )
}


@attrs.frozen
class RenderedNotes:
    text: str
    note_ids: tuple[str, ...]
    sha256: str
    left_out: int = 0


# Notes quote text KSI did not write (eval output, diffs, file names, an agent's words),
# and KNOWLEDGE.md is read by the next agent as Markdown: quoted text must not be able to
# end its quote and pass for a note of its own (a forged heading, a forged note id).
# Names and heading fields go through :func:`ksi.text.printable`: one line, every
# control character (newlines among them) shown as an escape.
_BACKTICKS = re.compile(r"`+")
_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING_LINE = re.compile(r" {0,3}#")


def fence(text: str, info: str = "") -> str:
    """``text`` as a fenced block no line of it can close: the fence is longer than
    any run of backticks in it (CommonMark closes a fence only with one as long)."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{info}\n{text}\n{marks}"


def code_span(text: str) -> str:
    """``text`` as inline code, with a backtick delimiter longer than any run in it."""
    text = printable(text)
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    marks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{marks}{pad}{text}{pad}{marks}"


def _inert_body(text: str) -> str:
    """A note's text, with every heading outside a fenced block escaped (``\\#``).

    Headings are what the renderer writes for each note (``### kind [id]``); a
    distiller's text (an agent's or a model's, who read the agents' evidence) keeps
    its fenced blocks and paragraphs but cannot start a note.
    """
    out: list[str] = []
    open_fence = ""
    for line in text.split("\n"):
        match = _FENCE_LINE.match(line)
        if open_fence:
            if (
                match
                and match.group(1)[0] == open_fence[0]
                and len(match.group(1)) >= len(open_fence)
                and not line.strip(" `~")
            ):
                open_fence = ""
        elif match:
            open_fence = match.group(1)
        elif _HEADING_LINE.match(line):
            line = line.replace("#", "\\#", 1)
        out.append(line)
    return "\n".join(out)


def _heading(note: Note) -> str:
    what = printable(note.kind.replace("_", " "))
    cites = ", ".join(note.attempts[:6]) + (" ..." if len(note.attempts) > 6 else "")
    source = f" (from {printable(cites)})" if cites else ""
    when = f"\n_Applies when: {printable(note.applies_when)}_" if note.applies_when else ""
    return f"### {what} [{printable(note.id)}]{source}{when}\n\n"


def _block(note: Note) -> str:
    return _heading(note) + _inert_body(note.text.rstrip()) + "\n\n"


def _ordered(notes: Iterable[Note]) -> list[Note]:
    return sorted(notes, key=lambda n: (-n.generation, _KIND_ORDER.get(n.kind, 99)))


def _left_out_line(count: int) -> str:
    return f"_{count} more note(s) left out to keep this file within its size budget._\n"


@attrs.frozen
class IndexedNotes:
    """A generation's notes by task, ordered once, so rendering an attempt's file costs
    only that task's notes (a run of 10,000 tasks renders 10,000 of them)."""

    knowledge: Knowledge
    by_task: dict[str | None, list[Note]]

    @classmethod
    def of(cls, knowledge: Knowledge, withheld: Iterable[str] = ()) -> IndexedNotes:
        """Index ``knowledge``; the tasks in ``withheld`` (hold-outs) get only shared
        notes, whatever their own notes' origin (a seed bundle included)."""
        skip = frozenset(withheld)
        by_task: dict[str | None, list[Note]] = {}
        for note in knowledge.notes:
            if note.task_id in skip:
                continue
            by_task.setdefault(note.task_id, []).append(note)
        return cls(knowledge, {t: _ordered(notes) for t, notes in by_task.items()})

    def render(self, task_id: str, budget_bytes: int) -> RenderedNotes:
        """``KNOWLEDGE.md`` for one attempt at ``task_id``: its notes, then shared ones."""
        return _render(
            task_id, self.by_task.get(task_id, []), self.by_task.get(None, []), budget_bytes
        )


def _render(task_id: str, own: list[Note], shared: list[Note], budget_bytes: int) -> RenderedNotes:
    parts = [_TITLE]
    # Room for the line saying how many notes were left out: the budget holds it too.
    used = len(_TITLE.encode()) + len(_left_out_line(len(own) + len(shared)).encode())
    ids: list[str] = []
    left_out = 0
    sections = ((f"## This task ({task_id})\n\n", own), ("## All tasks\n\n", shared))
    for header, notes in sections:
        if not notes:
            continue
        header_size = len(header.encode())
        placed_header = False
        for note in notes:
            block = _block(note)
            size = len(block.encode()) + (0 if placed_header else header_size)
            if used + size > budget_bytes:
                left_out += 1
                continue
            if not placed_header:
                parts.append(header)
                placed_header = True
            parts.append(block)
            used += size
            ids.append(note.id)
    if left_out:
        parts.append(_left_out_line(left_out))
    if not ids:
        return RenderedNotes("", (), "", left_out)
    text = "".join(parts)
    return RenderedNotes(text, tuple(ids), hashlib.sha256(text.encode()).hexdigest(), left_out)


def render_all(knowledge: Knowledge) -> str:
    """Every note of a generation, grouped by task, for people reading the run."""
    lines = [f"# Notes after generation {knowledge.generation} ({knowledge.distiller})\n\n"]
    if knowledge.fallback:
        lines.append(f"> The configured distiller's notes were not used: {knowledge.fallback}\n\n")
    tasks = sorted({n.task_id for n in knowledge.notes if n.task_id is not None})
    shared = [n for n in knowledge.notes if n.task_id is None]
    if shared:
        lines.append("## All tasks\n\n")
        lines.extend(_block(n) for n in _ordered(shared))
    for task_id in tasks:
        lines.append(f"## {task_id}\n\n")
        lines.extend(
            _block(n) for n in _ordered(n for n in knowledge.notes if n.task_id == task_id)
        )
    return "".join(lines)

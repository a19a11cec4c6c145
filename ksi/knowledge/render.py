"""Rendering notes as Markdown: for one attempt (under the budget), or all of them.

The budget is the one size limit of generations: the most bytes of notes an
attempt receives. Notes are taken in order of use: the task's own (newest
generation first, constraints and pitfalls before raw evidence), then the
shared ones and other tasks' notes, most relevant to the task first (BM25
over the store, :meth:`IndexedNotes.render`'s ``query``); demoted notes (their
receivers kept failing) come after the others of their group. What does not
fit is left out and counted, a note that says what an earlier one said (the
same normalised text) is never given twice, and the attempt's record lists
the ids of the notes it got and the hash of the text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping

import attrs

from ksi.knowledge.models import Knowledge, Note, text_key
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
            "forum_post",
            "eval_output",
            "trajectory",
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
    #: Notes that did not fit the budget.
    left_out: int = 0
    #: Notes not given because one given says the same (normalised text).
    duplicates: int = 0


#: A task's retrieval: its query (its prompt) -> the position in the generation's notes
#: of each note that matches, and how relevant it is (higher: closer).
Ranker = Callable[[str], Mapping[int, float]]


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


_DEMOTED_LINE = "\n_Demoted: the attempts that received it kept failing._"


def _heading(note: Note, *, demoted: bool = False, about: bool = False) -> str:
    what = printable(note.kind.replace("_", " "))
    cites = ", ".join(note.attempts[:6]) + (" ..." if len(note.attempts) > 6 else "")
    if note.posts:
        cites += "; post " + ", ".join(note.posts[:3]) + (" ..." if len(note.posts) > 3 else "")
    source = f" (from {printable(cites)})" if cites else ""
    task = f"\n_About task {code_span(note.task_id)}_" if about and note.task_id else ""
    when = f"\n_Applies when: {printable(note.applies_when)}_" if note.applies_when else ""
    low = _DEMOTED_LINE if demoted else ""
    return f"### {what} [{printable(note.id)}]{source}{task}{when}{low}\n\n"


def _block(note: Note, *, demoted: bool = False, about: bool = False) -> str:
    return _heading(note, demoted=demoted, about=about) + _inert_body(note.text.rstrip()) + "\n\n"


def _ordered(notes: Iterable[Note], demoted: frozenset[str] = frozenset()) -> list[Note]:
    return sorted(
        notes, key=lambda n: (n.id in demoted, -n.generation, _KIND_ORDER.get(n.kind, 99))
    )


def _left_out_line(count: int) -> str:
    return f"_{count} more note(s) left out to keep this file within its size budget._\n"


@attrs.frozen
class IndexedNotes:
    """A generation's notes by task, ordered once, so rendering an attempt's file costs
    only that task's notes and its retrieval (a run of 10,000 tasks renders 10,000 of them)."""

    knowledge: Knowledge
    by_task: dict[str | None, list[Note]]
    #: Tasks that get shared notes only (hold-outs).
    withheld: frozenset[str] = frozenset()
    #: Ranks shared and other tasks' notes for a task (None: shared notes only, in order).
    ranker: Ranker | None = None
    demoted: frozenset[str] = frozenset()
    #: Each note's :func:`~ksi.knowledge.models.text_key`, by id (computed once).
    keys: dict[str, str] = attrs.field(factory=dict)
    #: Rendered blocks by (note id, shown as another task's), computed when first needed.
    _blocks: dict[tuple[str, bool], str] = attrs.field(factory=dict)

    @classmethod
    def of(
        cls, knowledge: Knowledge, withheld: Iterable[str] = (), ranker: Ranker | None = None
    ) -> IndexedNotes:
        """Index ``knowledge``; the tasks in ``withheld`` (hold-outs) get only shared
        notes, whatever their own notes' origin (a seed bundle included), and no other
        task gets theirs."""
        skip = frozenset(withheld)
        demoted = frozenset(knowledge.demoted)
        by_task: dict[str | None, list[Note]] = {}
        for note in knowledge.notes:
            if note.task_id in skip:
                continue
            by_task.setdefault(note.task_id, []).append(note)
        ordered = {t: _ordered(notes, demoted) for t, notes in by_task.items()}
        keys = {n.id: text_key(n.text) for n in knowledge.notes}
        return cls(knowledge, ordered, skip, ranker, demoted, keys)

    def render(self, task_id: str, budget_bytes: int, query: str = "") -> RenderedNotes:
        """``KNOWLEDGE.md`` for one attempt at ``task_id``: its notes, then shared ones
        and (with a ranker and a ``query``, the task's prompt) other tasks' notes that
        match it, most relevant first."""
        shared = self.by_task.get(None, [])
        related: list[Note] = shared
        if self.ranker is not None and query:
            relevance = self.ranker(query)
            position = {id(n): i for i, n in enumerate(self.knowledge.notes)}
            others = [] if task_id in self.withheld else self._others(task_id)
            matched = [n for n in [*shared, *others] if position[id(n)] in relevance]
            matched.sort(key=lambda n: (n.id in self.demoted, -relevance[position[id(n)]]))
            unmatched = [n for n in shared if position[id(n)] not in relevance]
            related = matched + unmatched
        return _render(task_id, self.by_task.get(task_id, []), related, budget_bytes, self)

    def _others(self, task_id: str) -> list[Note]:
        return [
            n for t, notes in self.by_task.items() if t is not None and t != task_id for n in notes
        ]

    def block(self, note: Note, about: bool) -> str:
        key = (note.id, about)
        found = self._blocks.get(key)
        if found is None:
            found = self._blocks[key] = _block(note, demoted=note.id in self.demoted, about=about)
        return found


#: Fewer bytes left than this, and no note fits any more: the rest are left out unread.
_SMALLEST_BLOCK = 48


def _render(
    task_id: str, own: list[Note], related: list[Note], budget_bytes: int, notes: IndexedNotes
) -> RenderedNotes:
    parts = [_TITLE]
    # Room for the line saying how many notes were left out: the budget holds it too.
    used = len(_TITLE.encode()) + len(_left_out_line(len(own) + len(related)).encode())
    ids: list[str] = []
    said: set[str] = set()
    left_out = duplicates = 0
    others = any(n.task_id is not None for n in related)
    sections = (
        (f"## This task ({task_id})\n\n", own),
        ("## All tasks, and other tasks' notes related to this one\n\n" if others
         else "## All tasks\n\n", related),
    )  # fmt: skip
    for header, group in sections:
        if not group:
            continue
        header_size = len(header.encode())
        placed_header = False
        for n, note in enumerate(group):
            if budget_bytes - used < _SMALLEST_BLOCK:
                left_out += len(group) - n
                break
            key = notes.keys.get(note.id) or text_key(note.text)
            if key in said:
                duplicates += 1
                continue
            block = notes.block(note, about=note.task_id != task_id)
            size = len(block.encode()) + (0 if placed_header else header_size)
            if used + size > budget_bytes:
                left_out += 1
                continue
            if not placed_header:
                parts.append(header)
                placed_header = True
            parts.append(block)
            said.add(key)
            used += size
            ids.append(note.id)
    if left_out:
        parts.append(_left_out_line(left_out))
    if not ids:
        return RenderedNotes("", (), "", left_out, duplicates)
    text = "".join(parts)
    return RenderedNotes(
        text, tuple(ids), hashlib.sha256(text.encode()).hexdigest(), left_out, duplicates
    )


def render_all(knowledge: Knowledge) -> str:
    """Every note of a generation, grouped by task, for people reading the run (a note
    that says what one before it said is shown once)."""
    lines = [f"# Notes after generation {knowledge.generation} ({knowledge.distiller})\n\n"]
    if knowledge.fallback:
        lines.append(f"> The configured distiller's notes were not used: {knowledge.fallback}\n\n")
    demoted = frozenset(knowledge.demoted)
    said: set[str] = set()

    def blocks(notes: Iterable[Note]) -> list[str]:
        out = []
        for note in _ordered(notes, demoted):
            key = text_key(note.text)
            if key not in said:
                said.add(key)
                out.append(_block(note, demoted=note.id in demoted))
        return out

    tasks = sorted({n.task_id for n in knowledge.notes if n.task_id is not None})
    shared = [n for n in knowledge.notes if n.task_id is None]
    if shared:
        lines.append("## All tasks\n\n")
        lines.extend(blocks(shared))
    for task_id in tasks:
        lines.append(f"## {task_id}\n\n")
        lines.extend(blocks(n for n in knowledge.notes if n.task_id == task_id))
    return "".join(lines)

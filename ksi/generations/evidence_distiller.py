"""The ``evidence`` distiller: notes made of facts, with no model (deterministic, offline).

Per task: the score history, the eval output of each failing attempt (what
the tests said), what each attempt's trajectory shows (the commands that
failed and why, when it first ran the tests, the commands it repeated, the
files its tools named), the best attempt's diff, the agent's final messages,
the files each attempt touched, and each post of the task's forum. One shared
note says which tasks were solved; each post of the cross-task room is a
shared note. A note made of a post names it (:attr:`Note.posts`) and cites
the attempts it rests on. Earlier notes are carried forward, so a task's
notes survive a generation that skipped it; a task's new score history
replaces its earlier one, and the new shared summary the earlier summary
(``Note.replaces``: the store marks them superseded).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from ksi.hookspecs import Register, hookimpl
from ksi.knowledge.forum import Post
from ksi.knowledge.models import AttemptEvidence, DistillRequest, DistillResult, Note, TaskEvidence
from ksi.knowledge.render import code_span, fence
from ksi.text import printable


def _history_text(task: TaskEvidence) -> str:
    lines = [
        f"- generation {g}, {attempt}: score {score:.2f}"
        for g, attempt, score in task.score_history
    ]
    return "Scores so far (scored attempts only):\n" + "\n".join(lines)


def _trajectory_text(ev: AttemptEvidence) -> str:
    """What the attempt's trajectory digest says, every quoted text inert (code spans,
    fenced error lines with control characters shown as escapes)."""
    d = ev.trajectory
    assert d is not None
    lines = [
        f"What the agent did in {ev.attempt_id} (score {ev.score:.2f}): "
        f"{d.steps} steps, {d.tool_calls} tool calls."
    ]
    if d.first_test_step is not None:
        lines.append(
            f"- It first ran the tests at step {d.first_test_step}: "
            f"{code_span(d.first_test_command)}"
        )
    elif d.tool_calls:
        lines.append("- It never ran the tests.")
    if d.failed:
        shown = f" ({len(d.failed)} shown)" if len(d.failed) < d.failed_total else ""
        lines.append(f"- {d.failed_total} command(s) failed{shown}:")
        for f in d.failed:
            code = f" (exit {f.exit_code})" if f.exit_code is not None else ""
            lines.append(f"  - step {f.step}: {code_span(f.command)}{code}")
            if f.error_lines:
                quoted = printable("\n".join(f.error_lines), multiline=True)
                lines.append("    " + fence(quoted).replace("\n", "\n    "))
    if d.repeated:
        runs = ", ".join(f"{code_span(r.command)} x{r.times}" for r in d.repeated)
        lines.append(f"- Commands it ran more than once, unchanged: {runs}")
    if d.files:
        lines.append("- Files its tools named: " + ", ".join(map(code_span, d.files)))
    return "\n".join(lines)


def _task_notes(task: TaskEvidence) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """``(kind, text, attempt ids)`` for one task, most useful first."""
    yield "score_history", _history_text(task), tuple(a for _, a, _ in task.score_history)
    for ev in task.attempts:
        if ev.eval_output:
            yield (
                "eval_output",
                f"The eval output of {ev.attempt_id} (score {ev.score:.2f}) ends with:\n"
                + fence(ev.eval_output),
                (ev.attempt_id,),
            )
    for ev in task.attempts:
        if ev.trajectory is not None and ev.trajectory.steps:
            yield "trajectory", _trajectory_text(ev), (ev.attempt_id,)
    best = task.attempts[0] if task.attempts else None
    if best is not None and best.diff.strip():
        verdict = "solved the task" if best.solved else "was the best attempt, but did not solve it"
        yield (
            "best_diff",
            f"{best.attempt_id} (score {best.score:.2f}) {verdict}; its changes:\n"
            + fence(best.diff.rstrip(), "diff"),
            (best.attempt_id,),
        )
    for ev in task.attempts:
        if ev.final_message.strip():
            yield (
                "final_message",
                f"The agent's last words in {ev.attempt_id} (score {ev.score:.2f}):\n"
                f"> " + "\n> ".join(ev.final_message.strip().splitlines()),
                (ev.attempt_id,),
            )
    for ev in task.attempts:
        touched = ", ".join(map(code_span, ev.files_touched)) if ev.files_touched else "no file"
        yield (
            "files_touched",
            f"{ev.attempt_id} (score {ev.score:.2f}) changed: {touched}",
            (ev.attempt_id,),
        )


def post_text(post: Post) -> str:
    """A post as a note's text: who wrote it, on which evidence, and its words quoted."""
    reply = f", replying to {code_span(post.reply_to)}" if post.reply_to else ""
    return (
        f"Forum post {code_span(post.id)} ({post.kind}, round {post.round}, by the participant "
        f"holding {code_span(post.author_attempt)}{reply}):\n"
        "> " + "\n> ".join(post.text.splitlines() or [""])
    )


def evidence_notes(request: DistillRequest) -> tuple[Note, ...]:
    """The notes of the ``evidence`` distiller (also every distiller's fallback)."""
    g = request.generation
    notes: list[Note] = []

    previous = request.previous.notes if request.previous is not None else ()
    histories: dict[str | None, tuple[str, ...]] = {}
    for note in previous:
        if note.kind == "score_history":
            histories[note.task_id] = (*histories.get(note.task_id, ()), note.id)

    def add(
        kind: str,
        text: str,
        attempts: tuple[str, ...],
        task_id: str | None,
        posts: tuple[str, ...] = (),
    ) -> None:
        replaces = histories.get(task_id, ()) if kind == "score_history" else ()
        notes.append(
            Note(
                id=f"g{g}-{len(notes) + 1:03d}",
                kind=kind,
                text=text,
                task_id=task_id,
                attempts=attempts,
                generation=g,
                replaces=replaces,
                posts=posts,
            )
        )

    solved = [t for t in request.evidence if any(a.solved for a in t.attempts)]
    unsolved = [t for t in request.evidence if t not in solved]
    if request.evidence:
        parts = [f"Generation {g}: {len(solved)} of {len(request.evidence)} scored tasks solved."]
        if solved:
            parts.append("Solved: " + ", ".join(t.task_id for t in solved) + ".")
        if unsolved:
            parts.append("Not solved yet: " + ", ".join(t.task_id for t in unsolved) + ".")
        cited = tuple(a.attempt_id for t in request.evidence for a in t.attempts)
        add("score_history", " ".join(parts), cited, None)
    posts = [p for p in request.forum if p.kind != "done"]
    for post in (p for p in posts if p.task_id is None):
        add("forum_post", post_text(post), post.attempts, None, (post.id,))
    for task in request.evidence:
        for kind, text, attempts in _task_notes(task):
            add(kind, text, attempts, task.task_id)
        for post in (p for p in posts if p.task_id == task.task_id):
            add("forum_post", post_text(post), post.attempts, task.task_id, (post.id,))
    # Earlier notes stay (the renderer puts the newest first), but for those the new
    # ones replace (a task's score history, the shared summary).
    replaced = {old for n in notes for old in n.replaces}
    carried = tuple(n for n in previous if n.id not in replaced)
    return tuple(notes) + carried


class EvidenceDistiller:
    """Facts from scored attempts; no model, so it always works and costs nothing."""

    name: ClassVar[str] = "evidence"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Notes made of facts from scored attempts (score history, eval output of failing "
        "attempts, what their trajectories show, best diff, final messages, files touched); "
        "no model, deterministic."
    )

    def distill(self, request: DistillRequest) -> DistillResult:
        return DistillResult(notes=evidence_notes(request))


@hookimpl(trylast=True)
def ksi_register_distillers(register: Register) -> None:
    register(EvidenceDistiller)

"""The forum as Markdown: ``FORUM.md`` for one session, and the record of a generation's forum.

Posts quote what agents wrote, and the next agent reads ``FORUM.md`` as
Markdown: a post's text goes in a fence no line of it can close
(:func:`~ksi.knowledge.render.fence`), ids and file names in code spans
(:func:`~ksi.knowledge.render.code_span`) and every heading field through
:func:`ksi.text.printable`, so no post can end its quote and pass for KSI's
instructions or for another post. The thread is cut to
:data:`FORUM_BUDGET_BYTES` (the newest posts are kept; the file says how many
were left out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ksi.knowledge.forum import (
    EVIDENCE_DIR,
    MAX_POST_BYTES,
    MAX_POSTS_PER_SESSION,
    POSTS_DIR,
    ForumSession,
    Post,
    Room,
    Seat,
    room_label,
)
from ksi.knowledge.render import code_span, fence
from ksi.text import printable

#: The most bytes of posts one ``FORUM.md`` holds (its instructions come on top).
FORUM_BUDGET_BYTES = 64 * 1024
#: What a post's text is cut to in another room's summary (the cross-task room's view).
SUMMARY_TEXT_BYTES = 600
#: The files of ``evidence/`` (what a participant's attempt showed).
EVIDENCE_FILES = {
    "attempt.json": "the task, the attempt id, its score",
    "diff.patch": "its changes to the starting files",
    "eval_output.txt": "the end of the tests' output",
    "final_message.txt": "the agent's last words",
}

_SCHEMA = (
    '{"kind": "finding", "text": "...", "cites": ["attempts/<task>/<n>"], "reply_to": "<post id>"}'
)


def _score(seat: Seat) -> str:
    return f"score {seat.score:.2f}"


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore") + " [...]"


def post_block(post: Post, *, text_limit: int | None = None) -> str:
    """One post: a heading KSI wrote, what it rests on, its text fenced."""
    where = f"round {post.round}, participant {post.participant}"
    lines = [f"#### {code_span(post.id)}: {printable(post.kind)} ({where})", ""]
    rests = ", ".join(code_span(a) for a in post.attempts)
    meta = f"Rests on {rests}."
    if post.reply_to:
        meta += f" Replies to {code_span(post.reply_to)}."
    lines.append(meta)
    if post.text:
        text = post.text if text_limit is None else _cut(post.text, text_limit)
        lines.extend(["", fence(text, "text")])
    return "\n".join(lines) + "\n\n"


def _thread(posts: Sequence[Post], budget: int, *, text_limit: int | None = None) -> str:
    """``posts`` in order, the newest kept when they do not all fit in ``budget`` bytes."""
    if not posts:
        return "_No posts yet._\n\n"
    blocks: list[str] = []
    used = 0
    for post in reversed(posts):
        block = post_block(post, text_limit=text_limit)
        if used + len(block.encode()) > budget:
            break
        blocks.append(block)
        used += len(block.encode())
    left_out = len(posts) - len(blocks)
    head = f"_{left_out} earlier post(s) left out to keep this file small._\n\n" if left_out else ""
    return head + "".join(reversed(blocks))


def _instructions(seat: Seat, scope: str) -> str:
    files = "\n".join(f"- `{EVIDENCE_DIR}/{name}`: {what}" for name, what in EVIDENCE_FILES.items())
    return (
        f"Your evidence is in `{EVIDENCE_DIR}/` beside this file:\n\n{files}\n\n"
        "## How to post\n\n"
        f"Write each post as its own JSON file in `{POSTS_DIR}/` beside this file (any name "
        f"ending in `.json`, e.g. `{POSTS_DIR}/1.json`):\n\n"
        f"```json\n{_SCHEMA}\n```\n\n"
        "- `kind`: `finding` (what the evidence shows), `hypothesis` (what might explain "
        "it), `rejected` (a hypothesis the evidence rules out), `question`, `answer` (give "
        "`reply_to`), or `done` (you have nothing more to add; `text` may be left out).\n"
        "- `cites` (optional): the attempt ids the post rests on, as listed under "
        f"Participants; your own attempt, {code_span(seat.attempt)}, is cited anyway.\n"
        "- `reply_to` (optional): the id of the post you answer (the ids in the thread).\n"
        f"- At most {MAX_POSTS_PER_SESSION} posts of at most {MAX_POST_BYTES} bytes each. "
        "A post that breaks these rules is dropped. Nothing else you write is kept.\n\n"
        f"Post what {scope}: concrete, checkable facts (what the tests expect, what failed "
        "and why, what to check first), not a retelling. What you post here is distilled "
        "into the notes the next generation's agents read. When every participant has "
        "posted `done`, the forum ends before its last round.\n\n"
    )


def _participants(room: Room, me: Seat, *, by_task: bool) -> str:
    lines = []
    for seat in room.seats:
        you = " (you)" if seat == me else ""
        task = f"task {code_span(seat.task_id)}, " if by_task else ""
        lines.append(
            f"- participant {seat.participant}{you}: {task}{code_span(seat.attempt)}, "
            f"{_score(seat)}"
        )
    return "\n".join(lines) + "\n\n"


def session_forum(
    *,
    generation: int,
    room: Room,
    seat: Seat,
    round_: int,
    rounds: int,
    prompt: str,
    thread: Sequence[Post],
    threads: Mapping[str, Sequence[Post]] | None = None,
    budget_bytes: int = FORUM_BUDGET_BYTES,
) -> str:
    """``FORUM.md`` for ``seat`` in ``room``'s round ``round_`` (of ``rounds``).

    ``thread``: the room's posts so far; ``threads`` (the cross-task room
    only): each task's own thread, shown as summaries.
    """
    n = len(room.seats)
    if room.task_id is not None:
        title = (
            f"# Forum: task {code_span(room.task_id)}, generation {generation}, "
            f"round {round_} of {rounds}\n\n"
        )
        intro = (
            f"You are participant {seat.participant} of {n} in a forum about the task below. "
            "Each participant is a fresh session holding the evidence of one graded attempt "
            f"at it; yours is {code_span(seat.attempt)} ({_score(seat)}).\n\n"
        )
        body = [
            title,
            intro,
            _instructions(seat, "your attempt shows that the others may not know"),
            "## The task\n\n",
            fence(prompt.rstrip() or "(no prompt)", "text") + "\n\n",
            "## Participants\n\n",
            _participants(room, seat, by_task=False),
            "## The thread so far\n\n",
            _thread(thread, budget_bytes),
        ]
        return "".join(body)
    title = (
        f"# Forum: every task (the cross-task room), generation {generation}, "
        f"round {round_} of {rounds}\n\n"
    )
    intro = (
        f"You are participant {seat.participant} of {n}, for task {code_span(seat.task_id)}. "
        "Each participant holds the best attempt of this generation at one task; yours is "
        f"{code_span(seat.attempt)} ({_score(seat)}). Below are what each task's own forum "
        "found, then this room's thread.\n\n"
    )
    summaries = []
    share = budget_bytes // 2 // max(1, len(threads or {}))
    for task_id, posts in (threads or {}).items():
        said = [p for p in posts if p.kind != "done"]
        summaries.append(f"### {printable(room_label(task_id))}\n\n")
        summaries.append(_thread(said, max(share, 1024), text_limit=SUMMARY_TEXT_BYTES))
    body = [
        title,
        intro,
        _instructions(seat, "transfers across tasks (a convention, a pitfall, a check)"),
        "## Participants\n\n",
        _participants(room, seat, by_task=True),
        "## Each task's thread\n\n",
        "".join(summaries) or "_No task had a forum of its own._\n\n",
        "## This room's thread so far\n\n",
        _thread(thread, budget_bytes // 2),
    ]
    return "".join(body)


def forum_record(
    generation: int,
    rooms: Sequence[Room],
    sessions: Sequence[ForumSession],
    ended: Mapping[str | None, str],
) -> str:
    """Every room's thread of ``generation``'s forum, round by round, for people.

    Each session says how it ended, what it spent and which post files were
    dropped, and why.
    """
    lines = [f"# Forum of generation {generation}\n\n"]
    by_room: dict[str | None, list[ForumSession]] = {}
    for s in sessions:
        by_room.setdefault(s.task_id, []).append(s)
    for room in rooms:
        mine = sorted(by_room.get(room.task_id, []), key=lambda s: (s.round, s.participant))
        status = ended.get(room.task_id, "")
        lines.append(
            f"## {printable(room_label(room.task_id))} ({len(room.seats)} participant(s)"
            + (f"; ended: {printable(status)}" if status else "")
            + ")\n\n"
        )
        for seat in room.seats:
            task = f"task {code_span(seat.task_id)}, " if room.task_id is None else ""
            lines.append(
                f"- participant {seat.participant}: {task}{code_span(seat.attempt)}, "
                f"{_score(seat)}\n"
            )
        lines.append("\n")
        for r in sorted({s.round for s in mine}):
            lines.append(f"### Round {r}\n\n")
            for s in (s for s in mine if s.round == r):
                cost = f", ${s.usage.cost_usd:.4f}" if s.usage.cost_usd is not None else ""
                how = printable(s.agent_status or s.status)
                lines.append(
                    f"- participant {s.participant}: {how}, {len(s.posts)} post(s){cost}; "
                    f"session {code_span(s.session_dir)}\n"
                )
                for d in s.dropped:
                    lines.append(f"  - dropped {code_span(d.file)}: {printable(d.reason)}\n")
            lines.append("\n")
            for s in (s for s in mine if s.round == r):
                lines.extend(post_block(p) for p in s.posts)
    return "".join(lines)

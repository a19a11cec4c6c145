"""The forum's tools for agents that speak MCP: ``forum_read``, ``forum_post``, ``forum_done``.

They are the file contract (:mod:`ksi.knowledge.forum`) behind a tool call,
not a second way in: ``forum_post`` checks the post as KSI will
(:func:`~ksi.knowledge.forum.parse_post`), says at once what is wrong with a
refused one, and writes an accepted one as ``posts/mcp-<n>.json`` in the
session's ``repo/``, where KSI collects it with the agent's own files when
the session ends (citations and replies are checked then, against the whole
run). ``forum_done`` posts ``done``.

Live within the round: a session given the round's live directory (the
``local`` environment, where the agent's tools see the run directory) also
writes each accepted post there, and ``forum_read`` shows what the other
participants of the room posted so far this round, beside ``FORUM.md`` (the
thread up to the round's start). Another participant's live post is only
what its author's tool wrote: it is quoted like any post, and KSI keeps it
only if it passes the round's checks.

The tools are served by :mod:`ksi.knowledge.mcp_server` (the knowledge
tools' server, with ``--forum-repo``); this module imports no MCP.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ksi.knowledge.forum import FORUM_FILE, POSTS_DIR, PostFile, PostRefused, parse_post
from ksi.knowledge.render import code_span, fence
from ksi.serialization import to_data

#: The tools, as the server registers them.
FORUM_TOOL_NAMES = ("forum_read", "forum_post", "forum_done")
#: The prefix of the post files the tools write in ``posts/``.
TOOL_FILE_PREFIX = "mcp-"


def _next_number(posts: Path) -> int:
    taken = [
        int(name[len(TOOL_FILE_PREFIX) : -len(".json")])
        for name in os.listdir(posts)
        if name.startswith(TOOL_FILE_PREFIX)
        and name.endswith(".json")
        and name[len(TOOL_FILE_PREFIX) : -len(".json")].isdigit()
    ]
    return max(taken, default=0) + 1


def _write(path: Path, data: bytes) -> None:
    """All of the file or none of it (a reader, KSI's collection or another session's
    ``forum_read``, never sees half a post)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def answer_forum_post(
    repo: Path,
    *,
    participant: int,
    live: Path | None,
    kind: str,
    text: str = "",
    cites: list[str] | None = None,
    reply_to: str = "",
) -> str:
    """``forum_post``: check the post, write it (and its live copy); say which file or why not."""
    data: dict[str, object] = {"kind": kind, "text": text}
    if cites:
        data["cites"] = cites
    if reply_to:
        data["reply_to"] = reply_to
    raw = json.dumps(data, ensure_ascii=False).encode("utf-8")
    try:
        post: PostFile = parse_post(raw)
    except PostRefused as exc:
        return f"refused, not posted: {exc}"
    posts = repo / POSTS_DIR
    posts.mkdir(exist_ok=True)
    number = _next_number(posts)
    name = f"{TOOL_FILE_PREFIX}{number:03d}.json"
    body = json.dumps(to_data(post), ensure_ascii=False).encode("utf-8")
    _write(posts / name, body)
    if live is not None:
        live.mkdir(parents=True, exist_ok=True)
        _write(live / f"p{participant}-{number:03d}.json", body)
    return (
        f"posted as {POSTS_DIR}/{name}; KSI checks its citations and reply when the round "
        "ends, and gives it an id then"
    )


def _live_posts(live: Path | None, participant: int) -> list[tuple[int, str, dict[str, object]]]:
    """``(participant, file, post)`` of the others' live posts that still parse, in order."""
    if live is None or not live.is_dir():
        return []
    found = []
    for name in sorted(os.listdir(live)):
        who = name[1:].split("-", 1)[0]
        if not (name.startswith("p") and name.endswith(".json") and who.isdigit()):
            continue
        if int(who) == participant:
            continue
        try:
            post = parse_post((live / name).read_bytes())
        except (OSError, PostRefused):
            continue
        found.append((int(who), name, to_data(post)))
    return found


def _block(heading: str, post: dict[str, object]) -> str:
    cites = post.get("cites")
    meta = []
    if isinstance(cites, list) and cites:
        meta.append("Cites " + ", ".join(code_span(str(c)) for c in cites) + ".")
    if post.get("reply_to"):
        meta.append(f"Replies to {code_span(str(post['reply_to']))}.")
    text = str(post.get("text") or "")
    return (
        f"#### {heading}: {code_span(str(post.get('kind', '')))}\n\n"
        + (" ".join(meta) + "\n\n" if meta else "")
        + (fence(text, "text") + "\n\n" if text else "")
    )


def answer_forum_read(repo: Path, *, participant: int, live: Path | None) -> str:
    """``forum_read``: ``FORUM.md`` (the thread up to this round), then this round so far:
    the other participants' live posts, and the session's own."""
    try:
        board = (repo / FORUM_FILE).read_text(encoding="utf-8")
    except OSError as exc:
        return f"no {FORUM_FILE} ({exc.strerror}): this is not a forum session"
    parts = [board.rstrip() + "\n\n", "## This round so far\n\n"]
    others = _live_posts(live, participant)
    if live is None:
        parts.append(
            "_The other participants' posts of this round are not visible from this "
            "session; they are in the next round's thread._\n\n"
        )
    elif not others:
        parts.append("_No other participant has posted this round yet._\n\n")
    for who, _, post in others:
        parts.append(_block(f"participant {who} (this round, not checked yet)", post))
    posts = repo / POSTS_DIR
    mine = sorted(n for n in os.listdir(posts) if n.endswith(".json")) if posts.is_dir() else []
    for name in mine:
        if (posts / name).is_symlink():
            continue
        try:
            post = to_data(parse_post((posts / name).read_bytes()))
        except (OSError, PostRefused):
            continue
        parts.append(_block(f"yours, {code_span(f'{POSTS_DIR}/{name}')}", post))
    return "".join(parts)

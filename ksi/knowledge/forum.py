"""The forum's posts: the file contract agents write, and the posts KSI keeps.

Between a generation's attempts and its distillation, fresh agent sessions
compare notes (:mod:`ksi.generations.forum` runs them). Each session's
``repo/`` holds ``FORUM.md`` (the thread so far and the instructions), its
attempt's evidence in ``evidence/``, and an empty ``posts/`` directory; the
agent writes each post as one JSON file there, ``posts/<any-name>.json``::

    {"kind": "finding" | "hypothesis" | "rejected" | "question" | "answer" | "done",
     "text": "...", "cites": ["attempts/<task>/<n>", ...], "reply_to": "<post id>"}

``cites`` and ``reply_to`` are optional, and ``text`` may be left out of a
``done`` post. This contract is public, like the tasks format: it is read
with a strict converter (unknown keys refused) and stays stable. A file that
breaks it is dropped, never repaired, and the reason is kept
(:class:`DroppedPost`, the ``forum_round`` line of ``generations.jsonl``):
not a regular ``.json`` file, over :data:`MAX_POST_BYTES`, not JSON, a
schema violation (path-addressed), a citation of an attempt that is not a
scored attempt of the run's learning tasks, a reply to a post that does not
exist, or past :data:`MAX_POSTS_PER_SESSION`. Hidden files (``.name``) are
not posts and are ignored.

Posts KSI keeps get ids (``forum/<g>/tasks/<task>/r<round>p<participant>-<n>``,
``forum/<g>/cross-task/...`` for the room of all tasks) and rest on attempts:
the one whose evidence their author held, and what they cite. A
:class:`ForumStore` keeps one :class:`ForumSession` per finished session, its
posts with it, so a session's posts are stored exactly when the session is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from ksi.errors import KsiError
from ksi.fileops import append_line_durably
from ksi.fstree import open_dir_inside, open_file_inside
from ksi.layout import task_dirname
from ksi.models import Usage
from ksi.records import SkippedFile
from ksi.serialization import (
    dumps_line,
    from_data,
    lone_surrogate_path,
    strict_converter,
    validation_problems,
)

#: What a post says.
POST_KINDS = ("finding", "hypothesis", "rejected", "question", "answer", "done")
#: Where a session's files are, in its ``repo/``.
FORUM_FILE = "FORUM.md"
POSTS_DIR = "posts"
EVIDENCE_DIR = "evidence"
#: The largest post file kept (bytes); a larger one is dropped, not cut.
MAX_POST_BYTES = 8 * 1024
#: The most posts one session may write; the ones after are dropped.
MAX_POSTS_PER_SESSION = 20
#: Where the forum lives in the run directory (``forum/<generation>/``).
FORUM_DIR = "forum"
SESSIONS_FILE = "sessions.jsonl"
#: The forum of a generation, for people (every room's thread), rewritten after each round.
RECORD_FILE = "FORUM.md"
#: The room of all tasks (``--cross-task-forum-rounds``), in paths and ids.
CROSS_TASK = "cross-task"


def _kind(_: Any, attribute: Any, value: str) -> None:
    if value not in POST_KINDS:
        raise ValueError(f"expected one of {', '.join(POST_KINDS)}, got {value!r}")


@attrs.frozen
class PostFile:
    """One ``posts/<name>.json`` as the agent writes it (the public contract)."""

    kind: str = attrs.field(validator=_kind)
    text: str = ""
    cites: tuple[str, ...] = ()
    reply_to: str | None = None


@attrs.frozen
class Seat:
    """A participant of a room: the scored attempt whose evidence it holds."""

    participant: int
    #: The attempt's id (``attempts/<task>/<n>``), its task and its score.
    attempt: str
    task_id: str
    score: float


@attrs.frozen
class Room:
    """One thread: a task's (``task_id``), or the cross-task room (``task_id`` None)."""

    task_id: str | None
    seats: tuple[Seat, ...]


@attrs.frozen
class Post:
    """A post KSI kept, with what it rests on."""

    id: str
    generation: int
    #: The room: the task it is about; None for the cross-task room.
    task_id: str | None
    round: int
    participant: int
    #: The attempt whose evidence the author held.
    author_attempt: str
    kind: str
    text: str
    #: The attempts it cites (each a scored attempt of the run's learning tasks).
    cites: tuple[str, ...] = ()
    reply_to: str | None = None
    #: The file it came from (``posts/<name>.json``).
    file: str = ""

    @property
    def attempts(self) -> tuple[str, ...]:
        """What the post rests on: its author's attempt, then what it cites."""
        return tuple(dict.fromkeys((self.author_attempt, *self.cites)))


@attrs.frozen
class DroppedPost:
    """A post file KSI did not keep, and why."""

    file: str
    reason: str


@attrs.frozen
class ForumSession:
    """One participant's session in one round, as recorded when it finished."""

    generation: int
    #: The room (None: the cross-task room), the round and the participant.
    task_id: str | None
    round: int
    participant: int
    #: The attempt whose evidence the session held.
    attempt: str
    #: The session's record status and agent status (``completed``, ``timeout``...).
    status: str
    agent_status: str = ""
    usage: Usage = attrs.field(factory=Usage)
    #: Its attempt directory, relative to the run directory.
    session_dir: str = ""
    posts: tuple[Post, ...] = ()
    dropped: tuple[DroppedPost, ...] = ()
    error: str = ""
    finished_at: str = ""

    @property
    def key(self) -> tuple[str | None, int, int]:
        return (self.task_id, self.round, self.participant)

    @property
    def said_done(self) -> bool:
        return any(p.kind == "done" for p in self.posts)


def room_path(task_id: str | None) -> str:
    """A room's place under ``forum/<g>/``: ``tasks/<task dir>``, or ``cross-task``."""
    return CROSS_TASK if task_id is None else f"tasks/{task_dirname(task_id)}"


def room_label(task_id: str | None) -> str:
    return "the cross-task room" if task_id is None else f"task {task_id}"


def post_id(generation: int, task_id: str | None, round_: int, participant: int, n: int) -> str:
    return f"{FORUM_DIR}/{generation}/{room_path(task_id)}/r{round_}p{participant}-{n}"


def posts_of(sessions: Iterable[ForumSession]) -> list[Post]:
    """Every kept post of ``sessions``, in the order they were written (round, participant)."""
    ordered = sorted(sessions, key=lambda s: (s.round, s.task_id is None, s.participant))
    return [p for s in ordered for p in s.posts]


# -- reading post files -----------------------------------------------------------------


# cattrs alone would turn 5 into "5" and "abc" into ("a", "b", "c"): a post says what it means.
_strict = strict_converter(forbid_extra_keys=True)


class PostRefused(KsiError):
    """Why a post file is not kept (the reason a person reads)."""


def _too_large(size: int) -> str:
    return f"{size} bytes, over the limit of {MAX_POST_BYTES}"


def parse_post(raw: bytes) -> PostFile:
    """A post file's bytes as a :class:`PostFile`; :class:`PostRefused` says what is wrong."""
    if len(raw) > MAX_POST_BYTES:
        raise PostRefused(_too_large(len(raw)))
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PostRefused(f"not UTF-8 JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise PostRefused(f"$: expected a JSON object, got {type(data).__name__}")
    bad = lone_surrogate_path(data)
    if bad is not None:
        raise PostRefused(f"{bad}: holds an escaped lone surrogate (such as \\ud800), not text")
    # Unknown keys and kinds are named here: cattrs would address both to ``$`` only.
    keys = [f.name for f in attrs.fields(PostFile)]
    problems = [
        f"$.{key}: unknown key (a post has {', '.join(keys)})" for key in data if key not in keys
    ]
    known = {k: v for k, v in data.items() if k in keys}
    if "kind" in known and known["kind"] not in POST_KINDS:
        problems.append(f"$.kind: expected one of {', '.join(POST_KINDS)}, got {known['kind']!r}")
        known["kind"] = "done"  # to find what else is wrong
    try:
        post = _strict.structure(known, PostFile)
    except Exception as exc:
        problems.extend(validation_problems(exc))
    if problems:
        raise PostRefused("; ".join(problems))
    if post.kind != "done" and not post.text.strip():
        raise PostRefused(f"$.text: a {post.kind} post needs text")
    return post


@attrs.frozen
class Author:
    """Who wrote the posts of one session (what a kept post records about it)."""

    generation: int
    task_id: str | None
    round: int
    participant: int
    attempt: str


def _read_capped(repo: Path, rel: str) -> bytes:
    fd = open_file_inside(repo, rel)
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_POST_BYTES + 1)
    finally:
        os.close(fd)


def collect_posts(
    repo: Path,
    author: Author,
    *,
    known_attempts: Iterable[str],
    known_posts: Iterable[str],
    skipped: Sequence[SkippedFile] = (),
) -> tuple[tuple[Post, ...], tuple[DroppedPost, ...]]:
    """The posts one session wrote in ``repo/posts/`` (its captured copy), checked.

    ``known_attempts``: what a post may cite (the run's scored attempts of
    learning tasks); ``known_posts``: what it may reply to. ``skipped``: the
    files capture left out (a file named like a test is never captured: it
    is reported as dropped, with capture's reason). Files are read in name
    order, through no symlink.
    """
    attempts, replies = set(known_attempts), set(known_posts)
    kept: list[Post] = []
    dropped = [
        DroppedPost(s.path, f"capture left it out ({s.reason})")
        for s in skipped
        if s.path.startswith(f"{POSTS_DIR}/")
    ]
    try:
        dir_fd = open_dir_inside(repo, POSTS_DIR)
    except OSError:
        return (), tuple(dropped)  # no posts/ (the agent removed it): nothing posted
    try:
        entries = sorted(os.scandir(dir_fd), key=lambda e: e.name)
        for entry in entries:
            rel = f"{POSTS_DIR}/{entry.name}"
            if entry.name.startswith("."):
                continue
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                dropped.append(DroppedPost(rel, "not a regular file"))
                continue
            if not entry.name.endswith(".json"):
                dropped.append(DroppedPost(rel, "not a .json file"))
                continue
            size = entry.stat(follow_symlinks=False).st_size
            if size > MAX_POST_BYTES:
                dropped.append(DroppedPost(rel, _too_large(size)))
                continue
            if len(kept) >= MAX_POSTS_PER_SESSION:
                dropped.append(
                    DroppedPost(rel, f"more than {MAX_POSTS_PER_SESSION} posts in one session")
                )
                continue
            try:
                post = parse_post(_read_capped(repo, rel))
                _check_references(post, attempts, replies)
            except PostRefused as exc:
                dropped.append(DroppedPost(rel, str(exc)))
                continue
            except OSError as exc:
                dropped.append(DroppedPost(rel, f"unreadable ({exc.strerror or exc})"))
                continue
            kept.append(
                Post(
                    id=post_id(
                        author.generation,
                        author.task_id,
                        author.round,
                        author.participant,
                        len(kept) + 1,
                    ),
                    generation=author.generation,
                    task_id=author.task_id,
                    round=author.round,
                    participant=author.participant,
                    author_attempt=author.attempt,
                    kind=post.kind,
                    text=post.text.strip(),
                    cites=tuple(dict.fromkeys(post.cites)),
                    reply_to=post.reply_to,
                    file=rel,
                )
            )
    finally:
        os.close(dir_fd)
    return tuple(kept), tuple(dropped)


def _check_references(post: PostFile, attempts: set[str], posts: set[str]) -> None:
    for i, cite in enumerate(post.cites):
        if cite not in attempts:
            raise PostRefused(
                f"$.cites[{i}]: {cite!r} is not a scored attempt of this run's learning tasks "
                "(cite attempts as attempts/<task>/<n>, as FORUM.md lists them)"
            )
    if post.reply_to is not None and post.reply_to not in posts:
        raise PostRefused(f"$.reply_to: no post {post.reply_to!r} in this forum")


# -- the store --------------------------------------------------------------------------


class ForumStore(Protocol):
    """Where a run's forum sessions (and their posts) are kept."""

    def sessions(self, generation: int) -> list[ForumSession]:
        """The finished sessions of ``generation``'s forum, one per (room, round, participant)."""

    def add_session(self, session: ForumSession) -> None:
        """Keep ``session`` and its posts, durably, before anyone hears of them."""

    def write_record(self, generation: int, text: str) -> None:
        """Replace the forum's human-readable record of ``generation`` with ``text``."""

    def spend(self) -> float:
        """What every stored session reported spending (it counts toward ``--max-cost``)."""


def forum_dir(run_dir: Path, generation: int) -> Path:
    return Path(run_dir) / FORUM_DIR / str(generation)


@attrs.frozen
class FileForumStore:
    """``forum/<g>/sessions.jsonl`` (one durable line per finished session) and
    ``forum/<g>/FORUM.md`` (every thread, for people), in the run directory."""

    run_dir: Path

    def _sessions_file(self, generation: int) -> Path:
        return forum_dir(self.run_dir, generation) / SESSIONS_FILE

    def sessions(self, generation: int) -> list[ForumSession]:
        """Every complete line (a torn or damaged one is skipped; the first of a key wins)."""
        try:
            data = self._sessions_file(generation).read_bytes()
        except FileNotFoundError:
            return []
        seen: dict[tuple[str | None, int, int], ForumSession] = {}
        for raw in data.split(b"\n")[:-1]:
            try:
                session = from_data(json.loads(raw), ForumSession)
            except Exception:
                continue
            seen.setdefault(session.key, session)
        return list(seen.values())

    def add_session(self, session: ForumSession) -> None:
        path = self._sessions_file(session.generation)
        path.parent.mkdir(parents=True, exist_ok=True)
        append_line_durably(path, (dumps_line(session) + "\n").encode("utf-8"))

    def write_record(self, generation: int, text: str) -> None:
        path = forum_dir(self.run_dir, generation) / RECORD_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{RECORD_FILE}.tmp-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)

    def generations(self) -> list[int]:
        root = Path(self.run_dir) / FORUM_DIR
        if not root.is_dir():
            return []
        found = (p for p in root.iterdir() if p.name.isdigit())
        return sorted(int(p.name) for p in found if (p / SESSIONS_FILE).is_file())

    def spend(self) -> float:
        return sum(
            float(s.usage.cost_usd or 0.0) for g in self.generations() for s in self.sessions(g)
        )

"""Capture: turn the live ``repo/`` an agent left behind into the tree that gets graded.

The evaluator never grades what the agent left in place (with the default
``--wipe-workspace-per-task true``): it grades a *captured copy*, built here
under rules the agent cannot bend:

* the whole final repo is copied, with no file-count cap;
* ``score.json`` files, ``*.pyc`` files and ``__pycache__`` directories are
  dropped (a score comes only from the eval command; bytecode is noise);
* test files (:mod:`ksi.protected_files`: by convention, ``tests/``,
  ``test_*``, ``*_test.*``, ``conftest.py``..., never by substring, plus the
  task's and the run's protect globs) come from the seed, never from the
  agent: a seed test file is restored if the agent edited or deleted it, a
  new file that looks like a test is dropped;
* symlinks are never followed: one that resolves inside the live repo is
  recreated as a relative symlink, anything else (outside, dangling, loop) is
  skipped;
* files over ``max_file_bytes``, special files (fifos, sockets, devices) and
  unreadable files or directories are skipped.

Nothing is lost silently: every skipped path is listed in
:attr:`CaptureReport.skipped` (journalled as the attempt's ``skipped_files``),
except ``.pyc``/``__pycache__`` noise, which is only counted.

The record lists the first :data:`MAX_LISTED_SKIPS` of them (sorted by
path) and counts every one by kind, so a tree of 100,000 planted files
cannot make a journal line megabytes long.

Capture is race-free on its own, even if something of the agent still ran
(the runner halts the environment first anyway): the live tree is walked by
directory file descriptor (:mod:`ksi.fstree`), every file opened with
``O_NOFOLLOW`` relative to its directory, and no path in the live tree is
ever resolved again. A directory swapped for a symlink mid-walk fails to
open and is listed; it is never followed. Symlinks are judged after the
walk, in the captured copy (which only KSI writes), never by resolving them
in the live tree.

Capture must survive any tree an agent can build (000 directories, deep
nesting, non-UTF-8 names, a 50 GB sparse file), so it walks iteratively,
copies by streaming file descriptors (``sendfile``), never reads a whole
file into memory, and turns every ``OSError`` about one path into a skipped
entry instead of an exception.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import posixpath
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from ksi.fstree import (
    READ_FLAGS,
    SWAPPED_ERRNOS,
    WRITE_FLAGS,
    copy_tree,
    open_root,
    remove_tree,
    same_content,
    stream,
    walk_fd,
)
from ksi.protected_files import DEFAULT_RULE, ProtectRule
from ksi.records import SkippedFile

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "MAX_LISTED_SKIPS",
    "CaptureReport",
    "capture_repo",
    "copy_tree",
    "display_path",
    "is_noise_name",
    "remove_tree",
    "same_file_content",
    "walk_tree",
]

#: Files larger than this are not captured (10 MiB). Large enough for any
#: source file, lockfile or small fixture an agent writes; small enough that a
#: runaway log, core dump or downloaded model cannot fill the run directory,
#: which keeps one captured repo per attempt. Raise it per run when a task's
#: legitimate output is bigger.
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
#: Skipped paths listed in an attempt's record (the first ones by path); every
#: one is still counted by kind in :attr:`CaptureReport.skipped_counts`.
MAX_LISTED_SKIPS = 200

#: Directory names dropped wherever they appear (Python bytecode caches).
NOISE_DIR_NAMES = frozenset({"__pycache__"})
#: File suffixes dropped wherever they appear.
NOISE_SUFFIXES = (".pyc",)
#: Never captured: only the eval command may write a score.
SCORE_FILE_NAME = "score.json"


@attrs.frozen
class CaptureReport:
    """What :func:`capture_repo` did: counts, and the paths it did not copy."""

    files_copied: int
    bytes_copied: int
    #: The first :data:`MAX_LISTED_SKIPS` skipped paths, sorted by path.
    skipped: tuple[SkippedFile, ...]
    #: Symlinks recreated (as relative links) because they stay inside repo/.
    symlinks_kept: int = 0
    #: ``.pyc`` files and ``__pycache__`` directories dropped (not listed).
    noise_dropped: int = 0
    #: Seed test files the agent edited, replaced or deleted, put back from the seed.
    restored: tuple[str, ...] = ()
    #: The live repo/ was gone (or not a real directory) when capture ran.
    repo_missing: bool = False
    #: The live repo/ was there but could not be read (the agent removed its permissions).
    repo_unreadable: bool = False
    #: Every skipped path, counted by kind (``too_large``, ``symlink_outside``...).
    skipped_counts: dict[str, int] = attrs.field(factory=dict)

    @property
    def skipped_total(self) -> int:
        """How many paths were skipped, listed or not."""
        return sum(self.skipped_counts.values())


def is_noise_name(name: str) -> bool:
    """``__pycache__`` and ``*.pyc``: dropped everywhere without being listed."""
    return name in NOISE_DIR_NAMES or name.endswith(NOISE_SUFFIXES)


def walk_tree(
    root: str, skip: Callable[[str], bool] = is_noise_name
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(relative path, entry)`` for everything under ``root`` whose name ``skip`` allows.

    For trees only KSI writes (the seed, a captured repo: the diff reads
    these), never the live workspace. Only real directories are descended
    into (symlinks are never followed); a directory that cannot be read, and
    an entry whose type cannot be told, are passed over without a word.
    """
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir)) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            if skip(entry.name):
                continue
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
            except OSError:
                continue
            yield rel, entry


def display_path(rel: str) -> str:
    """A relative path as journal-safe text (undecodable bytes shown as ``\\xNN``)."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def capture_repo(
    live: Path,
    seed: Path,
    dest: Path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    protect: ProtectRule = DEFAULT_RULE,
) -> CaptureReport:
    """Copy ``live`` (the agent's repo/) into ``dest`` under the capture rules.

    ``seed`` is the task's pristine repo/ (the source of every file
    ``protect`` matches: test files by convention, plus the task's and run's
    globs). ``dest`` is replaced if it exists. Never raises for anything found
    in ``live``; raises ``OSError`` if ``dest`` itself cannot be created or
    the disk fills up (``ENOSPC``/``EDQUOT``) while it is written.
    """
    if max_file_bytes < 0:
        raise ValueError(f"max_file_bytes must be >= 0, got {max_file_bytes}")
    out = os.path.abspath(dest)
    remove_tree(Path(out))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    os.mkdir(out)
    tally = _Tally()
    copy = _Copy(out, tally)
    tests = _TestFiles(os.path.abspath(seed), protect, copy, tally)
    _LiveWalk(os.path.abspath(live), copy, tests, tally, max_file_bytes).run()
    tests.restore()
    return tally.report(symlinks_kept=copy.settle_links())


class _Tally:
    """What capture copied and what it passed over, with why: the :class:`CaptureReport`.

    Every part of capture reports each path it does not copy here, so none
    goes unlisted.
    """

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0
        self.noise = 0
        self.skipped: list[SkippedFile] = []
        self.kinds: Counter[str] = Counter()
        self.restored: list[str] = []
        self.repo_missing = False
        self.repo_unreadable = False

    def skip(self, rel: str, kind: str, reason: str, size: int | None = None) -> None:
        self.kinds[kind] += 1
        self.skipped.append(SkippedFile(display_path(rel or "."), reason, size, kind))

    def report(self, *, symlinks_kept: int) -> CaptureReport:
        listed = sorted(self.skipped, key=lambda s: s.path)[:MAX_LISTED_SKIPS]
        return CaptureReport(
            files_copied=self.files,
            bytes_copied=self.bytes,
            skipped=tuple(listed),
            symlinks_kept=symlinks_kept,
            noise_dropped=self.noise,
            restored=tuple(display_path(r) for r in self.restored),
            repo_missing=self.repo_missing,
            repo_unreadable=self.repo_unreadable,
            skipped_counts=dict(sorted(self.kinds.items())),
        )


class _Copy:
    """The captured copy, which only KSI writes: files streamed in by descriptor, links judged
    here once everything is in place (never by resolving anything in the live tree)."""

    def __init__(self, dest: str, tally: _Tally) -> None:
        self.dest = dest
        self.tally = tally
        #: Symlinks written, judged by :meth:`settle_links`.
        self.links: list[str] = []

    def copy_file(self, dir_fd: int | None, name: str, rel: str, limit: int | None) -> bool:
        """Stream one regular file (``name`` in ``dir_fd``) to ``rel``; ``limit=None`` for seed
        files."""
        skip = self.tally.skip
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a symlink since the listing
                skip(rel, "changed", "symlink: not followed")
            else:
                skip(rel, "unreadable", f"unreadable file: {_why(exc)}")
            return False
        dst = os.path.join(self.dest, rel)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                skip(rel, "special", f"special file ({_kind(st.st_mode)}): not captured")
                return False
            if limit is not None and st.st_size > limit:
                skip(rel, "too_large", f"larger than the {limit}-byte capture limit", st.st_size)
                return False
            try:
                out = os.open(dst, WRITE_FLAGS, 0o600)
            except OSError as exc:
                skip(rel, "not_copied", f"copy not written: {_why(exc)}")
                return False
            try:
                copied = stream(fd, out, limit)
                os.fchmod(out, (st.st_mode & 0o777) | 0o600)
            except OSError as exc:
                os.close(out)
                _unlink_quietly(dst)
                skip(rel, "unreadable", f"read failed: {_why(exc)}")
                return False
            os.close(out)
            if copied is None:  # grew past the limit while being copied
                _unlink_quietly(dst)
                skip(rel, "too_large", f"larger than the {limit}-byte capture limit", st.st_size)
                return False
        finally:
            os.close(fd)
        self.tally.files += 1
        self.tally.bytes += copied
        return True

    def write_link(self, rel: str, target: str, roots: tuple[str, ...]) -> None:
        """Recreate a symlink as it was; :meth:`settle_links` judges it later.

        An absolute target inside the tree it came from (``roots``) is moved
        to the same place in the copy, so it is judged as the link it was.
        """
        if os.path.isabs(target):
            for root in roots:
                if target == root or target.startswith(root.rstrip(os.sep) + os.sep):
                    target = self.dest + target[len(root) :]
                    break
        try:
            os.symlink(target, os.path.join(self.dest, rel))
        except OSError as exc:
            self.tally.skip(rel, "not_copied", f"symlink not recreated: {_why(exc)}")
            return
        self.links.append(rel)

    def settle_links(self) -> int:
        """Keep the links that resolve inside the copy, as relative links; drop the rest.

        Dropping one link can leave another dangling, so this repeats until
        nothing changes. Returns how many links were kept.
        """
        if not self.links:
            return 0
        dest_real = os.path.realpath(self.dest)
        pending = list(self.links)
        resolved: dict[str, str] = {}
        while True:
            resolved = {}
            dropped: list[tuple[str, str, str]] = []
            for rel in pending:
                path = os.path.join(self.dest, rel)
                try:
                    target = os.readlink(path)
                except OSError:  # replaced by a restored seed directory meanwhile
                    continue
                why = _judge_link(path, target, dest_real)
                if isinstance(why, tuple):
                    dropped.append((rel, *why))
                else:
                    resolved[rel] = why
            # All of one pass are dropped together, so each gets its own reason
            # (a loop's both links are a loop, not one loop and one dangling link).
            for rel, kind, reason in dropped:
                _unlink_quietly(os.path.join(self.dest, rel))
                self.tally.skip(rel, kind, reason)
            if not dropped:
                break
            pending = list(resolved)
        for rel, real in resolved.items():
            inside = os.path.relpath(real, dest_real)
            link = posixpath.relpath(inside, posixpath.dirname(rel) or ".")
            path = os.path.join(self.dest, rel)
            if os.readlink(path) != link:
                os.unlink(path)
                os.symlink(link, path)
        return len(resolved)


#: What the walk saw at a seed test file's path in the live repo.
_UNCHANGED = "unchanged"


class _TestFiles:
    """The test-file rules: the seed's test files are graded as the seed has them, whatever
    the agent did to them, and a test file the agent created is dropped.

    The walk hands every file :attr:`rule` protects to :meth:`claim`, which
    only looks (by descriptor) at how the agent changed it; :meth:`restore`
    then puts the seed's version in the copy and lists each change.
    """

    def __init__(self, seed: str, rule: ProtectRule, copy: _Copy, tally: _Tally) -> None:
        self.seed = seed
        self.rule = rule
        self.copy = copy
        self.tally = tally
        #: The seed's protected files: relative path -> whether it is a symlink.
        self.protected = _protected_seed_files(seed, rule)
        #: Seed test files found in the live repo: rel -> _UNCHANGED or how it changed.
        self.seen: dict[str, tuple[str, int | None]] = {}

    def claim(self, fd: int, name: str, rel: str) -> bool:
        """Whether the live non-directory ``rel`` (``name`` in ``fd``) is a test file, which
        is then never copied: the seed's comes back, an agent-created one is dropped."""
        if rel in self.protected:
            self.seen[rel] = self._compare(fd, name, rel, self.protected[rel])
            return True
        if not self.rule.protects(rel):
            return False
        self.tally.skip(
            rel,
            "test_created",
            f"new file that {self.rule.why(rel)}, created by the agent: dropped "
            "(tests come from the task's starting files)",
        )
        return True

    def _compare(self, fd: int, name: str, rel: str, seed_is_link: bool) -> tuple[str, int | None]:
        """How the live copy of a seed test file differs from the seed (read by descriptor)."""
        seed_path = os.path.join(self.seed, rel)
        if seed_is_link:
            try:
                live_target = os.readlink(name, dir_fd=fd)
            except OSError:
                return "replaced", None
            with contextlib.suppress(OSError):
                if live_target != os.readlink(seed_path):
                    return "link_changed", None
            return _UNCHANGED, None
        try:
            lf = os.open(name, READ_FLAGS, dir_fd=fd)
        except OSError:
            return "replaced", None  # a symlink (ELOOP), or unreadable: not the seed's file
        try:
            lst = os.fstat(lf)
            if not stat.S_ISREG(lst.st_mode):
                return "replaced", None
            try:
                sf = os.open(seed_path, READ_FLAGS)
            except OSError:
                return _UNCHANGED, None
            try:
                if os.fstat(sf).st_size == lst.st_size and same_content(lf, sf):
                    return _UNCHANGED, None
            except OSError:
                pass
            finally:
                os.close(sf)
            return "edited", lst.st_size
        finally:
            os.close(lf)

    def restore(self) -> None:
        """Put every seed test file in the copy (after the walk), listing what the agent did."""
        seed_real = ""  # resolved at the first link to restore (a system call per component)
        for rel in sorted(self.protected):
            self._note_tampering(rel)
            if not self._prepare_parents(rel):
                continue
            dst = os.path.join(self.copy.dest, rel)
            if os.path.lexists(dst):
                self.tally.skip(
                    rel,
                    "test_restored",
                    "directory in place of a test file from the seed: replaced",
                )
                remove_tree(Path(dst))
            src = os.path.join(self.seed, rel)
            if self.protected[rel]:
                try:
                    target = os.readlink(src)
                except OSError as exc:
                    self.tally.skip(rel, "not_copied", f"test file not restored: {_why(exc)}")
                    continue
                seed_real = seed_real or os.path.realpath(self.seed)
                self.copy.write_link(rel, target, (self.seed, seed_real))
            else:
                self.copy.copy_file(None, src, rel, None)

    def _note_tampering(self, rel: str) -> None:
        """Record whether the agent changed this seed test file (its version is not kept)."""
        how, size = self.seen.get(rel, ("deleted", None))
        if how == _UNCHANGED:
            return
        tally = self.tally
        tally.restored.append(rel)
        if how == "replaced":
            tally.skip(
                rel, "test_restored", "test file replaced by the agent: seed version restored"
            )
        elif how == "link_changed":
            tally.skip(
                rel,
                "test_restored",
                "test symlink changed by the agent: seed version restored",
            )
        elif how == "edited":
            tally.skip(
                rel,
                "test_restored",
                "test file edited by the agent: seed version restored",
                size,
            )
        elif not (tally.repo_missing or tally.repo_unreadable):  # else one entry says it all
            tally.skip(
                rel, "test_restored", "test file deleted by the agent: seed version restored"
            )

    def _prepare_parents(self, rel: str) -> bool:
        """Make every parent of ``rel`` in the copy a real directory (never a symlink)."""
        parts = rel.split(os.sep)[:-1]
        for i in range(len(parts)):
            sub = os.sep.join(parts[: i + 1])
            path = os.path.join(self.copy.dest, sub)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                self.tally.skip(rel, "not_copied", f"test file not restored: {_why(exc)}")
                return False
            if st is not None and stat.S_ISDIR(st.st_mode):
                continue
            try:
                if st is not None:
                    self.tally.skip(
                        sub,
                        "test_restored",
                        "replaced by the seed's directory holding test files",
                    )
                    os.unlink(path)
                os.mkdir(path, 0o755)
            except OSError as exc:
                self.tally.skip(rel, "not_copied", f"test file not restored: {_why(exc)}")
                return False
        return True


class _LiveWalk:
    """The agent's repo/ read by directory descriptor, each entry opened relative to its
    directory without following a link: no path in it is ever resolved again, so swapping
    one for a symlink mid-walk gets it listed, never followed."""

    def __init__(
        self, live: str, copy: _Copy, tests: _TestFiles, tally: _Tally, max_file_bytes: int
    ) -> None:
        self.live = live
        self.copy = copy
        self.tests = tests
        self.tally = tally
        self.max = max_file_bytes

    @functools.cached_property
    def live_roots(self) -> tuple[str, str]:
        """Where an absolute link target inside the live repo may point (both spellings).

        Worked out at the first symlink: most repos have none, and resolving a
        path costs a system call per component.
        """
        return (self.live, os.path.realpath(self.live))

    def run(self) -> None:
        root = self._open_root()
        if root is None:
            return
        try:
            walk_fd(root, self._visit, self._unreadable_dir)
        finally:
            os.close(root)

    def _open_root(self) -> int | None:
        """The live repo/ opened without following a link, or None (and why, listed)."""
        if self._workspace_unusable(None):
            return None
        try:
            return open_root(self.live)
        except OSError as exc:
            failure = exc
        tally = self.tally
        try:
            st = os.lstat(self.live)
        except OSError as exc:
            if not self._workspace_unusable(exc):
                tally.repo_missing = True
                tally.skip(
                    ".",
                    "repo_missing",
                    "repo/ missing: the agent deleted it; only the seed's test files remain",
                )
            return None
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            tally.repo_missing = True
            kind = "a symlink (not followed)" if stat.S_ISLNK(st.st_mode) else "not a directory"
            tally.skip(".", "repo_missing", f"repo/ is {kind}; only the seed's test files remain")
            return None
        tally.repo_unreadable = True
        tally.skip(
            ".",
            "repo_unreadable",
            f"repo/ unreadable ({_why(failure)}): the agent removed its permissions "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); only the seed's test files remain",
        )
        return None

    def _workspace_unusable(self, failure: OSError | None) -> bool:
        """Whether repo/'s parent (the workspace) keeps capture out; if so, list why.

        An agent may delete its whole workspace or ``chmod 000`` it rather
        than repo/ itself: the record then says that, not that repo/ was
        deleted. A workspace swapped for a symlink is not followed (repo/
        would be read from wherever it points). ``failure`` is why repo/
        itself could not be looked at, None before it was tried.
        """
        tally = self.tally
        workspace = os.path.dirname(self.live)
        try:
            st = os.lstat(workspace)
        except FileNotFoundError:
            tally.repo_missing = True
            tally.skip(
                ".",
                "repo_missing",
                "repo/ missing: the agent deleted its workspace (repo/'s parent directory); "
                "only the seed's test files remain",
            )
            return True
        except OSError as exc:
            if failure is None:
                return False  # repo/ may still open: the workspace's own parent is not ours
            st, failure = None, exc
        if st is not None and not stat.S_ISDIR(st.st_mode):
            tally.repo_missing = True
            kind = "a symlink (not followed)" if stat.S_ISLNK(st.st_mode) else "not a directory"
            tally.skip(
                ".",
                "repo_missing",
                f"repo/ missing: the agent replaced its workspace (repo/'s parent directory) "
                f"with {kind}; only the seed's test files remain",
            )
            return True
        if failure is None or failure.errno == errno.ENOENT:
            return False
        where = (
            f"its workspace (repo/'s parent directory, mode {stat.S_IMODE(st.st_mode):04o})"
            if st is not None
            else "a directory above its workspace"
        )
        tally.repo_unreadable = True
        tally.skip(
            ".",
            "repo_unreadable",
            f"repo/ unreadable ({_why(failure)}): the agent removed the permissions of {where}; "
            "only the seed's test files remain",
        )
        return True

    def _unreadable_dir(self, names: tuple[str, ...], exc: OSError) -> None:
        rel = os.path.join(*names) if names else ""
        if exc.errno in SWAPPED_ERRNOS or exc.errno == errno.ESTALE:
            self.tally.skip(
                rel, "changed", "directory replaced while capture read it: not followed"
            )
        else:
            self.tally.skip(rel, "unreadable", f"unreadable directory: {_why(exc)}")

    def _visit(self, names: tuple[str, ...], fd: int, entries: list[os.DirEntry[str]]) -> list[str]:
        rel_dir = os.path.join(*names) if names else ""
        children = []
        for entry in entries:
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            if self._copy_entry(fd, entry, rel):
                children.append(entry.name)
        return children

    def _copy_entry(self, fd: int, entry: os.DirEntry[str], rel: str) -> bool:
        """Copy one entry of the directory ``fd``; True when it is a directory to enter."""
        name = entry.name
        skip = self.tally.skip
        if is_noise_name(name):
            self.tally.noise += 1
            return False
        if name == SCORE_FILE_NAME:
            skip(
                rel,
                "score_json",
                "score.json is never captured: only the eval command writes a score",
            )
            return False
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            skip(rel, "unreadable", f"unreadable: {_why(exc)}")
            return False
        if not is_dir and self.tests.claim(fd, name, rel):
            return False
        if is_dir:
            try:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                os.mkdir(os.path.join(self.copy.dest, rel), (mode & 0o777) | 0o700)
            except OSError as exc:
                skip(rel, "not_copied", f"directory not copied: {_why(exc)}")
                return False
            return True
        if entry.is_symlink():
            try:
                target = os.readlink(name, dir_fd=fd)
            except OSError as exc:
                skip(rel, "unreadable", f"unreadable symlink: {_why(exc)}")
                return False
            self.copy.write_link(rel, target, self.live_roots)
        elif entry.is_file(follow_symlinks=False):
            self.copy.copy_file(fd, name, rel, self.max)
        else:
            try:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except OSError as exc:
                skip(rel, "unreadable", f"unreadable: {_why(exc)}")
                return False
            skip(rel, "special", f"special file ({_kind(mode)}): not captured")
        return False


def _judge_link(path: str, target: str, root_real: str) -> str | tuple[str, str]:
    """Where a link in dest resolves (inside ``root_real``), or ``(kind, reason)`` to drop it."""
    try:
        real = os.path.realpath(path, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink_loop", "symlink loop: not captured"
        if isinstance(exc, FileNotFoundError):
            return "symlink_dangling", "dangling symlink: not captured"
        return "unreadable", f"unreadable symlink: {_why(exc)}"
    if real != root_real and not real.startswith(root_real + os.sep):
        shown = display_path(target)
        return "symlink_outside", f"symlink to {shown} points outside repo/: not followed"
    return real


def _protected_seed_files(seed: str, rule: ProtectRule) -> dict[str, bool]:
    """The seed's files ``rule`` protects: relative path -> whether it is a symlink.

    No seed (a task without starting files) or an unreadable corner of it gives fewer entries.
    """
    found: dict[str, bool] = {}
    for rel, entry in walk_tree(seed, lambda name: is_noise_name(name) or name == SCORE_FILE_NAME):
        try:
            if rule.protects(rel) and (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                found[rel] = entry.is_symlink()
        except OSError:
            continue
    return found


def same_file_content(a: str, b: str, size_a: int, size_b: int) -> bool:
    """Whether two files (of the given sizes) of trees KSI wrote hold the same bytes."""
    if size_a != size_b:
        return False
    try:
        fa = os.open(a, READ_FLAGS)
    except OSError:
        return False
    try:
        fb = os.open(b, READ_FLAGS)
    except OSError:
        os.close(fa)
        return False
    try:
        return same_content(fa, fb)
    except OSError:
        return False
    finally:
        os.close(fa)
        os.close(fb)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "unknown type"


#: A full disk (or quota) is not a problem of one path: capture stops and raises it.
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def _why(exc: OSError) -> str:
    """Why one path was skipped, for its entry; a full disk is raised instead.

    A capture with files missing because the disk filled would be graded as
    if the agent had not written them, and past the listed 200 skips nobody
    would see why.
    """
    if exc.errno in _DISK_FULL_ERRNOS:
        raise exc
    return exc.strerror or str(exc)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)

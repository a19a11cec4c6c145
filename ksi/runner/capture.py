"""Capture: turn the live ``repo/`` an agent left behind into the tree that gets graded.

The evaluator never grades what the agent left in place (with the default
``--wipe-workspace-per-task true``): it grades a *captured copy*, built here
under rules the agent cannot bend:

* the whole final repo is copied, with no file-count cap;
* ``score.json`` files, ``*.pyc`` files and ``__pycache__`` directories are
  dropped (a score comes only from the eval command; bytecode is noise);
* every file whose *basename* contains ``test`` (any case) comes from the
  seed, never from the agent: restored if the agent edited or deleted it,
  dropped if the agent created it;
* symlinks are never followed: one that resolves inside the live repo is
  recreated as a relative symlink, anything else (outside, dangling, loop) is
  skipped;
* files over ``max_file_bytes``, special files (fifos, sockets, devices) and
  unreadable files or directories are skipped.

Nothing is lost silently: every skipped path is listed in
:attr:`CaptureReport.skipped` (journalled as the attempt's ``skipped_files``),
except ``.pyc``/``__pycache__`` noise, which is only counted.

Capture must survive any tree an agent can build (000 directories, deep
nesting, non-UTF-8 names, a 50 GB sparse file), so it walks iteratively with
:func:`os.scandir`, copies by streaming file descriptors (``sendfile``),
never reads a whole file into memory, and turns every ``OSError`` about one
path into a skipped entry instead of an exception.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from ksi.runner.models import SkippedFile

#: Files larger than this are not captured (10 MiB). Large enough for any
#: source file, lockfile or small fixture an agent writes; small enough that a
#: runaway log, core dump or downloaded model cannot fill the run directory,
#: which keeps one captured repo per attempt. Raise it per run when a task's
#: legitimate output is bigger.
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024

#: Directory names dropped wherever they appear (Python bytecode caches).
NOISE_DIR_NAMES = frozenset({"__pycache__"})
#: File suffixes dropped wherever they appear.
NOISE_SUFFIXES = (".pyc",)
#: Never captured: only the eval command may write a score.
SCORE_FILE_NAME = "score.json"

_CHUNK = 1024 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@attrs.frozen
class CaptureReport:
    """What :func:`capture_repo` did: counts, and every path it did not copy."""

    files_copied: int
    bytes_copied: int
    skipped: tuple[SkippedFile, ...]
    #: Symlinks recreated (as relative links) because they stay inside repo/.
    symlinks_kept: int = 0
    #: ``.pyc`` files and ``__pycache__`` directories dropped (not listed).
    noise_dropped: int = 0
    #: Test-named files the agent edited, replaced or deleted, put back from the seed.
    restored: tuple[str, ...] = ()
    #: The live repo/ was gone (or not a real directory) when capture ran.
    repo_missing: bool = False


def is_protected_name(name: str) -> bool:
    """Whether a file with this basename must come from the seed (``test`` in any case)."""
    return "test" in name.lower()


def is_noise_name(name: str) -> bool:
    """``__pycache__`` and ``*.pyc``: dropped everywhere without being listed."""
    return name in NOISE_DIR_NAMES or name.endswith(NOISE_SUFFIXES)


def walk_tree(
    root: str, skip: Callable[[str], bool] = is_noise_name
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(relative path, entry)`` for everything under ``root`` whose name ``skip`` allows.

    Only real directories are descended into (symlinks are never followed);
    a directory that cannot be read, and an entry whose type cannot be told,
    are passed over without a word (for read-only scans such as the seed's
    test files and the diff; capture itself reports what it could not copy).
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
) -> CaptureReport:
    """Copy ``live`` (the agent's repo/) into ``dest`` under the capture rules.

    ``seed`` is the task's pristine repo/ (the source of every test-named
    file). ``dest`` is replaced if it exists. Never raises for anything found
    in ``live``; raises ``OSError`` only if ``dest`` itself cannot be created.
    """
    if max_file_bytes < 0:
        raise ValueError(f"max_file_bytes must be >= 0, got {max_file_bytes}")
    return _Capture(Path(live), Path(seed), Path(dest), max_file_bytes).run()


class _Capture:
    def __init__(self, live: Path, seed: Path, dest: Path, max_file_bytes: int) -> None:
        self.live = os.path.abspath(live)
        self.seed = os.path.abspath(seed)
        self.dest = os.path.abspath(dest)
        self.max = max_file_bytes
        self.files = 0
        self.bytes = 0
        self.links = 0
        self.noise = 0
        self.skipped: list[SkippedFile] = []
        self.restored: list[str] = []
        self.repo_missing = False

    def skip(self, rel: str, reason: str, size: int | None = None) -> None:
        self.skipped.append(SkippedFile(display_path(rel or "."), reason, size))

    def run(self) -> CaptureReport:
        remove_tree(Path(self.dest))
        os.makedirs(os.path.dirname(self.dest), exist_ok=True)
        os.mkdir(self.dest)
        protected = _protected_seed_files(self.seed)
        if self._check_live_root():
            self._copy_live(protected)
        self._restore_protected(protected)
        return CaptureReport(
            files_copied=self.files,
            bytes_copied=self.bytes,
            skipped=tuple(sorted(self.skipped, key=lambda s: s.path)),
            symlinks_kept=self.links,
            noise_dropped=self.noise,
            restored=tuple(display_path(r) for r in self.restored),
            repo_missing=self.repo_missing,
        )

    def _check_live_root(self) -> bool:
        try:
            st = os.lstat(self.live)
        except OSError:
            self.repo_missing = True
            self.skip(".", "repo/ missing: the agent deleted it; only the seed's test files remain")
            return False
        if stat.S_ISDIR(st.st_mode):
            return True
        self.repo_missing = True
        kind = "a symlink (not followed)" if stat.S_ISLNK(st.st_mode) else "not a directory"
        self.skip(".", f"repo/ is {kind}; only the seed's test files remain")
        return False

    # -- the agent's tree ---------------------------------------------------

    def _copy_live(self, protected: dict[str, bool]) -> None:
        live_real = os.path.realpath(self.live)
        stack = [""]
        while stack:
            rel_dir = stack.pop()
            try:
                with os.scandir(os.path.join(self.live, rel_dir)) as it:
                    entries = list(it)
            except OSError as exc:
                self.skip(rel_dir, f"unreadable directory: {_why(exc)}")
                continue
            for entry in entries:
                rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
                self._copy_entry(entry, rel, protected, live_real, stack)

    def _copy_entry(
        self,
        entry: os.DirEntry[str],
        rel: str,
        protected: dict[str, bool],
        live_real: str,
        stack: list[str],
    ) -> None:
        name = entry.name
        if is_noise_name(name):
            self.noise += 1
            return
        if name == SCORE_FILE_NAME:
            self.skip(rel, "score.json is never captured: only the eval command writes a score")
            return
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            self.skip(rel, f"unreadable: {_why(exc)}")
            return
        if not is_dir and is_protected_name(name):
            # Restored from the seed afterwards; only agent-created ones are news.
            if rel not in protected:
                self.skip(
                    rel, "test-named file created by the agent: dropped (tests come from the seed)"
                )
            return
        dst = os.path.join(self.dest, rel)
        if is_dir:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
                os.mkdir(dst, (mode & 0o777) | 0o700)
            except OSError as exc:
                self.skip(rel, f"directory not copied: {_why(exc)}")
                return
            stack.append(rel)
        elif entry.is_symlink():
            self._copy_symlink(entry.path, rel, live_real)
        elif entry.is_file(follow_symlinks=False):
            self._copy_file(entry.path, dst, rel, self.max)
        else:
            self._skip_special(entry.path, rel)

    def _copy_symlink(self, path: str, rel: str, root_real: str) -> None:
        try:
            target = os.readlink(path)
            resolved = os.path.realpath(path, strict=True)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.skip(rel, "symlink loop: not captured")
            elif isinstance(exc, FileNotFoundError):
                self.skip(rel, "dangling symlink: not captured")
            else:
                self.skip(rel, f"unreadable symlink: {_why(exc)}")
            return
        if resolved != root_real and not resolved.startswith(root_real + os.sep):
            shown = display_path(target)
            self.skip(rel, f"symlink to {shown} points outside repo/: not followed")
            return
        inside = os.path.relpath(resolved, root_real)
        link = posixpath.relpath(inside, posixpath.dirname(rel) or ".")
        try:
            os.symlink(link, os.path.join(self.dest, rel))
        except OSError as exc:
            self.skip(rel, f"symlink not recreated: {_why(exc)}")
            return
        self.links += 1

    def _skip_special(self, path: str, rel: str) -> None:
        try:
            mode = os.lstat(path).st_mode
        except OSError as exc:
            self.skip(rel, f"unreadable: {_why(exc)}")
            return
        self.skip(rel, f"special file ({_kind(mode)}): not captured")

    def _copy_file(self, src: str, dst: str, rel: str, limit: int | None) -> bool:
        """Stream one regular file; ``limit=None`` for trusted seed files."""
        try:
            fd = os.open(src, _READ_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a symlink since the scan
                self.skip(rel, "symlink: not followed")
            else:
                self.skip(rel, f"unreadable file: {_why(exc)}")
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.skip(rel, f"special file ({_kind(st.st_mode)}): not captured")
                return False
            if limit is not None and st.st_size > limit:
                self.skip(rel, f"larger than the {limit}-byte capture limit", st.st_size)
                return False
            try:
                out = os.open(dst, _WRITE_FLAGS, 0o600)
            except OSError as exc:
                self.skip(rel, f"copy not written: {_why(exc)}")
                return False
            try:
                copied = _stream(fd, out, limit)
                os.fchmod(out, (st.st_mode & 0o777) | 0o600)
            except OSError as exc:
                os.close(out)
                _unlink_quietly(dst)
                self.skip(rel, f"read failed: {_why(exc)}")
                return False
            os.close(out)
            if copied is None:  # grew past the limit while being copied
                _unlink_quietly(dst)
                self.skip(rel, f"larger than the {limit}-byte capture limit", st.st_size)
                return False
        finally:
            os.close(fd)
        self.files += 1
        self.bytes += copied
        return True

    # -- the seed's test files ----------------------------------------------

    def _restore_protected(self, protected: dict[str, bool]) -> None:
        seed_real = os.path.realpath(self.seed)
        for rel in sorted(protected):
            self._note_tampering(rel)
            if not self._prepare_parents(rel):
                continue
            dst = os.path.join(self.dest, rel)
            if os.path.lexists(dst):
                self.skip(rel, "directory in place of a test file from the seed: replaced")
                remove_tree(Path(dst))
            src = os.path.join(self.seed, rel)
            if protected[rel]:
                self._copy_symlink(src, rel, seed_real)
            else:
                self._copy_file(src, dst, rel, None)

    def _note_tampering(self, rel: str) -> None:
        """Record whether the agent changed this seed test file (its version is not kept)."""
        if self.repo_missing:
            self.restored.append(rel)
            return
        live = os.path.join(self.live, rel)
        seed = os.path.join(self.seed, rel)
        try:
            lst = os.lstat(live)
        except OSError:
            self.restored.append(rel)  # deleted by the agent
            return
        try:
            sst = os.lstat(seed)
        except OSError:
            return
        if stat.S_IFMT(lst.st_mode) != stat.S_IFMT(sst.st_mode):
            self.restored.append(rel)
            self.skip(rel, "test-named file replaced by the agent: seed version restored")
        elif stat.S_ISLNK(lst.st_mode):
            with contextlib.suppress(OSError):
                if os.readlink(live) != os.readlink(seed):
                    self.restored.append(rel)
                    self.skip(rel, "test-named symlink changed by the agent: seed version restored")
        elif not same_file_content(live, seed, lst.st_size, sst.st_size):
            self.restored.append(rel)
            self.skip(
                rel, "test-named file edited by the agent: seed version restored", lst.st_size
            )

    def _prepare_parents(self, rel: str) -> bool:
        """Make every parent of ``rel`` in dest a real directory (never a symlink)."""
        parts = rel.split(os.sep)[:-1]
        for i in range(len(parts)):
            sub = os.sep.join(parts[: i + 1])
            path = os.path.join(self.dest, sub)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                self.skip(rel, f"test file not restored: {_why(exc)}")
                return False
            if st is not None and stat.S_ISDIR(st.st_mode):
                continue
            try:
                if st is not None:
                    self.skip(sub, "replaced by the seed's directory holding test files")
                    os.unlink(path)
                os.mkdir(path, 0o755)
            except OSError as exc:
                self.skip(rel, f"test file not restored: {_why(exc)}")
                return False
        return True


def _protected_seed_files(seed: str) -> dict[str, bool]:
    """Test-named files of the seed: relative path -> whether it is a symlink.

    No seed (a task without starting files) or an unreadable corner of it gives fewer entries.
    """
    found: dict[str, bool] = {}
    for rel, entry in walk_tree(seed, lambda name: is_noise_name(name) or name == SCORE_FILE_NAME):
        try:
            if is_protected_name(entry.name) and (
                entry.is_symlink() or entry.is_file(follow_symlinks=False)
            ):
                found[rel] = entry.is_symlink()
        except OSError:
            continue
    return found


def _stream(src: int, dst: int, limit: int | None) -> int | None:
    """Copy ``src`` to ``dst`` in chunks; ``None`` if more than ``limit`` bytes came."""
    total = 0
    use_sendfile = True
    while True:
        want = _CHUNK if limit is None else min(_CHUNK, limit + 1 - total)
        if want <= 0:
            return None
        if use_sendfile:
            try:
                n = os.sendfile(dst, src, total, want)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP) or total:
                    raise
                use_sendfile = False
                continue
        else:
            data = os.read(src, want)
            n = len(data)
            view = memoryview(data)
            while view:
                view = view[os.write(dst, view) :]
        if n == 0:
            return total
        total += n
        if limit is not None and total > limit:
            return None


def same_file_content(a: str, b: str, size_a: int, size_b: int) -> bool:
    """Whether two files (of the given sizes) hold the same bytes, compared in chunks."""
    if size_a != size_b:
        return False
    try:
        fa = os.open(a, _READ_FLAGS)
    except OSError:
        return False
    try:
        fb = os.open(b, _READ_FLAGS)
    except OSError:
        os.close(fa)
        return False
    try:
        while True:
            da = os.read(fa, _CHUNK)
            db = os.read(fb, _CHUNK)
            if da != db:
                return False
            if not da:
                return True
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


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a tree KSI made (a seed, a captured repo) to a new ``dst``.

    Symlinks are copied as links, permission bits are kept; timestamps and
    extended attributes are not, since nothing graded depends on them. It
    runs twice per attempt, so it is lean: one ``scandir`` per directory and
    each file streamed with ``sendfile`` (``shutil.copytree`` makes about
    three times the system calls).
    """
    os.mkdir(dst)
    stack = [(os.fspath(src), os.fspath(dst))]
    while stack:
        src_dir, dst_dir = stack.pop()
        with os.scandir(src_dir) as entries:
            for entry in entries:
                target = os.path.join(dst_dir, entry.name)
                if entry.is_symlink():
                    os.symlink(os.readlink(entry.path), target)
                elif entry.is_dir():
                    os.mkdir(target)
                    stack.append((entry.path, target))
                elif entry.is_file():
                    _copy_regular_file(entry.path, target)


def _copy_regular_file(src: str, dst: str) -> None:
    fd = os.open(src, _READ_FLAGS)
    try:
        mode = os.fstat(fd).st_mode & 0o777
        out = os.open(dst, _WRITE_FLAGS, 0o600)
        try:
            _stream(fd, out, None)
            os.fchmod(out, mode)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete ``path`` whatever the agent did to it: 000 directories, deep nesting.

    A missing path is fine. Symlinks are removed, never followed. Used for
    capture's destination and fit for wiping a live workspace.
    """
    p = os.fspath(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(p)
        return
    try:
        shutil.rmtree(p)
        return
    except (OSError, RecursionError):
        pass
    _make_traversable(p)
    try:
        shutil.rmtree(p)
    except (OSError, RecursionError):
        # Deeper than Python's recursion limit: GNU rm walks any depth.
        subprocess.run(["rm", "-rf", "--", p], check=False, capture_output=True)
    if os.path.lexists(p):
        raise OSError(errno.ENOTEMPTY, "could not remove directory tree", p)


def _make_traversable(top: str) -> None:
    """Give the owner rwx on every directory under ``top`` so it can be emptied."""
    stack = [top]
    while stack:
        d = stack.pop()
        with contextlib.suppress(OSError):
            os.chmod(d, 0o700)
        try:
            with os.scandir(d) as it:
                stack.extend(e.path for e in it if e.is_dir(follow_symlinks=False))
        except OSError:
            continue

"""Walking, copying and removing directory trees without following a path anyone could swap.

An agent's ``repo/`` is hostile ground: while KSI reads it, a process the
agent left behind could swap a directory for a symlink to a host directory
(``rename``/``renameat2(RENAME_EXCHANGE)``), and any code that joins path
strings and opens the result would read the host file. So every tree KSI
reads is walked by **directory file descriptor**: the root and each
directory below it are opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to
their parent's descriptor, files with ``O_NOFOLLOW`` relative to theirs, and
a name is never resolved again from a path string. A swap during the walk
can only make an entry fail to open (it is then reported or skipped), never
redirect the walk outside the tree.

Open descriptors stay few however deep the tree: :class:`Descent` keeps
about ``32 + log2(depth)`` open and re-opens the others by name when the
walk climbs back, checking that each is still the directory it opened.

This module sits at the bottom layer (no KSI imports), so tasks (seeding),
the runner (capture, grading copies) and environments (``copy_in``,
``copy_out``) share one :func:`copy_tree` with one set of rules.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

#: Opening a directory of the tree: never through a symlink, never anything but a directory.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Opening a file to read: never through a symlink; a fifo does not block the open.
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Creating a copy: a new file only, never written through a link already there.
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: Errors that mean "this name is a symlink or no longer what the listing said".
SWAPPED_ERRNOS = frozenset({errno.ELOOP, errno.ENOTDIR})

_CHUNK = 1024 * 1024
#: Every level up to this depth keeps its descriptor open.
_DENSE_DEPTH = 16
#: So do the deepest levels of the current path...
_WINDOW = 16


def _always_kept(depth: int) -> bool:
    """...and the levels at powers of two: about ``32 + log2(depth)`` descriptors in all."""
    return depth <= _DENSE_DEPTH or depth & (depth - 1) == 0


class Descent:
    """Descriptors of the directories along one path below a root descriptor.

    :meth:`open` gives a descriptor for ``root/names...`` reached one
    ``O_NOFOLLOW | O_DIRECTORY`` step at a time from the deepest directory
    still open on the way. Consecutive calls of a depth-first walk share
    their prefix, so most calls open one directory. A directory re-opened by
    name (its level was not kept open) must be the same inode as when it was
    first opened, else ``ESTALE``: it was moved while the walk ran.
    """

    def __init__(self, root_fd: int) -> None:
        self._root = root_fd
        self._names: list[str] = []
        self._fds: list[int | None] = []
        self._ids: list[tuple[int, int]] = []

    def open(self, names: Sequence[str]) -> int:
        """A new descriptor (the caller closes it) for the directory ``names`` below the root."""
        k = 0
        while k < min(len(self._names), len(names)) and self._names[k] == names[k]:
            k += 1
        self._truncate(k)
        base_depth = max((i + 1 for i, fd in enumerate(self._fds) if fd is not None), default=0)
        fd = self._root if base_depth == 0 else self._fds[base_depth - 1]
        assert fd is not None
        temp: int | None = None
        try:
            for depth in range(base_depth + 1, len(names) + 1):
                new = os.open(names[depth - 1], DIR_FLAGS, dir_fd=fd)
                if temp is not None:
                    os.close(temp)
                    temp = None
                st = os.fstat(new)
                ident = (st.st_dev, st.st_ino)
                if depth <= len(self._names):  # a level not kept open: the same directory?
                    temp = new
                    if ident != self._ids[depth - 1]:
                        raise OSError(errno.ESTALE, "directory moved while it was read")
                else:
                    self._names.append(names[depth - 1])
                    self._fds.append(new)
                    self._ids.append(ident)
                    self._leave_window(depth - _WINDOW)
                fd = new
            return os.dup(fd)
        finally:
            if temp is not None:
                os.close(temp)

    def _leave_window(self, depth: int) -> None:
        """Close the level ``depth`` (it left the window) unless it is always kept."""
        if depth >= 1 and not _always_kept(depth):
            fd = self._fds[depth - 1]
            if fd is not None:
                os.close(fd)
                self._fds[depth - 1] = None

    def _truncate(self, k: int) -> None:
        for fd in self._fds[k:]:
            if fd is not None:
                os.close(fd)
        del self._names[k:], self._fds[k:], self._ids[k:]

    def close(self) -> None:
        """Close every descriptor held (not the root's, which the caller owns)."""
        self._truncate(0)


#: ``visit(names, dir_fd, entries)`` -> names of the subdirectories to descend into.
Visit = Callable[[tuple[str, ...], int, list[os.DirEntry[str]]], Sequence[str]]
#: ``unreadable(names, error)``: a directory of the tree could not be opened or listed.
Unreadable = Callable[[tuple[str, ...], OSError], None]


def walk_fd(root_fd: int, visit: Visit, unreadable: Unreadable) -> None:
    """Depth-first over the tree below ``root_fd``, one ``scandir`` per directory.

    ``visit`` gets each directory's names from the root, a descriptor valid
    during the call (use it as ``dir_fd=``), and its entries; it returns the
    subdirectories to enter (entering opens them with ``O_NOFOLLOW``, so a
    name that became a symlink is reported to ``unreadable``, not followed).
    Iterative: any depth, bounded memory per level.
    """
    descent = Descent(root_fd)
    stack: list[tuple[str, ...]] = [()]
    try:
        while stack:
            names = stack.pop()
            try:
                fd = descent.open(names)
            except OSError as exc:
                unreadable(names, exc)
                continue
            try:
                try:
                    with os.scandir(fd) as it:
                        entries = list(it)
                except OSError as exc:
                    unreadable(names, exc)
                    continue
                children = visit(names, fd, entries)
            finally:
                os.close(fd)
            stack.extend((*names, child) for child in reversed(children))
    finally:
        descent.close()


def open_root(path: Path | str) -> int:
    """A descriptor for the tree's root directory, refusing a symlink in its place."""
    return os.open(os.fspath(path), DIR_FLAGS)


def stream(src: int, dst: int, limit: int | None = None) -> int | None:
    """Copy ``src`` to ``dst`` (``sendfile``, else read/write); ``None`` past ``limit`` bytes."""
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


def same_content(fa: int, fb: int) -> bool:
    """Whether two open files hold the same bytes (read from the start, in chunks)."""
    offset = 0
    while True:
        da = os.pread(fa, _CHUNK, offset)
        db = os.pread(fb, _CHUNK, offset)
        if da != db:
            return False
        if not da:
            return True
        offset += len(da)


def copy_tree(src: Path, dst: Path, *, merge: bool = False) -> None:
    """Copy the tree ``src`` to ``dst``: the one tree copy of KSI, with one set of rules.

    * symlinks are copied as links (their target text), never followed;
    * fifos, sockets and devices are skipped (reading a fifo would hang);
    * files keep their permission bits; directories are created writable
      (timestamps and extended attributes are not kept: nothing graded
      depends on them);
    * both trees are walked by directory descriptor (:func:`walk_fd`): a
      tree being changed while it is copied cannot make the copy read from,
      or write to, anywhere outside it (a destination directory turned into
      a symlink fails the copy).

    ``dst`` must not exist, unless ``merge``: then it may be a directory,
    and whatever is in the way of a copied entry is replaced (never written
    through). Each file is streamed with ``sendfile``: a third of the system
    calls of ``shutil.copytree``. Raises ``OSError`` on the first failure.
    """
    root = open_root(src)
    try:
        dst_path = os.fspath(dst)
        if not (merge and _is_real_dir(dst_path)):
            os.mkdir(dst_path)
        out_root = open_root(dst_path)
        out = Descent(out_root)

        def visit(names: tuple[str, ...], fd: int, entries: list[os.DirEntry[str]]) -> list[str]:
            children = []
            out_fd = out.open(names)
            try:
                for entry in entries:
                    name = entry.name
                    if entry.is_symlink():
                        link = os.readlink(name, dir_fd=fd)
                        if merge:
                            _clear_at(out_fd, name)
                        os.symlink(link, name, dir_fd=out_fd)
                    elif entry.is_dir(follow_symlinks=False):
                        if not (merge and _is_dir_at(out_fd, name)):
                            if merge:
                                _clear_at(out_fd, name)
                            os.mkdir(name, dir_fd=out_fd)
                        children.append(name)
                    elif entry.is_file(follow_symlinks=False):
                        if merge:
                            _clear_at(out_fd, name)
                        copy_file_at(fd, name, name, dst_dir_fd=out_fd)
            finally:
                os.close(out_fd)
            return children

        def unreadable(names: tuple[str, ...], exc: OSError) -> None:
            raise exc

        try:
            walk_fd(root, visit, unreadable)
        finally:
            out.close()
            os.close(out_root)
    finally:
        os.close(root)


def copy_file_at(dir_fd: int | None, name: str, dst: str, *, dst_dir_fd: int | None = None) -> bool:
    """Copy the regular file ``name`` (in ``dir_fd``) to a new ``dst`` (in ``dst_dir_fd``).

    The mode is kept. False (nothing written) when ``name`` turned out not to
    be a regular file.
    """
    fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        out = os.open(dst, WRITE_FLAGS, 0o600, dir_fd=dst_dir_fd)
        try:
            stream(fd, out)
            os.fchmod(out, st.st_mode & 0o7777)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return True


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_dir_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _clear_at(dir_fd: int, name: str) -> None:
    """Remove whatever is at ``name`` in ``dir_fd`` (a link is removed, never followed)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)  # descriptor-based: never follows a link
    else:
        os.unlink(name, dir_fd=dir_fd)


def remove_tree(path: Path) -> None:
    """Delete ``path`` whatever was done to it: 000 directories, deep nesting, symlinks.

    A missing path is fine. Symlinks are removed, never followed:
    ``shutil.rmtree`` walks by descriptor on Linux; directories it cannot
    enter are made traversable through descriptors too (never ``chmod`` on
    a path that could have become a link), and a tree deeper than Python's
    recursion limit goes to GNU ``rm -rf``, which walks any depth safely.
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
        subprocess.run(["rm", "-rf", "--", p], check=False, capture_output=True)
    if os.path.lexists(p):
        raise OSError(errno.ENOTEMPTY, "could not remove directory tree", p)


class _Trash:
    """Trees KSI is done with, deleted in the background: the thread that discards one
    pays a ``rename``, not a walk of the tree.

    A discarded tree leaves its place at once (renamed into a trash directory
    on the same filesystem: nothing can reach it by its old path), and a
    daemon thread deletes what gathered, every :data:`_TRASH_BATCH_SEC`, with
    one ``rm -rf`` (it holds no interpreter lock while it works, and runs on
    another core), then :func:`remove_tree` for anything ``rm`` left (a 000
    directory). :func:`empty_trash` waits for it (a batch waiting to gather is
    deleted at once: the run is ending) and removes the trash directory; a
    trash a killed KSI left is removed the same way.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: list[str] = []
        self._busy = False
        #: Someone waits for the trash to empty: no batch to gather for, delete now.
        self._hurry = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._count = itertools.count()

    def discard(self, path: str, trash: str) -> None:
        name = f"{os.getpid()}-{threading.get_ident()}-{next(self._count)}"
        try:
            os.rename(path, os.path.join(trash, name))
        except FileNotFoundError:
            try:
                os.mkdir(trash)
                os.rename(path, os.path.join(trash, name))
            except OSError:
                remove_tree(Path(path))  # gone, or not renamable here: the slow way
                return
        except OSError:
            remove_tree(Path(path))
            return
        with self._cond:
            if self._thread is None or self._pid != os.getpid():  # none yet, or forked
                self._pending, self._busy, self._pid = [], False, os.getpid()
                self._thread = threading.Thread(target=self._run, name="ksi-trash", daemon=True)
                self._thread.start()
            self._pending.append(os.path.join(trash, name))
            self._cond.notify_all()

    def wait(self) -> None:
        """Until everything discarded in this process so far is deleted."""
        with self._cond:
            if self._pid == os.getpid():
                self._hurry = True
                self._cond.notify_all()
                self._cond.wait_for(lambda: not self._pending and not self._busy)
                self._hurry = False

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending))
                # Let a batch gather (one rm for many trees), unless someone waits for it.
                self._cond.wait_for(lambda: self._hurry, timeout=_TRASH_BATCH_SEC)
                batch, self._pending, self._busy = self._pending, [], True
            try:
                _delete_all(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


#: How long the trash thread lets discarded trees gather before one ``rm -rf`` deletes them.
_TRASH_BATCH_SEC = 0.05
_TRASH = _Trash()


def _delete_all(paths: Sequence[str]) -> None:
    with contextlib.suppress(OSError):
        subprocess.run(
            ["rm", "-rf", "--", *paths],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    for path in paths:
        if os.path.lexists(path):
            with contextlib.suppress(OSError):
                remove_tree(Path(path))


def discard_tree(path: Path, trash: Path) -> None:
    """Delete the tree ``path`` in the background (see :class:`_Trash`): gone from ``path``
    when this returns. ``trash`` is a directory on the same filesystem (made if missing)."""
    _TRASH.discard(os.fspath(path), os.fspath(trash))


def empty_trash(trash: Path) -> None:
    """Wait until this process's discarded trees are deleted, then remove ``trash`` whole
    (what other processes, or a killed KSI, left in it too)."""
    _TRASH.wait()
    try:
        os.rmdir(trash)  # empty, as it is after a run alone: no ``rm`` to start
    except FileNotFoundError:
        pass
    except OSError:  # what others left in it, or not a directory
        _delete_all([os.fspath(trash)])


def _chmod_dir_at(dir_fd: int | None, name: str, mode: int) -> None:
    """``chmod`` the directory ``name`` itself: opened ``O_PATH | O_NOFOLLOW``, changed by fd."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


def _make_traversable(top: str) -> None:
    """Give the owner rwx on every directory under ``top`` so it can be emptied."""
    with contextlib.suppress(OSError):
        _chmod_dir_at(None, top, 0o700)
    try:
        root = open_root(top)
    except OSError:
        return

    def visit(names: tuple[str, ...], fd: int, entries: list[os.DirEntry[str]]) -> list[str]:
        children = []
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    _chmod_dir_at(fd, entry.name, 0o700)
                    children.append(entry.name)
        return children

    try:
        walk_fd(root, visit, lambda names, exc: None)
    finally:
        os.close(root)


def links_leaving(root: Path | str, *, skip_hidden: bool = False) -> list[tuple[str, str]]:
    """Every symlink below ``root`` that leads out of it: ``(path from root, link text)``.

    A task source reads its files by name (a prompt, a test, a reference
    solution) and the system follows links on the way, so a link out of the
    task's tree would put a host file into a prompt, a container or a run.
    Sources check their trees with this first and report each link found.
    "Leads out" is what the system would do: the link is resolved (chains of
    links, ``..``) against ``root`` resolved, and a dangling link whose
    target lies outside counts too. The walk itself follows no link.
    ``skip_hidden``: names starting with ``.`` are neither entered nor
    checked (for a source that ignores them).
    """
    top = os.path.realpath(root)
    found: list[tuple[str, str]] = []
    root_fd = open_root(top)

    def visit(names: tuple[str, ...], fd: int, entries: list[os.DirEntry[str]]) -> list[str]:
        children = []
        for entry in entries:
            if skip_hidden and entry.name.startswith("."):
                continue
            if entry.is_symlink():
                rel = "/".join((*names, entry.name))
                target = os.path.realpath(os.path.join(top, rel))
                if os.path.commonpath([top, target]) != top:
                    found.append((rel, os.readlink(entry.name, dir_fd=fd)))
            elif entry.is_dir(follow_symlinks=False):
                children.append(entry.name)
        return children

    try:
        walk_fd(root_fd, visit, lambda names, exc: None)
    finally:
        os.close(root_fd)
    return sorted(found)


def _parts_inside(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts:
        raise OSError(errno.EINVAL, "not a path inside the directory", rel)
    return parts


def open_dir_inside(root: Path | str, rel: str) -> int:
    """A descriptor for the directory ``rel`` below ``root``, reached through no symlink.

    For readers of a tree someone else wrote (a run directory, logs copied
    out of a container): each directory on the way is opened with
    ``O_NOFOLLOW | O_DIRECTORY`` relative to the one before, so a link, an
    absolute ``rel`` or a ``..`` raises ``OSError`` instead of leading out.
    ``root`` itself must be a directory, not a link to one.
    """
    fd = open_root(root)
    try:
        for part in _parts_inside(rel):
            new = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = new
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file_inside(root: Path | str, rel: str) -> int:
    """A read descriptor for the regular file ``rel`` below ``root``, reached through no symlink.

    As :func:`open_dir_inside` for the directories on the way; the file is
    opened with ``O_NOFOLLOW | O_NONBLOCK`` (a fifo cannot block) and anything
    but a regular file raises ``OSError``.
    """
    parts = _parts_inside(rel)
    if not parts:
        raise OSError(errno.EISDIR, "names the directory itself", rel)
    dir_fd = open_dir_inside(root, "/".join(parts[:-1]))
    try:
        fd = os.open(parts[-1], READ_FLAGS, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", rel)
    return fd


def drop_links(root: Path | str) -> list[str]:
    """Remove every symlink, fifo, socket and device below ``root``; return their paths.

    For a tree copied out of an agent's reach (logs from a container): what
    is left holds only directories and regular files, so nobody who later
    reads it (a viewer, a person, a script) is led to a host file.
    """
    removed: list[str] = []
    root_fd = open_root(root)

    def visit(names: tuple[str, ...], fd: int, entries: list[os.DirEntry[str]]) -> list[str]:
        children = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                children.append(entry.name)
            elif entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
                removed.append("/".join((*names, entry.name)))
        return children

    try:
        walk_fd(root_fd, visit, lambda names, exc: None)
    finally:
        os.close(root_fd)
    return sorted(removed)

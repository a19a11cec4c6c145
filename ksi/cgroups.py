"""A cgroup (v2) per process tree: everything a process started, however it hid.

A process can leave its process group and session (``setsid``, ``setpgid``),
double-fork away from its parent and clear its environment (and with it the
``KSI_PROC_TAG`` :mod:`ksi.proc` looks for), but it cannot leave its cgroup
without write access to another one. So when KSI may create cgroups (root, or
a delegated cgroup v2 subtree it can write), every process tree
:func:`ksi.proc.run_process` starts gets a cgroup of its own, a child of KSI's
own cgroup, entered by the child before it runs the program; killing the tree
kills the whole cgroup (``cgroup.kill``, Linux 5.14+, else SIGKILL to every
member until none is left), and the cgroup is removed afterwards.

Where that is not possible (cgroup v1 only, a read-only or undelegated
``/sys/fs/cgroup``, not Linux), :func:`create` returns None and KSI finds a
tree by process group and tag as before.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import threading
import time
from pathlib import Path

import attrs

#: How long :meth:`Cgroup.remove` waits for killed members to be gone.
_EMPTY_WAIT_SEC = 5.0
_STEP_SEC = 0.01

_BASE: Path | None = None
_BASE_KNOWN = False
_BASE_LOCK = threading.Lock()


@attrs.frozen
class Cgroup:
    """One process tree's cgroup directory (``/sys/fs/cgroup/.../ksi-<tag>``)."""

    path: Path

    def enter_fd(self) -> int:
        """A descriptor on ``cgroup.procs``: a child writes ``0`` to it to join (see proc)."""
        return os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)

    def pids(self) -> list[int]:
        """Every process in this cgroup and the cgroups below it (nested KSI runs)."""
        found: list[int] = []
        for directory in self._tree():
            with contextlib.suppress(OSError, ValueError):
                found += [int(p) for p in (directory / "cgroup.procs").read_text().split()]
        return found

    def populated(self) -> bool:
        """False when no live process is left in the cgroup or below it (zombies do not count)."""
        try:
            fd = os.open(self.path / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
            try:
                events = os.read(fd, 4096).decode().split()
            finally:
                os.close(fd)
        except OSError:
            return bool(self.pids())
        return events[events.index("populated") + 1] != "0" if "populated" in events else True

    def kill(self) -> None:
        """SIGKILL every member: all at once (``cgroup.kill``), else each until none is left."""
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:  # before Linux 5.14: no cgroup.kill
            self.kill_each()

    def kill_each(self) -> None:
        """SIGKILL each member until none is left (where there is no ``cgroup.kill``)."""
        for _ in range(200):  # a member may fork between one read and the next
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(_STEP_SEC)

    def remove(self) -> bool:
        """Kill what is left, wait until empty, remove the cgroup (children first)."""
        try:
            self.path.rmdir()  # the usual case, an empty cgroup with no children: one call
            return True
        except FileNotFoundError:
            return True
        except OSError:
            pass  # EBUSY (members left) or ENOTEMPTY (cgroups below): the full way
        if self.populated():
            self.kill()
            deadline = time.monotonic() + _EMPTY_WAIT_SEC
            while self.populated() and time.monotonic() < deadline:
                time.sleep(_STEP_SEC)
        removed = True
        deadline = time.monotonic() + _EMPTY_WAIT_SEC
        for directory in reversed(self._tree()):
            while True:
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    # EBUSY: a killed member may still be exiting after "populated 0".
                    if exc.errno == errno.EBUSY and time.monotonic() < deadline:
                        time.sleep(_STEP_SEC)
                        continue
                    removed = False
                break
        return removed

    def _tree(self) -> list[Path]:
        """This cgroup and every cgroup below it, parents first."""
        out = [self.path]
        for root, dirs, _files in os.walk(self.path):
            out += [Path(root) / d for d in sorted(dirs)]
        return out


def _own_cgroup() -> Path | None:
    """KSI's own cgroup v2 directory, when cgroup v2 is mounted; None otherwise."""
    mount = None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    mount = left.split()[4]
                    break
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            own = next((ln[3:].strip() for ln in fh if ln.startswith("0::")), None)
    except OSError:
        return None
    if mount is None or own is None or own.endswith("(deleted)"):
        return None
    path = Path(mount) / own.lstrip("/")
    return path if path.is_dir() else None


def name_for(tag: str, label: str | None = None) -> str:
    """The cgroup name of the process tree ``tag``: ``ksi-<tag>``, or ``ksi-<label>-<tag>``.

    The label (a run id) lets :func:`find` gather a killed run's leftovers.
    """
    return f"ksi-{_safe(label)}-{tag}" if label else f"ksi-{tag}"


def _safe(label: str) -> str:
    """``label`` when it is a plain word, else a digest of it (no ``-``, ``/``, dots...)."""
    if re.fullmatch(r"[A-Za-z0-9_]{1,64}", label):
        return label
    import hashlib  # start-up: rarely needed, not imported with the CLI

    return hashlib.sha256(label.encode()).hexdigest()[:16]


def find(label: str) -> list[Cgroup]:
    """Every cgroup KSI made for process trees labelled ``label``, wherever in the hierarchy.

    A ``kill -9``'d KSI leaves its attempts' cgroups behind, with whatever was
    still running in them; a resume may start from another cgroup (another
    terminal's session), so the whole cgroup v2 hierarchy is searched.
    """
    own = _own_cgroup()
    if own is None:
        return []
    root = own
    while (root.parent / "cgroup.procs").exists() and root.parent != root:
        root = root.parent
    prefix = f"ksi-{_safe(label)}-"
    found = []
    for directory, dirs, _files in os.walk(root):
        for name in list(dirs):
            if name.startswith(prefix):
                found.append(Cgroup(Path(directory) / name))
                dirs.remove(name)  # removing it removes what is below
    return found


def create(name: str) -> Cgroup | None:
    """A new cgroup ``name`` under KSI's own, or None when KSI cannot create one here.

    The first failure is remembered: KSI then never tries again in this
    process (the answer does not change while it runs).
    """
    global _BASE, _BASE_KNOWN
    with _BASE_LOCK:
        if not _BASE_KNOWN:
            _BASE, _BASE_KNOWN = _own_cgroup(), True
        base = _BASE
    if base is None:
        return None
    path = base / name
    try:
        path.mkdir()
        if not os.access(path / "cgroup.procs", os.W_OK):
            path.rmdir()
            raise PermissionError(f"cannot write {path / 'cgroup.procs'}")
    except OSError:
        with _BASE_LOCK:
            _BASE = None
        return None
    return Cgroup(path)


def give_up() -> None:
    """Stop making cgroups in this process (a child could not join one)."""
    global _BASE, _BASE_KNOWN
    with _BASE_LOCK:
        _BASE, _BASE_KNOWN = None, True

"""Running a process tree to completion and leaving nothing behind.

Every process KSI starts (an agent on ``local``, an eval command) gets its own
session and process group, a unique tag in its environment (``KSI_PROC_TAG``)
and, where KSI can create cgroups (:mod:`ksi.cgroups`), a cgroup of its own.
When the main process exits or times out, KSI terminates the group, every
process still carrying the tag and every process in the cgroup; then it kills
whatever ignored the polite signal (the whole cgroup at once). The cgroup
catches everything, however it hid; without one, a process that both leaves
the process group and scrubs its environment can escape on ``local`` (the
``sandbox`` and ``docker`` environments use a PID namespace and cannot be
escaped that way).

Once the tree is dead, KSI reads what is left in the output pipes for at most
:data:`DRAIN_SEC`: an escaped process still holding them cannot make it wait.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

import attrs

from ksi import cgroups

TAG_VAR = "KSI_PROC_TAG"
#: Seconds between SIGTERM and SIGKILL.
KILL_GRACE_SEC = 2.0
#: How often a waiting process is checked for cancellation, in seconds.
_POLL_SEC = 0.1
_CHUNK = 64 * 1024
#: Linux's minimum pipe capacity (one page); smaller stdin is written without a thread.
_PIPE_SAFE_BYTES = 4096
#: The longest single ``poll`` KSI asks for; a longer wait is made of several.
_MAX_POLL_STEP_SEC = 3600.0
#: Once the tree is dead, how long the rest of its output is read before the pipes are closed.
DRAIN_SEC = 2.0


@attrs.frozen
class ProcResult:
    """How a process tree ended: a host run here, or an environment's ``exec``.

    One type for both (:data:`ksi.interfaces.ExecResult` is this class), so
    graders and agents read any process result the same way.
    """

    exit_code: int | None
    duration_sec: float
    timed_out: bool = False
    spawn_error: str | None = None
    #: Where the output went; a log exists only once its stream wrote something.
    stdout_path: str = ""
    stderr_path: str = ""
    #: True when a log reached its size cap and later output was discarded.
    output_truncated: bool = False
    #: Processes other than the main one that were still alive at the end and were killed.
    stragglers_killed: int = 0
    #: True when ``cancel`` was set before the process finished (it was killed).
    cancelled: bool = False


def new_tag() -> str:
    return uuid.uuid4().hex


# -- knowing cheaply that nothing was left behind ----------------------------------
#
# Scanning /proc for tagged processes costs a read per process on the machine,
# twice per attempt. KSI makes itself a child subreaper instead: when a process
# of an attempt exits, whatever it left running is re-parented to KSI (to its
# main thread), not to init. So once an attempt's main process is reaped,
# something of its tree is still alive only if KSI's main thread has a live
# child that is neither a main process it is waiting for, nor one in KSI's own
# session (every process run_process starts is in a session of its own, and no
# process can join KSI's). Only then is the full scan needed.
#
# Dead orphans are zombie children of KSI and must be reaped here, but never a
# child some other code will wait for (its ``wait()`` would report exit code 0).
# A child KSI forked itself starts in KSI's session and can leave it only by
# calling ``setsid``, which makes it a session leader; so a zombie outside
# KSI's session that is not a session leader was re-parented here and is
# ours. A zombie session leader may be another code's child and is left alone,
# unless kill_tree found it in the attempt's tree (killed it, or saw it as the
# unreaped child of a process it killed). The cost: a session leader an attempt
# left that exits by itself, unreaped, stays a zombie until KSI exits.

_PR_SET_CHILD_SUBREAPER = 36
_MAINS: set[int] = set()
_MAINS_LOCK = threading.Lock()
_SUBREAPER: bool | None = None


def _become_subreaper() -> bool:
    global _SUBREAPER
    if _SUBREAPER is None:
        try:
            # start-up: ctypes only where the kernel call is made
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _SUBREAPER = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 and os.path.exists(
                f"/proc/self/task/{os.getpid()}/children"
            )
        except (OSError, AttributeError):
            _SUBREAPER = False
    return _SUBREAPER


def _own_children() -> set[int]:
    """Children of KSI's main thread: where the kernel re-parents orphans of a subreaper.

    (Processes a worker thread spawns are that thread's children, but those
    are mains, registered and excluded anyway.)
    """
    try:  # os.open: a buffered file object costs four more system calls, twice per attempt
        fd = os.open(f"/proc/self/task/{os.getpid()}/children", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = b""
            while chunk := os.read(fd, 65536):
                data += chunk
        finally:
            os.close(fd)
        return {int(p) for p in data.split()}
    except (OSError, ValueError):
        return set()


def _foreign_orphans() -> list[int]:
    """Live children of KSI left by attempts (reaping the dead ones that are surely ours)."""
    my_sid = os.getsid(0)
    with _MAINS_LOCK:  # a main forked but not yet registered is not taken for an orphan
        candidates = _own_children() - _MAINS
    orphans = []
    for pid in candidates:
        try:
            sid = os.getsid(pid)
        except OSError:
            continue
        if sid == my_sid:
            continue  # started by other code in KSI's session (docker CLI...), not ours
        st = _stat(str(pid))
        if st is None:
            continue
        if st[0] in ("Z", "X"):
            if sid != pid:  # see above: a session leader may be another code's child
                _reap([pid])
            continue
        orphans.append(pid)
    return orphans


def _reap(pids: Iterable[int]) -> None:
    """Collect those of ``pids`` that are dead children of KSI, except registered mains."""
    with _MAINS_LOCK:  # a main is reaped by its own Popen, which then unregisters it
        for pid in set(pids) - _MAINS:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def _tree_is_gone(pgid: int, group: cgroups.Cgroup | None = None) -> bool:
    """True when it is certain that nothing of ``pgid``'s tree survives (main reaped)."""
    if group is not None and group.populated():
        return False  # one cheap read instead of a scan: something is left
    if not _SUBREAPER:
        return False
    try:
        os.killpg(pgid, 0)
        return False  # something (maybe a zombie) is still in the group: check properly
    except ProcessLookupError:
        pass
    except PermissionError:
        return False
    return not _foreign_orphans()


def _tags_of(environ: bytes, var: str = TAG_VAR) -> set[str]:
    """The tags in a raw ``/proc/<pid>/environ`` (``KSI_PROC_TAG=a,b``: nested KSI runs)."""
    prefix = var.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return set(entry[len(prefix) :].decode(errors="replace").split(","))
    return set()


def _stat(pid: str) -> tuple[str, int, int] | None:
    """``(state, ppid, pgrp)`` of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


def _scan(
    tag: str, pgid: int | None, var: str = TAG_VAR, group: cgroups.Cgroup | None = None
) -> tuple[list[int], list[int]]:
    """``(live, dead)``: live (non-zombie) processes carrying ``tag``, in group ``pgid`` or
    in cgroup ``group``, and the zombie children of those (KSI's to reap once their
    parent is killed)."""
    me = os.getpid()
    members = set(group.pids()) if group is not None else set()
    found = []
    zombies = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [], []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        st = _stat(entry)
        if st is None:
            continue
        if st[0] in ("Z", "X"):
            zombies.append((int(entry), st[1]))  # dead and only waiting to be reaped
            continue
        if (pgid is not None and st[2] == pgid) or int(entry) in members:
            found.append(int(entry))
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if tag in _tags_of(data, var):
            found.append(int(entry))
    live = set(found)
    return found, [pid for pid, parent in zombies if parent in live]


def _signal_all(
    pgid: int | None, tag: str, sig: int, var: str = TAG_VAR, group: cgroups.Cgroup | None = None
) -> tuple[list[int], list[int]]:
    """Signal the group, every tagged process and the cgroup's members; return
    :func:`_scan`'s ``(live, dead)``.

    The scan comes first so that processes the group signal kills are counted
    too. SIGKILL goes to the whole cgroup at once (none can fork away meanwhile).
    """
    pids, dead = _scan(tag, pgid, var, group)
    if group is not None and sig == signal.SIGKILL:
        group.kill()
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return pids, dead


def kill_tree(
    pgid: int | None,
    tag: str,
    grace: float = KILL_GRACE_SEC,
    reap: Callable[[], object] | None = None,
    exclude: int | None = None,
    tag_var: str = TAG_VAR,
    group: cgroups.Cgroup | None = None,
) -> int:
    """SIGTERM the group, tagged processes and the cgroup ``group``'s; after ``grace``,
    SIGKILL until none is left.

    Returns how many distinct processes were found alive (``exclude``, the
    main process, not counted). ``reap`` collects our own child once it dies,
    so that a zombie group leader does not look alive. SIGKILL is repeated
    because a process may fork between one scan of ``/proc`` and the next.
    What was killed, and the zombies those processes had not reaped, are
    re-parented to KSI (the subreaper) and reaped here: no other code waits
    for them.
    """
    alive, dead = _signal_all(pgid, tag, signal.SIGTERM, tag_var, group)
    seen, zombies = set(alive), set(dead)
    if seen:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if reap is not None:
                reap()
            alive, dead = _scan(tag, pgid, tag_var, group)
            seen.update(alive)
            zombies.update(dead)
            if not alive:
                break
            time.sleep(0.05)
        for _ in range(200):
            alive, dead = _signal_all(pgid, tag, signal.SIGKILL, tag_var, group)
            seen.update(alive)
            zombies.update(dead)
            if reap is not None:
                reap()
            if not alive:
                break
            time.sleep(0.01)
        _reap(seen | zombies)
    seen.discard(exclude if exclude is not None else -1)
    return len(seen)


class _LogPump:
    """Copies a process's output pipes into files up to a byte cap each, then keeps draining
    so the child never blocks.

    Driven by the thread that waits for the process (its poll watches the
    pipes and the process's pidfd together), so a short process costs no
    thread of its own; without pidfds a :class:`_PumpThread` drives it. The
    files are opened unbuffered by the caller, so a log can be followed while
    the process runs.
    """

    def __init__(self, pipes: Sequence[tuple[IO[bytes], _Log | None]], cap: int) -> None:
        self.pipes, self.cap = list(pipes), cap
        self.poller = select.poll()
        self._outs: dict[int, _Log | None] = {}
        self._written: dict[int, int] = {}
        self._cut: set[int] = set()
        for src, out in self.pipes:
            fd = src.fileno()
            self._outs[fd], self._written[fd] = out, 0
            self.poller.register(fd, select.POLLIN)

    @property
    def open(self) -> bool:
        """True while a pipe has not reached end of file."""
        return bool(self._outs)

    @property
    def truncated(self) -> bool:
        return bool(self._cut)

    def owns(self, fd: int) -> bool:
        return fd in self._outs

    def read(self, fd: int) -> None:
        """Copy what one ready pipe holds (one read), or note its end of file."""
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            self.poller.unregister(fd)
            del self._outs[fd]
            return
        out = self._outs[fd]
        if out is None:
            return
        room = self.cap - self._written[fd]
        if room <= 0:
            self._cut.add(fd)
            return
        if len(chunk) > room:
            self._cut.add(fd)
            chunk = chunk[:room]
        if not out.write(chunk):
            self._outs[fd] = None  # disk full or similar: keep draining, never block
            return
        self._written[fd] += len(chunk)

    def pump(self, timeout_sec: float) -> None:
        """Copy what is ready within ``timeout_sec``."""
        for fd, _event in self.poller.poll(timeout_sec * 1000):
            if self.owns(fd):
                self.read(fd)

    def drain(self, seconds: float) -> None:
        """Read what the dead tree left in the pipes, for at most ``seconds``.

        Normally the pipes end at once (end of file). A pipe still open after
        that is held by a process KSI could not find (no cgroup here): it is
        no longer read.
        """
        deadline = time.monotonic() + seconds
        while self.open:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.pump(min(left, _POLL_SEC))

    def close(self) -> None:
        """Close the pipes and the logs (a truncated log says so at its end)."""
        for src, out in self.pipes:
            if out is not None:
                if src.fileno() in self._cut:
                    out.write(f"\n[ksi: output truncated at {self.cap} bytes]\n".encode())
                out.close()
            src.close()


class _Log:
    """One output log, created at the first byte written to it.

    A process that prints nothing leaves no empty file behind: two inodes
    fewer per silent process, which on a disk is most of what a short
    process costs. Written unbuffered (one ``write`` per chunk read), so it
    can be followed while the process runs. A write that fails (a full
    disk) makes :meth:`write` return False and the log is written no more.
    """

    __slots__ = ("fd", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def write(self, data: bytes) -> bool:
        try:
            if self.fd is None:
                self.fd = os.open(self.path, _LOG_FLAGS, 0o666)
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _PumpThread(threading.Thread):
    """Drives a :class:`_LogPump` where the waiting thread cannot (no pidfd to poll)."""

    def __init__(self, pump: _LogPump) -> None:
        super().__init__(daemon=True)
        self.pump = pump
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while self.pump.open and not self._stop_event.is_set():
            self.pump.pump(_POLL_SEC)

    def finish(self, seconds: float) -> None:
        """Let it read for at most ``seconds`` more, then stop it."""
        self.join(timeout=seconds)
        self.stop()
        self.join(timeout=5)


def _feed(stdin: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        stdin.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        stdin.close()


_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


def _prepare_logs(paths: Sequence[Path | None]) -> list[_Log | None]:
    """A :class:`_Log` per path, with what an earlier process left there removed.

    A log is only created when output arrives, so a stale one (a regrade
    writing the same ``eval/`` logs) must go first. Its directory is made
    when missing, and must be writable: a log KSI cannot write is a spawn
    error before the process starts, not output lost later.
    """
    checked: set[Path] = set()
    logs: list[_Log | None] = []
    for path in paths:
        if path is None:
            logs.append(None)
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a directory there raises: it cannot be a log
        parent = path.parent
        if parent not in checked:
            if not os.access(parent, os.W_OK):
                parent.mkdir(parents=True, exist_ok=True)  # missing: made; else it raises
                if not os.access(parent, os.W_OK):
                    raise PermissionError(errno.EACCES, "log directory not writable", str(parent))
            checked.add(parent)
        logs.append(_Log(path))
    return logs


def _pidfd(proc: subprocess.Popen[bytes]) -> int | None:
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def _wait(
    proc: subprocess.Popen[bytes],
    timeout: float | None,
    cancel: threading.Event | None,
    pidfd: int,
    pump: _LogPump,
) -> str:
    """Wait for ``proc``, copying its output meanwhile: ``"exited"``, ``"timeout"`` or
    ``"cancelled"``.

    One poll watches the pidfd and the output pipes: the wait wakes the
    moment the process exits (``Popen.wait`` with a timeout polls with sleeps
    of up to 50 ms, most of the cost of a short process), and no thread is
    needed to copy the output.
    """
    pump.poller.register(pidfd, select.POLLIN)
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if cancel is not None and cancel.is_set():
                return "cancelled"
            step = _POLL_SEC if cancel is not None else None
            if deadline is not None:
                left = max(0.0, deadline - time.monotonic())
                step = min(left, _MAX_POLL_STEP_SEC) if step is None else min(step, left)
            exited = False
            for fd, _event in pump.poller.poll(None if step is None else step * 1000):
                if fd == pidfd:
                    exited = True
                elif pump.owns(fd):
                    pump.read(fd)
            if exited:
                proc.wait()
                return "exited"
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
    finally:
        pump.poller.unregister(pidfd)


def _wait_polling(
    proc: subprocess.Popen[bytes], timeout: float | None, cancel: threading.Event | None
) -> str:
    if cancel is None:
        try:
            proc.wait(timeout=timeout)  # sleeps of at most 50 ms: any length is safe
        except subprocess.TimeoutExpired:
            return "timeout"
        return "exited"
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if cancel.is_set():
            return "cancelled"
        step = _POLL_SEC if deadline is None else min(_POLL_SEC, deadline - time.monotonic())
        try:
            proc.wait(timeout=max(step, 0))
            return "exited"
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    stdout_path: Path | None,
    stderr_path: Path | None,
    stdin: str | bytes | None = None,
    log_cap_bytes: int = 10 * 1024 * 1024,
    tag: str | None = None,
    cancel: threading.Event | None = None,
    cgroup_label: str | None = None,
) -> ProcResult:
    """Run ``argv`` in its own session; when it ends, times out or is cancelled, kill its tree.

    ``cgroup_label`` (a run id) goes into the name of the tree's cgroup, so
    that :func:`ksi.cgroups.find` finds it when KSI was killed before removing it.

    The tag is appended to any ``KSI_PROC_TAG`` KSI itself runs under, so a
    KSI run started by an agent (or an eval command) stays findable by the
    outer run. A log file is created when the first output for it arrives (a
    process that prints nothing leaves none); its directory is made before the
    process starts, and a log directory that cannot be written is a spawn error.
    """
    tag = tag or new_tag()
    out_path, err_path = str(stdout_path or ""), str(stderr_path or "")
    inherited = [t for t in os.environ.get(TAG_VAR, "").split(",") if t]
    full_env = {**env, TAG_VAR: ",".join([*inherited, tag])}
    started = time.monotonic()
    if cancel is not None and cancel.is_set():
        return ProcResult(
            None,
            0.0,
            spawn_error="cancelled before start",
            cancelled=True,
            stdout_path=out_path,
            stderr_path=err_path,
        )
    _become_subreaper()
    group = cgroups.create(cgroups.name_for(tag, cgroup_label))
    try:
        logs = _prepare_logs([stdout_path, stderr_path])
        proc, group = _spawn(argv, cwd, full_env, stdin is not None, group)
    except OSError as exc:
        if group is not None:
            group.remove()
        return ProcResult(
            None,
            time.monotonic() - started,
            spawn_error=f"{type(exc).__name__}: {exc}",
            stdout_path=out_path,
            stderr_path=err_path,
        )
    pgid = proc.pid
    assert proc.stdout is not None and proc.stderr is not None
    pump = _LogPump([(proc.stdout, logs[0]), (proc.stderr, logs[1])], log_cap_bytes)
    pidfd = _pidfd(proc)
    thread = None
    if pidfd is None:
        thread = _PumpThread(pump)
        thread.start()
    if stdin is not None:
        assert proc.stdin is not None
        data = stdin.encode() if isinstance(stdin, str) else stdin
        if len(data) <= _PIPE_SAFE_BYTES:
            _feed(proc.stdin, data)  # fits in the pipe buffer: cannot block
        else:
            threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True).start()
    try:
        if pidfd is None:
            how = _wait_polling(proc, timeout, cancel)
        else:
            how = _wait(proc, timeout, cancel, pidfd, pump)
    except BaseException:
        kill_tree(pgid, tag, reap=proc.poll, group=group)
        proc.wait()
        _forget_main(proc.pid)
        if group is not None:
            group.remove()
        _end_pump(pump, thread, pidfd, 0.0)
        raise
    if how == "exited" and _tree_is_gone(pgid, group):
        stragglers = 0
    else:
        stragglers = kill_tree(pgid, tag, reap=proc.poll, exclude=proc.pid, group=group)
        _foreign_orphans()  # reap the tree's orphans that died by themselves (not scanned)
    proc.wait()
    _forget_main(proc.pid)
    if group is not None:
        group.remove()
    _end_pump(pump, thread, pidfd, DRAIN_SEC)
    return ProcResult(
        exit_code=proc.returncode if how == "exited" else None,
        duration_sec=time.monotonic() - started,
        timed_out=how == "timeout",
        output_truncated=pump.truncated,
        stragglers_killed=stragglers,
        cancelled=how == "cancelled",
        stdout_path=out_path,
        stderr_path=err_path,
    )


def _end_pump(pump: _LogPump, thread: _PumpThread | None, pidfd: int | None, drain: float) -> None:
    """Read what is left for at most ``drain`` seconds, then close the pipes and logs."""
    if thread is not None:
        thread.finish(drain)
    else:
        pump.drain(drain)
    if pidfd is not None:
        os.close(pidfd)
    pump.close()


def _spawn(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    stdin_pipe: bool,
    group: cgroups.Cgroup | None,
) -> tuple[subprocess.Popen[bytes], cgroups.Cgroup | None]:
    """Start the main process in a new session, inside ``group`` when there is one.

    The program never runs outside the cgroup: a tiny ``/bin/sh`` wrapper
    joins it (writes ``0``, "this process", to ``cgroup.procs``) and then
    runs the program with ``exec``, so Python keeps spawning with ``vfork`` (a
    ``preexec_fn`` would force a full ``fork`` of this large, threaded
    process: twice the cost of a short agent or eval command). Where the
    wrapper cannot join (first tried once per KSI process), the child joins
    between fork and exec instead; when that fails too, cgroups are given up
    for the rest of this KSI process, and the process is started without one.
    """
    if group is not None and _wrapper_joins(group):
        wrapped = _join_wrapper(group, argv, cwd, env)
        return _start_main(lambda: _popen(wrapped, cwd, env, stdin_pipe, None)), group
    enter_fd = None
    if group is not None:
        try:
            enter_fd = group.enter_fd()
        except OSError:
            cgroups.give_up()
            group.remove()
            group = None

    def popen() -> subprocess.Popen[bytes]:
        nonlocal group
        try:
            return _popen(argv, cwd, env, stdin_pipe, enter_fd)
        except subprocess.SubprocessError:  # only the preexec raises it: joining failed
            assert group is not None
            cgroups.give_up()
            group.remove()
            group = None
            return _popen(argv, cwd, env, stdin_pipe, None)

    try:
        proc = _start_main(popen)
    finally:
        if enter_fd is not None:
            os.close(enter_fd)
    return proc, group


def _start_main(popen: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Start a main process with ``popen`` and register it in :data:`_MAINS`.

    Orphans are looked for among the main thread's children (see
    :func:`_own_children`), so a main the main thread forks must be in
    ``_MAINS`` before any other thread looks: the lock is held across the
    spawn. A worker thread's child is that thread's, never in the main
    thread's list, so workers spawn without the lock (holding it across
    ``fork``/``exec`` made every spawn and every end-of-process check of one
    attempt queue behind the other attempts' spawns).
    """
    if threading.current_thread() is threading.main_thread():
        with _MAINS_LOCK:
            proc = popen()
            _MAINS.add(proc.pid)
        return proc
    proc = popen()
    with _MAINS_LOCK:
        _MAINS.add(proc.pid)
    return proc


_SHELL = "/bin/sh"
#: Join the cgroup (``$0`` is its ``cgroup.procs``), then become the program; the
#: program never starts when joining fails. ``sh`` adds ``PWD`` to the environment:
#: it is removed again, or set back to the caller's value (``$1``).
_JOIN_SCRIPT = 'echo 0 >"$0" && unset PWD && exec "$@"'
_JOIN_SCRIPT_PWD = 'echo 0 >"$0" && PWD=$1 && export PWD && shift && exec "$@"'
_WRAPPER_JOINS: bool | None = None
_WRAPPER_LOCK = threading.Lock()


def _wrapper_joins(group: cgroups.Cgroup) -> bool:
    """True when the shell wrapper can join a cgroup here (tried once per KSI process)."""
    global _WRAPPER_JOINS
    with _WRAPPER_LOCK:
        if _WRAPPER_JOINS is None:
            try:
                probe = subprocess.run(
                    [_SHELL, "-c", 'echo 0 >"$0"', str(group.path / "cgroup.procs")],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=10,
                    check=False,
                )
                _WRAPPER_JOINS = probe.returncode == 0
            except (OSError, subprocess.SubprocessError):
                _WRAPPER_JOINS = False
        return _WRAPPER_JOINS


def _join_wrapper(
    group: cgroups.Cgroup, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
) -> list[str]:
    """``argv`` behind the wrapper that joins ``group``, the program found as ``Popen`` would.

    The program is looked up here (``PATH`` of ``env``, relative to ``cwd``)
    so that a missing or non-executable program is a spawn error, as without
    the wrapper, not the shell's exit code 127.
    """
    procs = str(group.path / "cgroup.procs")
    if argv[0] == _SHELL and len(argv) >= 3 and argv[1] == "-c":
        return _join_in_script(procs, argv)
    program = _find_program(argv[0], cwd, env)
    if "PWD" in env:
        return [_SHELL, "-c", _JOIN_SCRIPT_PWD, procs, env["PWD"], program, *argv[1:]]
    return [_SHELL, "-c", _JOIN_SCRIPT, procs, program, *argv[1:]]


def _join_in_script(procs: str, argv: Sequence[str]) -> list[str]:
    """``/bin/sh -c SCRIPT [name args...]`` joining the cgroup itself: one ``exec``, not two.

    The join goes in front of the script, on its first line, so the script's
    lines keep their numbers and its first line is parsed with the join as
    one line, as it would be alone. Nothing of the script runs before the
    join, nor at all if it fails (``exit`` with the failed redirection's
    status, as the wrapper's ``&&`` does). The shell is the one the caller
    asked for, started with the caller's environment and arguments, so
    ``$0``, ``$@``, ``PWD`` and the process (the main one, reaped by KSI) are
    what they would be without a cgroup. Agents' and eval commands' shells
    (``command`` agent, ``command`` evaluator) all take this path.
    """
    quoted = "'" + procs.replace("'", "'\\''") + "'"
    return [_SHELL, "-c", f"echo 0 >{quoted} || exit; {argv[2]}", *argv[3:]]


def _find_program(name: str, cwd: Path, env: Mapping[str, str]) -> str:
    """The path ``exec`` would run for ``name``; FileNotFoundError or PermissionError if none."""
    if not name:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    if os.sep in name:
        candidates = [name]
    else:
        candidates = [os.path.join(d, name) for d in os.get_exec_path(dict(env))]
    denied = None
    for candidate in candidates:
        seen_from_child = os.path.join(cwd, candidate)
        if os.path.isfile(seen_from_child):
            if os.access(seen_from_child, os.X_OK):
                return candidate
            denied = candidate
    if denied is not None or (os.sep in name and os.path.exists(os.path.join(cwd, name))):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied or name)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def _popen(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdin_pipe: bool, enter_fd: int | None
) -> subprocess.Popen[bytes]:
    def join_cgroup() -> None:
        assert enter_fd is not None
        os.write(enter_fd, b"0")  # runs in the child, before exec

    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
        # A preexec_fn is unsafe with threads when it takes a lock another thread held at
        # fork time; this one makes a single system call.
        preexec_fn=join_cgroup if enter_fd is not None else None,
    )


def _forget_main(pid: int) -> None:
    with _MAINS_LOCK:
        _MAINS.discard(pid)


def read_tail(path: Path | str, limit: int = 4096) -> str:
    """The last ``limit`` bytes of a file as text (bad UTF-8 replaced)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""

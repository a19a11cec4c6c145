"""Running a process tree to completion and leaving nothing behind.

Every process KSI starts (an agent on ``local``, an eval command) gets its own
session and process group, and a unique tag in its environment
(``KSI_PROC_TAG``). When the main process exits or times out, KSI terminates
the group and every process still carrying the tag, which catches children
that called ``setsid`` or double-forked into another group; then it kills
whatever ignored the polite signal. A process that both leaves the session
and scrubs its environment can escape this on ``local``; the ``sandbox`` and
``docker`` environments use a PID namespace and cannot be escaped that way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import attrs

TAG_VAR = "KSI_PROC_TAG"
#: Seconds between SIGTERM and SIGKILL.
KILL_GRACE_SEC = 2.0
_CHUNK = 64 * 1024


@attrs.frozen
class ProcResult:
    exit_code: int | None
    duration_sec: float
    timed_out: bool = False
    spawn_error: str | None = None
    output_truncated: bool = False
    stragglers_killed: int = 0


def new_tag() -> str:
    return uuid.uuid4().hex


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment carries ``KSI_PROC_TAG=<tag>``."""
    needle = f"{TAG_VAR}={tag}".encode()
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if needle in data.split(b"\0"):
            found.append(pid)
    return found


def _signal_all(pgid: int | None, tag: str, sig: int) -> int:
    hit = 0
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
            hit += 1
    for pid in tagged_pids(tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            hit += 1
    return hit


def kill_tree(
    pgid: int | None,
    tag: str,
    grace: float = KILL_GRACE_SEC,
    reap: Callable[[], object] | None = None,
) -> int:
    """SIGTERM the group and tagged processes, wait up to ``grace``, then SIGKILL; count them.

    ``reap`` collects our own child once it dies, so that a zombie group
    leader does not look alive and make us wait out the grace period.
    """
    initial = len(tagged_pids(tag))
    if not _signal_all(pgid, tag, signal.SIGTERM):
        return 0
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not tagged_pids(tag) and not _group_alive(pgid):
            return initial
        time.sleep(0.05)
    _signal_all(pgid, tag, signal.SIGKILL)
    for _ in range(100):
        if not tagged_pids(tag):
            break
        time.sleep(0.02)
    return initial


def _group_alive(pgid: int | None) -> bool:
    if pgid is None:
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class _CappedCopier(threading.Thread):
    """Copies a pipe into a file up to a byte cap, then keeps draining so the child never blocks."""

    def __init__(self, src: IO[bytes], dest: Path | None, cap: int) -> None:
        super().__init__(daemon=True)
        self.src, self.dest, self.cap = src, dest, cap
        self.truncated = False

    def run(self) -> None:
        written = 0
        out = open(self.dest, "wb") if self.dest is not None else None  # noqa: SIM115
        try:
            while True:
                chunk = self.src.read1(_CHUNK) if hasattr(self.src, "read1") else self.src.read(_CHUNK)
                if not chunk:
                    break
                if out is None:
                    continue
                room = self.cap - written
                if room <= 0:
                    self.truncated = True
                    continue
                if len(chunk) > room:
                    self.truncated = True
                    chunk = chunk[:room]
                out.write(chunk)
                written += len(chunk)
        finally:
            if out is not None:
                if self.truncated:
                    out.write(f"\n[ksi: output truncated at {self.cap} bytes]\n".encode())
                out.close()
            self.src.close()


def _feed(stdin: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        stdin.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        stdin.close()


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
) -> ProcResult:
    """Run ``argv`` in its own session; on exit or timeout, kill every process it started."""
    tag = tag or new_tag()
    full_env = {**env, TAG_VAR: tag}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=full_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return ProcResult(
            None, time.monotonic() - started, spawn_error=f"{type(exc).__name__}: {exc}"
        )
    pgid = proc.pid
    assert proc.stdout is not None and proc.stderr is not None
    copiers = [
        _CappedCopier(proc.stdout, stdout_path, log_cap_bytes),
        _CappedCopier(proc.stderr, stderr_path, log_cap_bytes),
    ]
    for c in copiers:
        c.start()
    if stdin is not None:
        assert proc.stdin is not None
        data = stdin.encode() if isinstance(stdin, str) else stdin
        threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True).start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:
        kill_tree(pgid, tag, reap=proc.poll)
        proc.wait()
        raise
    stragglers = kill_tree(pgid, tag, reap=proc.poll)
    proc.wait()
    for c in copiers:
        c.join(timeout=5)
    return ProcResult(
        exit_code=None if timed_out else proc.returncode,
        duration_sec=time.monotonic() - started,
        timed_out=timed_out,
        output_truncated=any(c.truncated for c in copiers),
        stragglers_killed=stragglers,
    )


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

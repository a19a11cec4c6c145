"""Stopping running attempts on Ctrl-C, in whatever process they run.

An attempt registers every environment handle it starts on its
:class:`CancelToken`; tokens are grouped by the driver session that
submitted the job (``AttemptJob.session_id``) in a registry of this process.
:func:`cancel_session` stops every handle of the session at once and makes
every later :meth:`CancelToken.track` refuse, so an attempt that is still
starting never launches its agent after the kill.

The local executor calls :func:`cancel_session` directly (same process). An
executor whose jobs run elsewhere must make the same call in each process
that runs the session's jobs (a signal handler in a worker process, a Ray
actor method...): a killed worker process would leave the agents it started
running, since each runs in a session of its own.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Protocol

from ksi.errors import KsiError


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Cancelled(KsiError):
    """The driver is killing its attempts: what this one produced is not a result."""


class CancelToken:
    """The stoppable handles of one running attempt, and whether it was cancelled."""

    def __init__(self, cancelled: bool = False) -> None:
        self._lock = threading.Lock()
        self._cancelled = cancelled
        self._handles: dict[int, Stoppable] = {}

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def track(self, handle: Stoppable) -> None:
        """Make ``handle`` stoppable by a cancel; stop it and raise once cancelled."""
        with self._lock:
            if not self._cancelled:
                self._handles[id(handle)] = handle
                return
        with contextlib.suppress(Exception):
            handle.stop()
        raise Cancelled("the run was stopped while this attempt started")

    def untrack(self, handle: Stoppable) -> None:
        with self._lock:
            self._handles.pop(id(handle), None)

    def cancel(self) -> list[Stoppable]:
        """Mark cancelled; return the handles to stop (the caller stops them, in parallel)."""
        with self._lock:
            self._cancelled = True
            return list(self._handles.values())


class _Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tokens: dict[str, set[CancelToken]] = {}
        self.cancelled: set[str] = set()


_REGISTRY = _Registry()


def open_token(session_id: str) -> CancelToken:
    """A token for one attempt of ``session_id`` (already cancelled if the session is)."""
    with _REGISTRY.lock:
        token = CancelToken(cancelled=session_id in _REGISTRY.cancelled)
        _REGISTRY.tokens.setdefault(session_id, set()).add(token)
        return token


def close_token(session_id: str, token: CancelToken) -> None:
    with _REGISTRY.lock:
        tokens = _REGISTRY.tokens.get(session_id)
        if tokens is not None:
            tokens.discard(token)
            if not tokens:
                del _REGISTRY.tokens[session_id]


def cancel_session(session_id: str) -> None:
    """Stop every running attempt of ``session_id`` in this process, all at once.

    Each stop may wait out a grace period, so they run in parallel threads;
    returns when all are stopped. Attempts of the session that start later
    are refused (see :meth:`CancelToken.track`).
    """
    with _REGISTRY.lock:
        _REGISTRY.cancelled.add(session_id)
        tokens = list(_REGISTRY.tokens.get(session_id, ()))
    handles = [h for token in tokens for h in token.cancel()]

    def stop(handle: Stoppable) -> None:
        with contextlib.suppress(Exception):
            handle.stop()

    threads = [threading.Thread(target=stop, args=(h,), daemon=True) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def forget_session(session_id: str) -> None:
    """Drop what the registry holds about a finished session."""
    with _REGISTRY.lock:
        _REGISTRY.cancelled.discard(session_id)
        _REGISTRY.tokens.pop(session_id, None)


def cancel_all() -> None:
    """Stop every running attempt of this process, whatever its session.

    For a worker process told by its executor to stop (it may not know the
    session ids): call it from a thread, not from a signal handler, which
    may have interrupted a holder of the registry's lock.
    """
    with _REGISTRY.lock:
        sessions = list(_REGISTRY.tokens)
    for session_id in sessions:
        cancel_session(session_id)

"""Showing a run's progress: a rich bar on a terminal, plain periodic lines elsewhere.

"solved" counts *tasks* (the summary's ``solved: N/M``), including tasks a
resumed run had already solved, never attempts: the two numbers a user sees
during and after a run are the same measure.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from typing import Any, Protocol

from ksi.records import AttemptRecord


class Progress(Protocol):
    def start(
        self, total: int, already_done: int, solved_tasks: Iterable[str] = (), n_tasks: int = 0
    ) -> None: ...
    def attempt_started(self) -> None: ...
    def attempt_finished(self, record: AttemptRecord, solved: bool) -> None: ...
    def close(self) -> None: ...


class NullProgress:
    """For the Python API: nothing is printed."""

    def start(
        self, total: int, already_done: int, solved_tasks: Iterable[str] = (), n_tasks: int = 0
    ) -> None:
        pass

    def attempt_started(self) -> None:
        pass

    def attempt_finished(self, record: AttemptRecord, solved: bool) -> None:
        pass

    def close(self) -> None:
        pass


class _Counts:
    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        #: Tasks with an attempt at the solved threshold (the summary's "solved").
        self.solved_tasks: set[str] = set()
        self.n_tasks = 0
        self.running = 0
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.session_done = 0

    @property
    def solved(self) -> int:
        return len(self.solved_tasks)

    def _begin(self, total: int, done: int, solved: Iterable[str], n_tasks: int) -> None:
        self.total, self.done = total, done
        self.solved_tasks = set(solved)
        self.n_tasks = n_tasks

    def _finish(self, record: AttemptRecord, solved: bool) -> None:
        self.running -= 1
        self.done += 1
        self.session_done += 1
        if solved:
            self.solved_tasks.add(record.task_id)

    def solved_text(self) -> str:
        of = f"/{self.n_tasks}" if self.n_tasks else ""
        return f"{self.solved}{of} tasks solved"

    def eta(self) -> str:
        remaining = self.total - self.done
        if self.session_done == 0 or remaining <= 0:
            return "-"
        rate = (time.monotonic() - self.started) / self.session_done
        return _fmt_secs(rate * remaining)


def _fmt_secs(secs: float) -> str:
    secs = int(secs)
    return f"{secs // 3600}:{secs // 60 % 60:02d}:{secs % 60:02d}"


class PlainProgress(_Counts):
    """One line every ``interval`` seconds (and at the end): for logs and CI."""

    def __init__(self, interval: float = 10.0, stream: Any = None) -> None:
        super().__init__()
        self.interval = interval
        self.stream = stream or sys.stderr
        self._last = 0.0

    def start(
        self, total: int, already_done: int, solved_tasks: Iterable[str] = (), n_tasks: int = 0
    ) -> None:
        self._begin(total, already_done, solved_tasks, n_tasks)
        self._print()

    def grow(self, total: int, already_done: int) -> None:
        """Another generation's attempts join the count."""
        with self.lock:
            self.total += total
            self.done += already_done

    def attempt_started(self) -> None:
        with self.lock:
            self.running += 1

    def attempt_finished(self, record: AttemptRecord, solved: bool) -> None:
        with self.lock:
            self._finish(record, solved)
            if time.monotonic() - self._last >= self.interval:
                self._print()

    def _print(self) -> None:
        self._last = time.monotonic()
        print(
            f"[ksi] {self.done}/{self.total} attempts done, {self.solved_text()}, "
            f"{self.running} running, elapsed {_fmt_secs(time.monotonic() - self.started)}, "
            f"eta {self.eta()}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        self._print()


class RichProgress(_Counts):
    """A live bar: done/total, solved, running, elapsed, ETA."""

    def __init__(self) -> None:
        super().__init__()
        # heavy (start-up): rich, only for a terminal
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        # heavy (start-up): rich, only for a terminal
        from rich.progress import Progress as _RichProgress

        self._bar = _RichProgress(
            TextColumn("[bold]ksi run"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[solved]} · running {task.fields[running]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            transient=False,
        )
        self._task: Any = None

    def start(
        self, total: int, already_done: int, solved_tasks: Iterable[str] = (), n_tasks: int = 0
    ) -> None:
        self._begin(total, already_done, solved_tasks, n_tasks)
        self._bar.start()
        self._task = self._bar.add_task(
            "run", total=total, completed=already_done, solved=self.solved_text(), running=0
        )

    def grow(self, total: int, already_done: int) -> None:
        """Another generation's attempts join the bar."""
        with self.lock:
            self.total += total
            self.done += already_done
            self._bar.update(self._task, total=self.total, completed=self.done)

    def attempt_started(self) -> None:
        with self.lock:
            self.running += 1
            self._bar.update(self._task, running=self.running)

    def attempt_finished(self, record: AttemptRecord, solved: bool) -> None:
        with self.lock:
            self._finish(record, solved)
            self._bar.update(self._task, advance=1, solved=self.solved_text(), running=self.running)

    def close(self) -> None:
        self._bar.stop()

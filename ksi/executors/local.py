"""The ``local`` executor: attempts run in threads of this process.

Attempts spend their time waiting on child processes, so threads are enough.
Items are pulled from the iterable lazily and at most ``concurrency`` are in
flight at a time: a run of 10,000 tasks never holds 10,000 futures, and an
item the executor has not reached yet costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, ClassVar, TypeVar

import attrs

from ksi.hookspecs import Register, hookimpl

T = TypeVar("T")


@attrs.define
class LocalExecutor:
    """Runs callables in a bounded thread pool and yields results as they finish."""

    name: ClassVar[str] = "local"
    aliases: ClassVar[tuple[str, ...]] = ("threads",)
    description: ClassVar[str] = (
        "Runs attempts in threads of the ksi process on this machine, at most "
        "--concurrency at a time."
    )

    _active: set[threading.Event] = attrs.field(factory=set, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def map_unordered(
        self, fn: Callable[[T], Any], items: Iterable[T], concurrency: int
    ) -> Iterator[Any]:
        """Yield ``fn(item)`` for every item, in completion order.

        An exception raised by ``fn`` is re-raised here, after which no new
        item is started (the runner's ``fn`` is expected to catch its own
        errors). Closing the iterator early, or :meth:`shutdown`, also stops
        new work; items already running finish in their threads.
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        stop = threading.Event()
        with self._lock:
            self._active.add(stop)
        return self._run(fn, iter(items), concurrency, stop)

    def _run(
        self, fn: Callable[[T], Any], source: Iterator[T], concurrency: int, stop: threading.Event
    ) -> Iterator[Any]:
        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ksi-attempt")
        running: set[Future[Any]] = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(running) < concurrency and not stop.is_set():
                    try:
                        item = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    running.add(pool.submit(fn, item))
                if not running:
                    return
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
        finally:
            stop.set()
            with self._lock:
                self._active.discard(stop)
            pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Start no new item in any running map; results of running items are still yielded."""
        with self._lock:
            for stop in self._active:
                stop.set()


@hookimpl(trylast=True)
def ksi_register_executors(register: Register) -> None:
    register(LocalExecutor)

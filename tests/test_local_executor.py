"""The ``local`` executor: real threads, bounded concurrency, results as they finish."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ksi.executors.local import LocalExecutor
from ksi.plugins import registry


def test_attempts_really_run_in_parallel() -> None:
    """Two callables that each wait for the other can only finish if both run at once."""
    barrier = threading.Barrier(2, timeout=30)

    def meet(i: int) -> int:
        barrier.wait()  # raises BrokenBarrierError if the other never arrives
        return i

    assert sorted(LocalExecutor().map_unordered(meet, [1, 2], concurrency=2)) == [1, 2]


def test_concurrency_is_an_upper_bound() -> None:
    lock = threading.Lock()
    running = 0
    peak = 0

    def work(i: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        threading.Event().wait(0.01)
        with lock:
            running -= 1
        return i * i

    out = list(LocalExecutor().map_unordered(work, range(40), concurrency=3))
    assert sorted(out) == [i * i for i in range(40)]
    assert 1 <= peak <= 3


def _counting(n: int, pulled: list[int]) -> Iterator[int]:
    for i in range(n):
        pulled.append(i)
        yield i


def test_items_are_pulled_lazily_not_all_submitted() -> None:
    pulled: list[int] = []
    results = LocalExecutor().map_unordered(lambda i: i, _counting(10_000, pulled), concurrency=4)
    next(results)
    assert len(pulled) <= 4
    results.close()
    assert len(pulled) <= 5


def test_shutdown_stops_new_work_but_yields_running_results() -> None:
    pulled: list[int] = []
    release = threading.Event()
    executor = LocalExecutor()

    def work(i: int) -> int:
        if i > 0:
            release.wait(30)
        return i

    results = executor.map_unordered(work, _counting(1000, pulled), concurrency=3)
    first = next(results)  # item 0 finishes at once; items 1 and 2 are running
    assert first == 0
    executor.shutdown()
    release.set()
    rest = list(results)
    assert sorted(rest) == [1, 2]
    assert pulled == [0, 1, 2]


def test_an_exception_in_fn_is_raised_to_the_caller() -> None:
    def boom(i: int) -> int:
        if i == 2:
            raise RuntimeError("attempt 2 broke")
        return i

    with pytest.raises(RuntimeError, match="attempt 2 broke"):
        list(LocalExecutor().map_unordered(boom, range(5), concurrency=1))


def test_bad_concurrency_is_refused() -> None:
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        LocalExecutor().map_unordered(lambda i: i, [1], concurrency=0)


def test_local_executor_is_registered() -> None:
    assert registry("executor").get("local").obj is LocalExecutor

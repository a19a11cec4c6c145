"""Shared fixtures: a clean plugin state and cache directory for each test, the example paths.

Also how the suite shares the machine: it runs on pytest-xdist workers
(``-n auto --dist worksteal``, pyproject.toml), and the tests that start a
container, start bubblewrap or mount a filesystem never overlap
(:mod:`tests.host_mounts`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from atif_validator import HarborValidator, harbor_venv

from ksi.plugins import reset_plugins
from tests.host_mounts import pytest_runtest_protocol, touches_host_mounts

__all__ = ["pytest_runtest_protocol"]  # a hook: docker, sandbox and mounts tests take turns

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker more than the cores this process may use.

    A test spends much of its time waiting (on the processes, containers and
    timeouts it starts), so one worker per core leaves the cores idle part of the
    time; on 2 cores, 3 workers were clearly faster than 2, 4 no faster than 3.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    return len(os.sched_getaffinity(0)) + 1


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C's signal reaches the tests' processes even when pytest was started ignoring it.

    A shell without job control starts a background command (``pytest &`` in a
    script) with SIGINT ignored, and every process it starts inherits that: the
    tests of Ctrl-C (``ksi run`` stopping cleanly and saying how to resume)
    would then hang or fail. xdist's workers inherit the handler set here.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, the docker, sandbox and mounts tests first, in their order.

    worksteal gives the first worker the first slice of the collection: it runs
    them one after another while the others run the rest, so they seldom wait
    for :data:`tests.host_mounts.LOCK`. Without xdist the order stays the files' order.
    """
    if not hasattr(config, "workerinput"):
        return
    items.sort(key=lambda item: not touches_host_mounts(item))  # stable: order kept within


@pytest.fixture(autouse=True)
def _own_cache_dir(ksi_cache_dir: Path) -> None:
    """KSI's caches (``ksi run --help``'s flags) in a directory of this test's own.

    The CLI, in-process or in a subprocess, never reads another test's cache or
    the user's ``~/.cache/ksi``, and never writes there (``ksi.testing``).
    """


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test loads plugins anew, with KSI_* plugin variables unset unless it sets them."""
    for var in ("KSI_LOAD_PLUGINS", "KSI_DISABLE_PLUGINS", "KSI_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture(scope="session")
def harbor_venv_dir() -> Path:
    """A venv with the ``harbor`` package (made once, kept): see ``tests/atif_validator.py``."""
    return harbor_venv()


@pytest.fixture
def harbor(harbor_venv_dir: Path) -> HarborValidator:
    """Harbor's ATIF validator: ``harbor.check(path, ...)`` fails the test on an invalid file."""
    return HarborValidator(harbor_venv_dir)

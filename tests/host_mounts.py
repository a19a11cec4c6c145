"""Tests that touch the host's mount table take turns, across workers and pytest sessions.

bubblewrap binds the host's whole mount tree when a sandbox starts and fails
("Can't bind mount ... Invalid argument") if a mount appears or vanishes
meanwhile, which every container start and stop and every tmpfs mount does.
So a test marked ``docker``, ``sandbox`` or ``mounts`` runs holding
:data:`LOCK`, one file for the whole machine: such tests never overlap,
whichever xdist worker or pytest session (the root suite, a plugin's, another
checkout's) runs them. A test marked ``serial`` joins them: one whose timing
(a Ctrl-C reaching every process, a killed parent's children dying) failed
when it ran beside them on a loaded machine; taking turns keeps its assertions
and timeouts as they are. ``.ci/wheel-check/ksi-harbor.sh`` takes the same lock (``flock``)
around the containers it starts beside other checks.

A conftest enables it by importing :func:`pytest_runtest_protocol`.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Markers of the tests that start containers, start bubblewrap or mount a filesystem,
#: and of the timing-sensitive tests that take turns with them.
MARKERS = ("docker", "sandbox", "mounts", "serial")
LOCK = Path(tempfile.gettempdir()) / "ksi-tests-host-mounts.lock"


def touches_host_mounts(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in MARKERS)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: the wait is not in the timeout
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """Such a test holds :data:`LOCK` from its setup to its teardown."""
    if not touches_host_mounts(item):
        return (yield)
    # O_RDONLY: flock needs no write access, so a lock file another user made works too.
    fd = os.open(LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return (yield)
    finally:
        os.close(fd)  # closing it releases the lock

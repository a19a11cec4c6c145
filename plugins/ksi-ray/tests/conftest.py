"""A simulated Ray cluster for the tests: one head (no slots) and three worker nodes.

Ray starts one raylet per node, each a separate set of processes on this
machine; ``remove_node`` kills one as a dead machine would die. Starting the
cluster takes ~20 s, so one serves every test of the session; a test that
changes it (kills a node) puts it back as it was.

Without ray installed the tests skip, unless ``KSI_REQUIRE_RAY=1`` (set by
``.ci/run``), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
FAKES = REPO / "tests" / "fakes"
# The tests use KSI's own test helpers (tests.job_helpers, tests.run_helpers).
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# A hook: the docker test takes turns with other suites' sandbox tests (.ci/run runs them at once).
from tests.host_mounts import pytest_runtest_protocol  # noqa: E402

__all__ = ["pytest_runtest_protocol"]
#: Each worker node's resources: two attempt slots; the third also "has Docker".
WORKER_RESOURCES = (
    {"ksi_slot": 2},
    {"ksi_slot": 2},
    {"ksi_slot": 2, "fakedocker": 1},
)


def _require_ray() -> Any:
    try:
        import ray
        from ray import cluster_utils
    except ImportError as exc:
        if os.environ.get("KSI_REQUIRE_RAY") == "1":
            raise AssertionError(f"KSI_REQUIRE_RAY=1 but ray cannot be imported: {exc}") from exc
        pytest.skip(f"ray is not installed ({exc}): pip install -e plugins/ksi-ray")
    return ray, cluster_utils


class SimCluster:
    """The cluster, with what the tests ask of it."""

    def __init__(self, cluster_utils: Any, env: dict[str, str]) -> None:
        #: What every node's processes get on top of this process's environment.
        self.env = env
        self.cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        #: Node id -> the resources it was started with.
        self.resources: dict[str, dict[str, float]] = {}
        self.workers = [self.add(res) for res in WORKER_RESOURCES]
        self.cluster.wait_for_nodes()

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add(self, resources: dict[str, float], env: dict[str, str] | None = None) -> Any:
        """A new worker node; its processes get ``env`` on top of this process's."""
        saved = dict(os.environ)
        os.environ.update({**self.env, **(env or {})})
        try:
            node = self.cluster.add_node(num_cpus=1, resources=dict(resources))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.resources[node.node_id] = dict(resources)
        return node

    def node(self, node_id: str) -> Any:
        for node in self.workers:
            if node.node_id == node_id:
                return node
        raise KeyError(node_id)

    def kill(self, node_id: str) -> dict[str, float]:
        """Kill a worker node's raylet (no graceful stop); return its resources."""
        node = self.node(node_id)
        self.cluster.remove_node(node, allow_graceful=False)
        self.workers.remove(node)
        return self.resources.pop(node_id)


@pytest.fixture(scope="session")
def sim_cluster() -> Iterator[SimCluster]:
    _ray, cluster_utils = _require_ray()
    # The nodes find the fake agent CLIs (the probe test adds one node that does not).
    sim = SimCluster(cluster_utils, {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}"})
    yield sim
    sim.cluster.shutdown()


@pytest.fixture(autouse=True)
def _own_cache_dir(ksi_cache_dir: Path) -> None:
    """KSI's caches (`ksi run --help`'s flags) in this test's own directory (ksi.testing)."""

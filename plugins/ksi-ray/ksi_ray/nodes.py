"""The nodes of one session: which may run its attempts, probed once each at its start.

The first job of a session names what its attempts need (a resource such as
``docker``, the components' plugins, the agent's CLI). Every node that has a
slot and that resource is probed once, with one Ray task pinned to it; a node
whose versions differ from the driver's is refused with the reason, so no
attempt fails there halfway. Ray starts the worker processes of a session
afresh on every node (they belong to its driver): the probe's worker then runs
the node's first attempt, and one warm-up task per further slot, sent with the
probe, starts the other slots' workers while the probe runs rather than after;
the first attempts are sent once the warm-ups are done too, so that each finds
an idle worker and Ray starts no process beyond one per slot.
"""

from __future__ import annotations

import platform
import time
import warnings
from typing import TYPE_CHECKING, Any

import attrs

from ksi.errors import KsiWarning, UserInputError
from ksi.jobs import AttemptJob

if TYPE_CHECKING:  # the coordinator (and asyncio with it) loads when a session starts
    from ksi_ray.coordinator import NodeInfo

#: Seconds a node has to answer the start-of-session probe (a Docker image may be pulled).
PROBE_TIMEOUT_SEC = 600.0
#: Seconds the end-of-session cleanup may take on all nodes together.
CLEANUP_TIMEOUT_SEC = 120.0


@attrs.define
class Node:
    """A node the session uses: its attempt slots and how many are taken."""

    info: NodeInfo
    slots: int
    busy: int = 0
    alive: bool = True

    @property
    def free(self) -> int:
        return self.slots - self.busy if self.alive else 0


def pin(ray: Any, node_id: str) -> Any:
    """Ray's scheduling strategy that runs a task on ``node_id`` or nowhere."""
    strategies = ray.util.scheduling_strategies
    return strategies.NodeAffinitySchedulingStrategy(node_id, soft=False)


def candidates(
    alive: list[dict[str, Any]], unit: str, need: str, slot_resource: str
) -> dict[str, tuple[dict[str, Any], int]]:
    """The alive nodes with a slot (``unit``) and the resource ``need``: node, slots by id."""
    found = {}
    for n in alive:
        res = n["Resources"]
        slots = int(res.get(unit, 0))
        if slots >= 1 and (not need or res.get(need, 0) > 0):
            found[n["NodeID"]] = (n, slots)
    if not found:
        have = "; ".join(
            f"{n.get('NodeManagerAddress')}: {sorted(_user_resources(n['Resources']))}"
            for n in alive
        )
        why = f"resource {need!r} and " if need else ""
        raise UserInputError(
            f"--executor ray: no node of the Ray cluster has {why}a {unit!r} slot "
            f"(nodes and their resources: {have or 'none'}). Start worker nodes with "
            f'`ray start --address HEAD:6379 --resources \'{{"{slot_resource}": 4'
            + (f', "{need}": 1' if need else "")
            + "}'` (docs/scale.md)"
        )
    return found


def probe(
    ray: Any,
    remote: dict[str, Any],
    job: AttemptJob,
    scratch: str,
    found: dict[str, tuple[dict[str, Any], int]],
) -> tuple[dict[str, Node], list[Any]]:
    """The nodes of ``found`` that can run ``job``'s attempts (the others refused, with a
    warning), and the warm-up tasks sent to them (the caller lets them finish)."""
    from ksi_ray import worker

    own, components = worker.component_versions(job)
    own_cli = worker.agent_cli(components.agent)
    probes = {
        node_id: remote["probe"]
        .options(num_cpus=0, max_retries=0, scheduling_strategy=pin(ray, node_id))
        .remote(job, scratch)
        for node_id in found
    }
    warm = [
        remote["warm"]
        .options(num_cpus=0, max_retries=0, scheduling_strategy=pin(ray, node_id))
        .remote()
        for node_id, (_, slots) in found.items()
        for _ in range(slots - 1)
    ]
    nodes: dict[str, Node] = {}
    refused = []
    deadline = time.monotonic() + PROBE_TIMEOUT_SEC
    for node_id, ref in probes.items():
        node, slots = found[node_id]
        try:
            report = ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
        except Exception as exc:
            # A node without ksi-ray (or KSI) cannot even load the probe: say the last line.
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:300]
            refused.append(f"  {node.get('NodeManagerAddress')} ({node_id[:12]}): {last}")
            continue
        problems = [*report.problems, *_mismatches(own, own_cli, report)]
        if problems:
            refused.append(f"  {report.node.describe()}: " + "; ".join(problems))
            continue
        nodes[node_id] = Node(report.node, slots)
    # Attempts wait for the warm-ups too: one sent while a warm-up still runs (its
    # imports) finds no idle worker, and Ray starts one more process for it (a third
    # for a node of two slots: ~0.3 s of the node's CPU spent on a worker left idle).
    if warm:
        ray.wait(warm, num_returns=len(warm), timeout=max(0.0, deadline - time.monotonic()))
    if refused and nodes:
        warnings.warn(
            "--executor ray: refusing these nodes (they run none of this run's attempts):\n"
            + "\n".join(refused),
            KsiWarning,
            stacklevel=3,
        )
    if not nodes:
        raise UserInputError(
            "--executor ray: every candidate node was refused:\n"
            + "\n".join(refused)
            + "\nInstall the driver's versions of KSI and its plugins (and the agent's CLI) "
            "on the nodes (docs/scale.md)"
        )
    return nodes, warm


def clean_up(
    ray: Any, remote: dict[str, Any], job: AttemptJob, scratch: str, nodes: dict[str, Node]
) -> None:
    """The end of the session: ``environment.cleanup`` on every alive node used, all at once."""
    refs = [
        remote["cleanup"]
        .options(num_cpus=0, max_retries=0, scheduling_strategy=pin(ray, node_id))
        .remote(job, scratch)
        for node_id, node in nodes.items()
        if node.alive
    ]
    ray.wait(refs, num_returns=len(refs), timeout=CLEANUP_TIMEOUT_SEC)


def _user_resources(resources: dict[str, float]) -> list[str]:
    """A node's resources without Ray's own per-node ones (``node:10.0.0.1``...)."""
    return [k for k in resources if ":" not in k and k not in ("memory", "object_store_memory")]


def _mismatches(
    own: dict[str, str],
    own_cli: tuple[str | None, str | None] | None,
    report: Any,
) -> list[str]:
    """Why a node's report does not match the driver (empty: it does)."""
    out = []
    ours = ".".join(platform.python_version().split(".")[:2])
    theirs_py = ".".join(str(report.python).split(".")[:2])
    if theirs_py != ours:  # attempt jobs are pickles: the same Python reads them
        out.append(f"Python {report.python} there, {platform.python_version()} on the driver")
    for dist, version in sorted(own.items()):
        theirs = report.versions.get(dist)
        if theirs != version:
            out.append(
                f"{dist} {theirs or 'is not installed'} there, {version} on the driver"
                if theirs
                else f"{dist} is not installed there ({version} on the driver)"
            )
    if own_cli is not None and own_cli[0] is not None:
        theirs_cli = report.agent_cli
        if theirs_cli is None or theirs_cli[0] is None:
            out.append(f"the agent's CLI ({own_cli[0].rsplit('/', 1)[-1]}) is not on its PATH")
        elif theirs_cli[1] != own_cli[1]:
            out.append(f"the agent's CLI is {theirs_cli[1]!r} there, {own_cli[1]!r} on the driver")
    return out

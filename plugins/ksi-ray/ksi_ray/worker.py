"""What runs on the nodes: one attempt, one node probe, one node cleanup.

These functions are sent as Ray tasks by :mod:`ksi_ray.executor` and run in
Ray worker processes, where KSI and this plugin are installed (the probe
checks that they are the driver's versions). An attempt runs with the same
code as on one machine (:func:`ksi.attempt.execute.run_job`), in a thread: the
task's main thread watches the session's cancel signal and, when it fires,
stops the attempt's environment handle (:func:`ksi.attempt.cancel.cancel_session`),
which kills the agent's whole process tree. ``ray.cancel`` could not: it does
not interrupt a thread blocked in ``Popen.wait()``, and its ``force=True``
kills the worker but not the agent, which runs in a session of its own.
"""

from __future__ import annotations

import platform
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import attrs

from ksi_ray import __version__ as ksi_ray_version
from ksi_ray.coordinator import NodeInfo
from ksi_ray.shipping import pack_dir, unpack_dir

#: How often a running attempt looks at the cancel signal (seconds).
CANCEL_POLL_SEC = 0.2


@attrs.frozen
class AttemptResult:
    """What an attempt task returns to the driver."""

    node: NodeInfo
    #: False: the coordinator refused to let it start (the session was cancelled).
    ran: bool
    record: Any = None  # ksi.records.AttemptRecord
    #: The attempt directory as :func:`ksi_ray.shipping.pack_dir` bytes (None: shared run dir).
    archive: bytes | None = None
    #: The session was cancelled while it ran (the driver drops it).
    cancelled: bool = False
    #: The node-local run directory it ran in ("" with a shared run dir).
    local_run_dir: str = ""


@attrs.frozen
class NodeReport:
    """What a node says about itself at the start of a session."""

    node: NodeInfo
    python: str
    #: Distribution name -> version, for KSI, this plugin and the run's components' plugins.
    versions: dict[str, str]
    #: The agent's CLI on this node: (path, first line of --version); None if it has none.
    agent_cli: tuple[str | None, str | None] | None
    #: What stops this node from running the session's attempts.
    problems: tuple[str, ...] = ()
    #: Leftovers of an earlier session of the run that ``environment.cleanup`` removed.
    cleaned: int = 0


def this_node() -> NodeInfo:
    import ray

    ctx = ray.get_runtime_context()
    return NodeInfo(
        node_id=ctx.get_node_id(),
        ip=ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
        hostname=socket.gethostname(),
    )


def scratch_root(base: str, node_id: str, run_id: str, session_id: str) -> Path:
    """The node-local run directory of one session: seeds and attempt directories."""
    root = Path(base or tempfile.gettempdir()) / "ksi-ray" / node_id[:12]
    return root / f"{run_id}-{session_id[:12]}"


def component_versions(job: Any) -> tuple[dict[str, str], Any]:
    """KSI's, this plugin's and the job's components' plugins' versions, and the components.

    Computed the same way on the driver and on every node, so they compare.
    """
    from ksi._version import __version__ as ksi_version
    from ksi.jobs import components_for
    from ksi.plugins import get_plugins

    components = components_for(job)
    versions = {"ksi": ksi_version, "ksi-ray": ksi_ray_version}
    infos = get_plugins().infos
    for name in components.plugins:
        info = infos.get(name)
        if info is not None and info.distribution not in versions:
            versions[info.distribution] = info.version
    return versions, components


def agent_cli(agent: Any) -> tuple[str | None, str | None] | None:
    from ksi.agents.cli_base import binary_version

    binary = getattr(agent, "binary", None)
    return binary_version(binary) if isinstance(binary, str) and binary else None


def probe_node(job: Any, scratch: str) -> NodeReport:
    """Check this node can run the session's attempts; clean up an earlier session's leftovers."""
    node = this_node()
    problems: list[str] = []
    versions: dict[str, str] = {"ksi-ray": ksi_ray_version}
    cli = None
    cleaned = 0
    try:
        # Scratch files of this run's earlier (killed) sessions on this node.
        mine = scratch_root(scratch, node.node_id, job.run_id, job.session_id)
        for old in mine.parent.glob(f"{job.run_id}-*"):
            if old != mine:
                shutil.rmtree(old, ignore_errors=True)
        versions, components = component_versions(job)
        cli = agent_cli(components.agent)
        # A resume: what a killed driver's attempts left on this node goes first.
        cleaned = components.environment.cleanup(job.run_id)
        components.environment.prepare([job.task])
    except Exception as exc:
        problems.append(f"{type(exc).__name__}: {exc}")
    return NodeReport(
        node=node,
        python=platform.python_version(),
        versions=versions,
        agent_cli=cli,
        problems=tuple(problems),
        cleaned=cleaned,
    )


def warm_worker() -> None:
    """Nothing but the attempt code's imports, so that a Ray worker process is ready for one.

    Ray starts worker processes for each session (they belong to its driver):
    sent with the probe, one per further slot of the node, these tasks make
    Ray start the slots' workers while the probe runs instead of after it.
    """
    import ksi.jobs  # noqa: F401 - the import is the point


def cleanup_node(job: Any, scratch: str) -> int:
    """The end of a session on this node: ``environment.cleanup`` and the scratch files."""
    from ksi.jobs import components_for, forget_components, forget_session

    node = this_node()
    try:
        return components_for(job).environment.cleanup(job.run_id)
    finally:
        shutil.rmtree(
            scratch_root(scratch, node.node_id, job.run_id, job.session_id), ignore_errors=True
        )
        forget_components(job.session_id)
        forget_session(job.session_id)


def run_attempt(
    job: Any,
    seed: bytes | None,
    coordinator: Any,
    key: str,
    dispatch: int,
    shared_run_dir: bool,
    scratch: str,
) -> AttemptResult:
    """Run one attempt job here, once: claimed first, cancellable, its directory returned."""
    import ray

    from ksi.jobs import cancel_session, run_job

    node = this_node()
    if not ray.get(coordinator.claim.remote(key, dispatch, node)):
        return AttemptResult(node=node, ran=False)
    local = job
    if not shared_run_dir:
        root = scratch_root(scratch, node.node_id, job.run_id, job.session_id)
        local = attrs.evolve(job, run_dir=str(root))
        seed_dest = local.seed_dir()
        if seed is not None and not seed_dest.is_dir():
            seed_dest.parent.mkdir(parents=True, exist_ok=True)
            unpack_dir(seed, seed_dest)

    box: dict[str, Any] = {}
    done = threading.Event()

    def attempt() -> None:
        try:
            box["record"] = run_job(local)
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=attempt, name=f"ksi-attempt-{key}", daemon=True)
    thread.start()
    cancel_signal = coordinator.wait_cancelled.remote()
    cancelled = False
    while not done.wait(CANCEL_POLL_SEC):
        ready, _ = ray.wait([cancel_signal], timeout=0)
        if ready:
            cancelled = True
            cancel_session(job.session_id)  # stops the handle: the agent's whole tree
            done.wait()
    thread.join()
    if "error" in box:
        raise box["error"]
    archive = None
    if not shared_run_dir and not cancelled:
        attempt_dir = local.attempt_dir()
        archive = pack_dir(attempt_dir) if attempt_dir.is_dir() else None
    if not shared_run_dir:
        shutil.rmtree(local.attempt_dir(), ignore_errors=True)
    return AttemptResult(
        node=node,
        ran=True,
        record=box["record"],
        archive=archive,
        cancelled=cancelled,
        local_run_dir="" if shared_run_dir else local.run_dir,
    )

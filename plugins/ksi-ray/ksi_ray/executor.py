"""The ``ray`` executor: the driver's side of running attempts on a Ray cluster.

The driver (``ksi run``, on the machine holding the run directory) keeps the
journal; this executor moves attempt jobs to the nodes and their results
back. How it keeps each attempt to one execution, whatever Ray does:

- every attempt task is sent with ``max_retries=0, retry_exceptions=False``
  (Ray's default would re-run a task whose node died, on another node, so an
  agent's side effects and spend would happen twice), pinned to one node
  chosen here, and *claims* its key from the session's
  :class:`~ksi_ray.coordinator.Coordinator` before it starts the agent;
- a task that failed before its claim never ran: it is sent again; one that
  failed after it is an ``error`` outcome naming the node (the driver's
  ``--retries`` may run it again, as a new try with a new key);
- no node runs more attempts at once than its slots (the ``ksi_slot``
  resource it was started with, else its CPUs), and at most ``--concurrency``
  attempts are out at once (the driver's window).

See docs/scale.md for the user's side: starting a cluster, marking Docker
nodes, resuming, and what a dead node costs.
"""

from __future__ import annotations

import collections
import contextlib
import os
import socket
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.errors import KsiWarning, UserInputError
from ksi.jobs import (
    AttemptJob,
    ErrorKind,
    JobOutcome,
    unpicklable_reason,
)
from ksi_ray import nodes
from ksi_ray.nodes import Node
from ksi_ray.shipping import SeedCache, land

#: How often a job whose Ray task failed before starting is sent again.
MAX_RESENDS = 3
#: Where ``ray start`` notes the address of the cluster running on this machine.
CURRENT_CLUSTER_FILE = Path("/tmp/ray/ray_current_cluster")


@attrs.frozen
class _Dispatch:
    job: AttemptJob
    node_id: str
    key: str
    number: int


def job_key(job: AttemptJob) -> str:
    """The exactly-once key: one (task, attempt, try) of one run."""
    return f"{job.run_id}/{job.task.id}/{job.attempt}/{job.try_number}"


def environment_name(job: AttemptJob) -> str:
    """The registered name of the job's environment (aliases resolved)."""
    ref = job.environment.ref
    if isinstance(ref, str):
        from ksi.plugins import registry

        return registry("environment").get(ref).name
    return str(getattr(ref, "name", ""))


@attrs.define
class RayExecutor:
    """Runs attempt jobs as Ray tasks, one node slot each, each exactly once."""

    name: ClassVar[str] = "ray"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "Runs attempts on the nodes of a Ray cluster (--executor-option address=auto), "
        "each exactly once; the run directory stays on this machine (docs/scale.md)."
    )

    #: The cluster: ``auto`` (the one ``ray start`` runs on this machine), ``HOST:PORT``
    #: of its head, ``ray://HOST:10001``, or ``local`` (start a one-machine Ray for this run).
    address: str = "auto"
    #: The run directory is on a file system every node mounts at the same path:
    #: workers write attempt directories there instead of sending them back.
    shared_run_dir: bool = False
    #: The node resource counting attempts at once (``ray start --resources '{"ksi_slot": 4}'``);
    #: when no node has it, each attempt takes one CPU.
    slot_resource: str = "ksi_slot"
    #: Attempts in the ``docker`` environment run only on nodes that have this resource.
    docker_resource: str = "docker"
    #: Every attempt runs only on nodes that have this resource (any environment).
    require_resource: str = ""
    #: Where workers keep seeds and attempt directories (default: the node's temp dir).
    scratch_dir: str = ""
    #: Seconds cancelled attempts have to stop before their Ray tasks are killed.
    cancel_grace_sec: float = 60.0

    def __attrs_post_init__(self) -> None:
        # Before the driver creates the run directory: no half-made run for a typo.
        check_reachable(self.address)

    _ray: Any = attrs.field(default=None, init=False)
    _connected_here: bool = attrs.field(default=False, init=False)
    _remote: dict[str, Any] = attrs.field(factory=dict, init=False)
    _coordinator: Any = attrs.field(default=None, init=False)
    _template: AttemptJob | None = attrs.field(default=None, init=False)
    _nodes: dict[str, Node] = attrs.field(factory=dict, init=False)
    _use_slot_resource: bool = attrs.field(default=False, init=False)
    _queue: collections.deque[AttemptJob] = attrs.field(factory=collections.deque, init=False)
    _running: dict[Any, _Dispatch] = attrs.field(factory=dict, init=False)
    #: The warm-up tasks sent with the probes (see :mod:`ksi_ray.nodes`).
    _warm: list[Any] = attrs.field(factory=list, init=False)
    _failed: list[JobOutcome] = attrs.field(factory=list, init=False)
    _dispatches: int = attrs.field(default=0, init=False)
    #: Jobs sent again because their Ray task failed before it started, by key.
    _resent: collections.Counter[str] = attrs.field(factory=collections.Counter, init=False)
    _seeds: SeedCache = attrs.field(factory=SeedCache, init=False)
    _window: int = attrs.field(default=1, init=False)
    _cancelled: bool = attrs.field(default=False, init=False)
    _force_at: float | None = attrs.field(default=None, init=False)
    #: Node descriptions by id, of the nodes that ran attempts (tests read it).
    placements: list[tuple[str, str]] = attrs.field(factory=list, init=False)

    @property
    def seeds_put(self) -> int:
        """How many times a task's starting files were put in the object store (tests read it)."""
        return self._seeds.puts

    # -- connecting --------------------------------------------------------------
    def start(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self._window = concurrency
        self._cancelled = False
        self._force_at = None
        self._ray, self._connected_here = _connect(self.address)
        ray = self._ray
        from ksi_ray import worker
        from ksi_ray.coordinator import Coordinator

        self._remote = {
            "attempt": ray.remote(worker.run_attempt),
            "probe": ray.remote(worker.probe_node),
            "cleanup": ray.remote(worker.cleanup_node),
            "warm": ray.remote(worker.warm_worker),
        }
        strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False
        )
        # On the driver's node: it lives and dies with this session.
        self._coordinator = (
            ray.remote(Coordinator)
            .options(num_cpus=0, scheduling_strategy=strategy, max_restarts=0)
            .remote()
        )

    # -- the first job: where the session's attempts may run -----------------------
    def _begin(self, job: AttemptJob) -> None:
        """Choose and probe the nodes for this session's attempts (its jobs share specs)."""
        ray = self._ray
        self._template = job
        need = self.require_resource or (
            self.docker_resource if environment_name(job) == "docker" else ""
        )
        alive = [n for n in ray.nodes() if n.get("Alive")]
        self._use_slot_resource = any(n["Resources"].get(self.slot_resource, 0) >= 1 for n in alive)
        unit = self.slot_resource if self._use_slot_resource else "CPU"
        found = nodes.candidates(alive, unit, need, self.slot_resource)
        self._nodes, self._warm = nodes.probe(ray, self._remote, job, self.scratch_dir, found)

    def _pin(self, node_id: str) -> Any:
        return nodes.pin(self._ray, node_id)

    # -- submitting ----------------------------------------------------------------
    def submit(self, job: AttemptJob) -> None:
        if self._ray is None:
            raise RuntimeError("RayExecutor.submit() before start()")
        if self._template is None:
            self._begin(job)
        if reason := unpicklable_reason(job):
            self._failed.append(JobOutcome(job, error=reason))
            return
        self._queue.append(job)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._queue and not self._cancelled:
            node = max(self._nodes.values(), key=lambda n: n.free, default=None)
            if node is None or node.free < 1:
                return
            self._send(self._queue.popleft(), node)

    def _send(self, job: AttemptJob, node: Node) -> None:
        self._dispatches += 1
        key = job_key(job)
        seed = None if self.shared_run_dir else self._seeds.ref(self._ray, job, self._window)
        if self.shared_run_dir:
            from ksi.jobs import seed_dir

            seed_dir(job.task, job.seed_dir())  # the workers find it in the shared run dir
        slot = {"num_cpus": 0, "resources": {self.slot_resource: 1}}
        ref = (
            self._remote["attempt"]
            .options(
                **(slot if self._use_slot_resource else {"num_cpus": 1}),
                max_retries=0,
                retry_exceptions=False,
                scheduling_strategy=self._pin(node.info.node_id),
                name=f"ksi {job.task.id} #{job.attempt}.{job.try_number}",
            )
            .remote(
                job,
                seed,
                self._coordinator,
                key,
                self._dispatches,
                self.shared_run_dir,
                self.scratch_dir,
            )
        )
        self._running[ref] = _Dispatch(job, node.info.node_id, key, self._dispatches)
        node.busy += 1
        self._seeds.users[job.task.id] += 1

    # -- results -------------------------------------------------------------------
    def as_completed(self, timeout: float | None = None) -> Iterator[JobOutcome]:
        ray = self._ray
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while self._failed:
                yield self._failed.pop(0)
            if not self._running:
                if not self._queue:
                    return
                self._refresh_nodes()
                self._dispatch()
                if not self._running:  # no node left to run them
                    for job in self._drain_queue():
                        yield JobOutcome(job, error="no node of the Ray cluster is left to run it")
                    continue
            now = time.monotonic()
            limits = [1.0]
            if deadline is not None:
                limits.append(max(0.0, deadline - now))
            if self._force_at is not None:
                limits.append(max(0.0, self._force_at - now))
            ready, _ = ray.wait(list(self._running), num_returns=1, timeout=min(limits))
            if not ready:
                if self._force_at is not None and time.monotonic() >= self._force_at:
                    self._force_cancel()
                if deadline is not None and time.monotonic() >= deadline:
                    return
                continue
            for ref in ready:
                dispatch = self._running.pop(ref)
                node = self._nodes.get(dispatch.node_id)
                if node is not None:
                    node.busy -= 1
                self._seeds.users[dispatch.job.task.id] -= 1
                outcome = self._outcome(ref, dispatch)
                if outcome is not None:
                    yield outcome
            self._dispatch()

    def _outcome(self, ref: Any, dispatch: _Dispatch) -> JobOutcome | None:
        """The job's outcome; None when it never started and was queued again."""
        ray = self._ray
        job = dispatch.job
        try:
            result = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # the task itself raised
            return JobOutcome(job, error=f"the attempt failed on its Ray worker: {exc.cause!r}")
        except ray.exceptions.RayError as exc:  # its node or worker process is gone
            claim = ray.get(self._coordinator.revoke.remote(dispatch.key, dispatch.number))
            self._refresh_nodes()
            if claim is None:
                if self._cancelled:
                    return JobOutcome(job, error="cancelled before it started")
                self._resent[dispatch.key] += 1
                if self._resent[dispatch.key] <= MAX_RESENDS:
                    self._queue.appendleft(job)  # it never started: it may go elsewhere
                    return None
                return JobOutcome(
                    job,
                    error=f"Ray could not start this attempt ({type(exc).__name__}: {exc})",
                )
            return JobOutcome(
                job,
                error=(
                    f"Ray node {claim.node.describe()} died (or lost the worker) while running "
                    f"this attempt ({type(exc).__name__}); whatever the agent did there is "
                    "lost. It runs again as a new try: now with --retries, else on resume"
                ),
                error_kind=ErrorKind.WORKER_LOST,
            )
        if not result.ran:
            return JobOutcome(job, error="not started: the run was cancelled")
        self.placements.append((job_key(job), result.node.node_id))
        return JobOutcome(job, record=land(result, job))

    def _refresh_nodes(self) -> None:
        alive = {n["NodeID"] for n in self._ray.nodes() if n.get("Alive")}
        for node_id, node in self._nodes.items():
            if node.alive and node_id not in alive:
                node.alive = False
                warnings.warn(
                    f"--executor ray: node {node.info.describe()} left the cluster; "
                    "no more attempts go there",
                    KsiWarning,
                    stacklevel=2,
                )

    def _drain_queue(self) -> list[AttemptJob]:
        jobs = list(self._queue)
        self._queue.clear()
        return jobs

    # -- stopping ------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop every attempt where it runs: the coordinator's signal reaches each task."""
        self._cancelled = True
        self._force_at = time.monotonic() + self.cancel_grace_sec
        for job in self._drain_queue():
            self._failed.append(JobOutcome(job, error="cancelled before it started"))
        if self._coordinator is not None:
            self._ray.get(self._coordinator.cancel.remote(), timeout=30)

    def _force_cancel(self) -> None:
        """Attempts that did not stop within the grace period: kill their Ray tasks.

        Their agents run in sessions of their own and outlive a killed worker;
        the end-of-session cleanup on every node (:meth:`shutdown`) ends them.
        """
        self._force_at = None
        for ref in list(self._running):
            try:
                self._ray.cancel(ref, force=True)
            except Exception:
                import logging  # only here and when connecting: not with every ksi command

                logging.getLogger(__name__).debug("ray.cancel failed", exc_info=True)

    def shutdown(self) -> None:
        """``environment.cleanup`` on every node used, then release the cluster."""
        ray = self._ray
        if ray is None:
            return
        try:
            if self._template is not None:
                nodes.clean_up(ray, self._remote, self._template, self.scratch_dir, self._nodes)
            if self._coordinator is not None:
                ray.kill(self._coordinator)
        finally:
            _forget(ray, self._warm)
            self._warm = []
            self._seeds.clear()
            self._running.clear()
            self._coordinator = None
            if self._connected_here:
                ray.shutdown()
            self._ray = None


def _forget(ray: Any, refs: list[Any]) -> None:
    """Read what ``refs`` returned, if they finished: a task's error nobody read would
    otherwise be logged by Ray (the warm-ups' are of no interest: the probes report)."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
    for ref in ready:
        with contextlib.suppress(Exception):  # a refused node's: its probe already said why
            ray.get(ref)


def _connect(address: str) -> tuple[Any, bool]:
    """``ray`` connected to the cluster at ``address`` (imported here, only when used).

    Also whether this call connected it: a Python caller that has already
    called ``ray.init()`` keeps its connection (and ``address`` is not used).
    """
    import logging

    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is this plugin's dependency
        raise UserInputError(
            f"--executor ray needs the ray package: pip install ksi-ray ({exc})"
        ) from exc
    if ray.is_initialized():
        return ray, False
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        # "local" is Ray's own word for a new one-machine instance (a bare ray.init()
        # could join whatever a stale ray_current_cluster names instead).
        ray.init(address=address, **kwargs)
    except Exception as exc:
        raise UserInputError(
            f"--executor ray: cannot connect to a Ray cluster at address={address!r} "
            f"({type(exc).__name__}: {exc}). Start one with `ray start --head` on this "
            "machine (address=auto finds it), or give --executor-option address=HOST:PORT "
            "of its head. A stale /tmp/ray/ray_current_cluster left by a stopped cluster "
            "also causes this: `ray stop` removes it (docs/scale.md)"
        ) from exc
    return ray, True


def check_reachable(address: str) -> None:
    """Fail in seconds, with the fix, when no Ray cluster answers at ``address``.

    ``ray.init`` itself would wait minutes on an address nobody answers, and
    ``auto`` trusts ``/tmp/ray/ray_current_cluster``, which a cluster that
    died without ``ray stop`` leaves behind.
    """
    if address == "local" or address.startswith("ray://"):
        return
    stale = ""
    if address == "auto":
        if os.environ.get("RAY_ADDRESS"):
            address = os.environ["RAY_ADDRESS"]
            if address.startswith("ray://"):
                return
        elif not CURRENT_CLUSTER_FILE.is_file():
            raise UserInputError(
                "--executor ray: no Ray cluster runs on this machine (address=auto found no "
                f"{CURRENT_CLUSTER_FILE}). Start one with `ray start --head --resources "
                "'{\"ksi_slot\": 4}'`, or give --executor-option address=HEAD_HOST:6379 "
                "(docs/scale.md)"
            )
        else:
            address = CURRENT_CLUSTER_FILE.read_text().strip()
            stale = (
                f"; {CURRENT_CLUSTER_FILE} names {address}, left by a cluster that "
                "stopped without `ray stop` (run `ray stop` to remove it)"
            )
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except (OSError, ValueError) as exc:
        raise UserInputError(
            f"--executor ray: no Ray cluster answers at {address!r} ({exc}){stale}. "
            "Start one with `ray start --head`, or give --executor-option "
            "address=HEAD_HOST:6379 of a running one (docs/scale.md)"
        ) from exc

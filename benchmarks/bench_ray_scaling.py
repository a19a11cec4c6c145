"""Throughput of the ``ray`` executor: the same 24 attempts on 1 node, then on 3.

Each attempt's agent sleeps 2 seconds (a fixed amount of "agent time", as an
LLM agent mostly waits); every node has 2 attempt slots (``ksi_slot: 2``).
One node runs the 24 attempts 2 at a time (ideal 24 s), three nodes 6 at a
time (ideal 8 s): the ratio of the two wall times is the speed-up, ideal 3x.
Both runs use the same simulated cluster (``ray.cluster_utils.Cluster``: one
raylet per node, all on this machine), so KSI's own per-attempt work (seeding,
capture, grading, shipping the attempt directory back) shares this machine's
cores across the "nodes", which a real cluster would not. Two ratios are
printed: of the attempts' span (first start to last end: the throughput) and
of the whole ``ksi run`` (which adds a fixed cost per session: Ray starts
fresh worker processes for every driver, one per slot and one for the
coordinator, the nodes are probed once each, and cleaned up at the end; on
this one machine those process starts share its cores). docs/scale.md has
the figures and where that cost goes.

    python benchmarks/bench_ray_scaling.py [--attempts 24] [--seconds 2]

Needs ``pip install -e plugins/ksi-ray``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime
from pathlib import Path

import ksi
from ksi.rundir.journal import read_records


def attempts_span(run_dir: Path) -> float:
    """Seconds from the first attempt's start to the last one's end (the journal's clocks)."""
    records = read_records(run_dir / "journal.jsonl")
    starts = [datetime.fromisoformat(r.started_at) for r in records]
    ends = [datetime.fromisoformat(r.finished_at) for r in records]
    return (max(ends) - min(starts)).total_seconds()


def timed_run(tasks: Path, run_dir: Path, address: str, seconds: float, only: str) -> float:
    options = {"address": address}
    if only:
        options["require_resource"] = only
    started = time.perf_counter()
    summary = ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": f"sleep {seconds}; echo hi > repo/hello.txt"},
        run_dir=run_dir,
        concurrency=6,
        executor="ray",
        executor_options=options,
    )
    elapsed = time.perf_counter() - started
    assert summary.solved_tasks == summary.n_tasks, summary
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attempts", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()

    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        # The first node alone also has "bench_one": the 1-node run asks for it.
        for extra in ({"bench_one": 1}, {}, {}):
            cluster.add_node(num_cpus=1, resources={"ksi_slot": 2, **extra})
        cluster.wait_for_nodes()
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            tasks = root / "tasks.jsonl"
            tasks.write_text(
                "".join(
                    json.dumps({"task_id": f"t{i}", "prompt": "p", "eval": {"command": "true"}})
                    + "\n"
                    for i in range(args.attempts)
                )
            )
            # A warm-up run: the first imports on each node read from disk.
            timed_run(tasks, root / "warm", cluster.address, 0, "")
            root_one, root_three = root / "one", root / "three"
            one = timed_run(tasks, root_one, cluster.address, args.seconds, "bench_one")
            three = timed_run(tasks, root_three, cluster.address, args.seconds, "")
            span_one, span_three = attempts_span(root_one), attempts_span(root_three)
    finally:
        cluster.shutdown()
    ideal_one = args.attempts / 2 * args.seconds
    ideal_three = args.attempts / 6 * args.seconds
    print(f"{args.attempts} attempts of a {args.seconds:g} s agent, 2 slots per node")
    print(f"1 node:  wall {one:6.1f} s, attempts {span_one:6.1f} s (ideal {ideal_one:.1f} s)")
    print(f"3 nodes: wall {three:6.1f} s, attempts {span_three:6.1f} s (ideal {ideal_three:.1f} s)")
    print(
        f"speed-up 3 nodes / 1 node, attempts (first start to last end): "
        f"{span_one / span_three:.2f}x (ideal 3.00x)"
    )
    print(
        f"speed-up 3 nodes / 1 node, wall time of `ksi run` (with connecting, probing the "
        f"nodes, starting Ray workers, cleanup): {one / three:.2f}x"
    )


if __name__ == "__main__":
    main()

"""What a long attempt's trajectory costs: its size, and the time to read and write it.

Writes a Claude Code stream-json log of ``--steps`` model calls (each a text,
a Bash call, its ``--output-bytes`` of output and the stream events with the
call's usage, as the real CLI prints them), then times what KSI does after
the agent ran: the plugin reading the log into a trajectory, bounding and
writing ``trajectory.json``; then reading it back and making the evidence
digest (what the next generation's distiller reads).

    python benchmarks/bench_trajectory.py [--steps 2000] [--output-bytes 2000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ksi.agents.claude_code import ClaudeCodeAgent
from ksi.attempt.trajectory import with_totals
from ksi.interfaces import AgentContext
from ksi.models import TaskSpec, Usage
from ksi.proc import ProcResult
from ksi.trajectories import TRAJECTORY_FILE, digest, read_trajectory, write_trajectory


def stream_log(path: Path, steps: int, output_bytes: int) -> None:
    """A stream-json log of ``steps`` calls, in the real CLI's shapes."""
    with open(path, "w") as fh:

        def line(obj: dict[str, object]) -> None:
            fh.write(json.dumps(obj) + "\n")

        line({"type": "system", "subtype": "init", "session_id": "s", "claude_code_version": "x"})
        for n in range(steps):
            mid, tid = f"msg_{n}", f"toolu_{n}"
            usage = {"input_tokens": 900 + n, "output_tokens": 1, "cache_read_input_tokens": 5000}
            line({"type": "stream_event", "event": {"type": "message_start",
                  "message": {"id": mid, "usage": usage}}})  # fmt: skip
            line({"type": "stream_event", "event": {"type": "message_delta",
                  "usage": {"output_tokens": 40}}})  # fmt: skip
            command = f"python -m pytest -q tests/test_{n % 50}.py"
            line({"type": "assistant", "timestamp": "2025-01-01T00:00:00Z", "message": {
                "id": mid, "model": "m", "usage": usage, "content": [
                    {"type": "text", "text": f"Step {n}: running the tests again."},
                    {"type": "tool_use", "id": tid, "name": "Bash",
                     "input": {"command": command, "description": "Run tests"}}]}})  # fmt: skip
            out = (f"FAILED tests/test_{n}.py::test_x - AssertionError\n" * output_bytes)[
                :output_bytes
            ]
            line({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tid, "content": "Exit code 1\n" + out,
                 "is_error": True}]}})  # fmt: skip
        line({"type": "result", "subtype": "success", "is_error": False, "num_turns": steps})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--output-bytes", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = root / "agent.stdout.log"
        stream_log(log, args.steps, args.output_bytes)
        ctx = AgentContext(
            task=TaskSpec(id="t"),
            prompt="Fix the tests.",
            attempt=1,
            attempt_dir=root,
            workspace_path=str(root / "workspace"),
            repo_path=str(root / "workspace" / "repo"),
            host_workspace=root / "workspace",
        )
        result = ProcResult(exit_code=0, duration_sec=1.0, stdout_path=str(log))
        t0 = time.perf_counter()
        traj = ClaudeCodeAgent().trajectory(ctx, result)
        t1 = time.perf_counter()
        assert traj is not None
        path = root / TRAJECTORY_FILE
        write_trajectory(path, with_totals(traj, traj.step_usage()))
        t2 = time.perf_counter()
        back = read_trajectory(path)
        t3 = time.perf_counter()
        d = digest(back, max_bytes=4096)
        t4 = time.perf_counter()
        assert len(back.steps) == args.steps + 1 and isinstance(back.usage, Usage)
        print(f"steps: {args.steps} model calls ({len(back.steps)} trajectory steps)")
        print(f"agent.stdout.log: {log.stat().st_size / 1e6:.1f} MB")
        print(f"trajectory.json: {path.stat().st_size / 1e6:.1f} MB")
        print(f"read the log into a trajectory: {t1 - t0:.2f} s")
        print(f"bound and write trajectory.json: {t2 - t1:.2f} s")
        print(f"read trajectory.json back: {t3 - t2:.2f} s")
        print(f"digest for the evidence: {(t4 - t3) * 1000:.0f} ms ({d.failed_total} failures)")


if __name__ == "__main__":
    main()

"""How much slower is ``ksi run`` than the least a harness must do?

Runs N trivial tasks (agent ``true``, eval ``true``) through the real
``ksi run`` command, and in the same session the same work through a minimal
shell harness (per task: copy the seed, run ``true``, copy the result, run
``true``), both at the same concurrency. Prints both wall times, the ratio
(target: at most 1.3x at N=500, concurrency 2) and ksi's peak RSS; with
``--memory-tasks`` it also runs a large run to report peak memory (target:
under 120 MB at 10,000 tasks).

    python benchmarks/bench_run_overhead.py [--tasks 500] [--concurrency 2]
        [--memory-tasks 10000]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_tasks(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for i in range(n):
            record = {
                "task_id": f"t{i}",
                "prompt": "do nothing",
                "files": {"main.py": "print('hello')\n", "lib/util.py": "X = 1\n"},
                "eval": {"command": "true"},
            }
            fh.write(json.dumps(record) + "\n")


HARNESS = r"""
set -e
seed="$1"; out="$2"; n="$3"; conc="$4"
one() {
  d="$out/$1"; mkdir -p "$d"
  cp -r "$seed" "$d/repo"
  (cd "$d/repo" && true)
  cp -r "$d/repo" "$d/captured"
  (cd "$d/captured" && true)
  rm -rf "$d/repo"
}
export -f one; export seed out
seq 0 $((n-1)) | xargs -P "$conc" -I{} bash -c 'one {}'
"""


def time_harness(tmp: Path, n: int, conc: int) -> float:
    seed = tmp / "seed"
    (seed / "lib").mkdir(parents=True)
    (seed / "main.py").write_text("print('hello')\n")
    (seed / "lib" / "util.py").write_text("X = 1\n")
    out = tmp / "harness"
    start = time.perf_counter()
    subprocess.run(
        ["bash", "-c", HARNESS, "harness", str(seed), str(out), str(n), str(conc)], check=True
    )
    return time.perf_counter() - start


def time_ksi(tmp: Path, n: int, conc: int, name: str) -> tuple[float, float]:
    tasks = tmp / f"{name}.jsonl"
    write_tasks(tasks, n)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ksi",
            "run",
            str(tasks),
            "--agent",
            "command",
            "--agent-option",
            "cmd=true",
            "--concurrency",
            str(conc),
            "--run-dir",
            str(tmp / name),
        ],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"ksi run failed:\n{proc.stderr}")
    if f"solved: {n}/{n}" not in proc.stdout:
        sys.exit(f"unexpected summary:\n{proc.stdout}")
    peak_mb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return elapsed, peak_mb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--memory-tasks", type=int, default=0)
    parser.add_argument(
        "--repeat", type=int, default=3, help="interleaved rounds; medians are reported"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ksi-bench-") as tmp_s:
        tmp = Path(tmp_s)
        harness_times, ksi_times, ratios = [], [], []
        peak = 0.0
        for i in range(args.repeat):
            round_dir = tmp / f"round{i}"
            round_dir.mkdir()
            h = time_harness(round_dir, args.tasks, args.concurrency)
            k, peak = time_ksi(round_dir, args.tasks, args.concurrency, "run")
            harness_times.append(h)
            ksi_times.append(k)
            ratios.append(k / h)
            print(f"round {i + 1}: harness {h:.2f}s  ksi {k:.2f}s  ratio {k / h:.2f}x")
        harness = statistics.median(harness_times)
        ksi_time = statistics.median(ksi_times)
        print(f"tasks={args.tasks} concurrency={args.concurrency} (medians of {args.repeat})")
        print(f"minimal shell harness: {harness:.2f}s ({harness / args.tasks * 1000:.1f} ms/task)")
        print(
            f"ksi run:               {ksi_time:.2f}s ({ksi_time / args.tasks * 1000:.1f} ms/task)"
        )
        print(f"ratio ksi/harness:     {statistics.median(ratios):.2f}x (target <= 1.3x)")
        print(f"ksi peak RSS:          {peak:.0f} MB")
        if args.memory_tasks:
            t, peak = time_ksi(tmp, args.memory_tasks, args.concurrency, "big")
            print(
                f"ksi run of {args.memory_tasks} tasks: {t:.1f}s, peak RSS {peak:.0f} MB "
                "(target < 120 MB)"
            )


if __name__ == "__main__":
    main()

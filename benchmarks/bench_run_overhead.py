"""How much slower is ``ksi run`` than the least a harness must do?

Runs N trivial tasks (agent ``true``, eval ``true``) through the real
``ksi run`` command, and in the same session the same work through a minimal
shell harness (per task: copy the seed, run ``true``, copy the result, run
``true``), both at the same concurrency. Prints both wall times, the ratio
(issue 30's target: at most 1.5x at N=300, concurrency 2, on disk), the CPU
time (user + system) each used, which a busy machine distorts less than the
wall time, and ksi's peak RSS; with ``--memory-tasks`` it also runs a large
run to report peak memory (target: under 120 MB at 10,000 tasks).

A second baseline, printed apart and never the target's, is a shell harness
that creates and deletes the files ksi's documented attempt layout holds for
this run (docs/running.md: the seed per task, ``workspace/`` with
``.ksi/prompt.md``, ``prompt.md``, ``captured/repo``, the graded copy
``eval/repo`` and its removal, ``eval/`` itself, ``record.json``; no logs
and no ``diff.patch``: these agents print nothing and change nothing): 26
inodes created and 11 deleted per attempt against the minimal harness's 9
and 4. It shows what that file work costs on the benchmark's filesystem,
apart from KSI's own Python (it does no fsync; ksi syncs its journal in the
background, one fsync for the lines written meanwhile).

Why it matters: on the 2-core VM this was tuned on, ``/tmp`` is an ext4
without a journal, where creating an inode skips every inode deleted there
in the last minutes (``recently_deleted()`` in ext4's allocator). The other
processes churning ``/tmp`` (test suites) can make one create cost 0.3-0.8 ms
there against 0.03 ms elsewhere on the same disk, and ksi creates 3.4x the
harness's inodes; the benchmark prints the cost it measured per create in
its directory (``--dir``, default: the system temporary directory) so a
ratio can be read with it. Attempt costs, measured there: see
docs/running.md, "What an attempt costs".

``PYTHONDONTWRITEBYTECODE`` is dropped for the ksi runs (as in
bench_startup.py): a user's installed KSI has its bytecode cached.

    python benchmarks/bench_run_overhead.py [--tasks 300] [--concurrency 2]
        [--repeat 3] [--executor local|processes] [--memory-tasks 10000] [--dir DIR]
        [--files-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


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

#: The second baseline: the files of ksi's attempt layout, created and deleted as ksi does.
FILES_HARNESS = r"""
set -e
seed="$1"; out="$2"; n="$3"; conc="$4"
one() {
  s="$out/seeds/t$1"; a="$out/attempts/t$1/1"
  mkdir -p "$s" "$a/workspace/.ksi" "$a/captured" "$a/eval"
  cp -r "$seed" "$s/repo"
  cp -r "$s/repo" "$a/workspace/repo"
  echo "do nothing" > "$a/prompt.md"; echo "do nothing" > "$a/workspace/.ksi/prompt.md"
  (cd "$a/workspace" && true)
  cp -r "$a/workspace/repo" "$a/captured/repo"
  cp -r "$a/captured/repo" "$a/eval/repo"
  (cd "$a/eval/repo" && true)
  rm -rf "$a/eval/repo" "$a/workspace"
  echo "{}" > "$a/record.json"
}
export -f one; export seed out
seq 0 $((n-1)) | xargs -P "$conc" -I{} bash -c 'one {}'
"""


def make_seed(tmp: Path) -> Path:
    seed = tmp / "seed"
    (seed / "lib").mkdir(parents=True)
    (seed / "main.py").write_text("print('hello')\n")
    (seed / "lib" / "util.py").write_text("X = 1\n")
    return seed


def children_cpu() -> float:
    """CPU seconds (user + system) used so far by this process's waited-for children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_harness(tmp: Path, n: int, conc: int, script: str = HARNESS) -> tuple[float, float]:
    """``(wall seconds, CPU seconds)`` of the shell harness."""
    seed = make_seed(tmp) if not (tmp / "seed").exists() else tmp / "seed"
    out = tmp / ("harness" if script is HARNESS else "files-harness")
    cpu = children_cpu()
    start = time.perf_counter()
    subprocess.run(
        ["bash", "-c", script, "harness", str(seed), str(out), str(n), str(conc)], check=True
    )
    return time.perf_counter() - start, children_cpu() - cpu


def create_cost_us(tmp: Path, n: int = 300) -> float:
    """Microseconds per inode created in ``tmp`` now (the files are left: deleting pollutes)."""
    probe = tmp / "create-probe"
    probe.mkdir()
    start = time.perf_counter()
    for i in range(n):
        os.close(os.open(probe / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    return (time.perf_counter() - start) / n * 1e6


def time_ksi(
    tmp: Path, n: int, conc: int, name: str, executor: str = "local"
) -> tuple[float, float, float]:
    """``(wall seconds, CPU seconds, peak RSS in MB)`` of one ``ksi run``."""
    tasks = tmp / f"{name}.jsonl"
    write_tasks(tasks, n)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cpu = children_cpu()
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
            "--executor",
            executor,
        ],
        capture_output=True,
        text=True,
        env=ENV,
    )
    elapsed = time.perf_counter() - start
    used = children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"ksi run failed:\n{proc.stderr}")
    if f"solved: {n}/{n}" not in proc.stdout:
        sys.exit(f"unexpected summary:\n{proc.stdout}")
    peak_mb = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return elapsed, used, peak_mb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--memory-tasks", type=int, default=0)
    parser.add_argument(
        "--repeat", type=int, default=3, help="interleaved rounds; medians are reported"
    )
    parser.add_argument(
        "--executor",
        default="local",
        help="ksi's executor (local: threads, the default; processes: worker processes)",
    )
    parser.add_argument(
        "--dir", default=None, help="where the runs go (default: the system temporary directory)"
    )
    parser.add_argument(
        "--files-baseline",
        action="store_true",
        help="also time the second baseline: a shell harness doing ksi's file work",
    )
    args = parser.parse_args()
    # Run from the temporary directory: `python -m ksi` puts the current directory first
    # on sys.path, and the ksi measured must be the installed one.
    with tempfile.TemporaryDirectory(prefix="ksi-bench-", dir=args.dir) as tmp_s:
        tmp = Path(tmp_s)
        os.chdir(tmp)
        harness_times, ksi_times, ratios, files_times, creates = [], [], [], [], []
        cpu_ratios = []
        peak = 0.0
        for i in range(args.repeat):
            round_dir = tmp / f"round{i}"
            round_dir.mkdir()
            creates.append(create_cost_us(round_dir))
            h, h_cpu = time_harness(round_dir, args.tasks, args.concurrency)
            k, k_cpu, peak = time_ksi(round_dir, args.tasks, args.concurrency, "run", args.executor)
            line = (
                f"round {i + 1}: harness {h:.2f}s  ksi {k:.2f}s  ratio {k / h:.2f}x"
                f"  (cpu {h_cpu:.2f}s / {k_cpu:.2f}s: {k_cpu / h_cpu:.2f}x)"
            )
            if args.files_baseline:
                f, _ = time_harness(round_dir, args.tasks, args.concurrency, FILES_HARNESS)
                files_times.append(f)
                line += f"  (files harness {f:.2f}s, ksi/files {k / f:.2f}x)"
            harness_times.append(h)
            ksi_times.append(k)
            ratios.append(k / h)
            cpu_ratios.append(k_cpu / h_cpu)
            print(f"{line}  [{creates[-1]:.0f} us per create before the round]", flush=True)
        harness = statistics.median(harness_times)
        ksi_time = statistics.median(ksi_times)
        print(
            f"tasks={args.tasks} concurrency={args.concurrency} executor={args.executor} "
            f"(medians of {args.repeat})"
        )
        print(f"directory:             {tmp} ({statistics.median(creates):.0f} us per create)")
        print(f"minimal shell harness: {harness:.2f}s ({harness / args.tasks * 1000:.1f} ms/task)")
        print(
            f"ksi run:               {ksi_time:.2f}s ({ksi_time / args.tasks * 1000:.1f} ms/task)"
        )
        print(f"ratio ksi/harness:     {statistics.median(ratios):.2f}x (target <= 1.5x)")
        print(f"cpu ratio ksi/harness: {statistics.median(cpu_ratios):.2f}x (user + system time)")
        if files_times:
            files = statistics.median(files_times)
            per_files = [k / f for k, f in zip(ksi_times, files_times, strict=True)]
            print(
                f"files harness:         {files:.2f}s ({files / args.tasks * 1000:.1f} ms/task); "
                f"ksi/files {statistics.median(per_files):.2f}x (second baseline, not the target's)"
            )
        print(f"ksi peak RSS:          {peak:.0f} MB")
        if args.memory_tasks:
            t, _, peak = time_ksi(tmp, args.memory_tasks, args.concurrency, "big", args.executor)
            print(
                f"ksi run of {args.memory_tasks} tasks: {t:.1f}s, peak RSS {peak:.0f} MB "
                "(target < 120 MB)"
            )


if __name__ == "__main__":
    main()

"""How long loading 10,000 records with inline files takes.

The baseline, measured in the same run on the same file, is the least any
loader must do: read the file and ``json.loads`` each line into a dict.
Targets: "well under a second" (issue 9), at most 2x the baseline (issue 30;
about 1.86x in CPU time on the 2-core VM: reading the JSON is the baseline,
checking each record (a third of the load) and building its typed task take
the rest; a task's starting files, solution and origin are built when first
read, docs/running.md "Loading the tasks").

Two KSI figures:

* the task source's ``load``, what ``ksi run`` (and ``ksi.run(path)``,
  ``ksi tasks``, ``ksi grade``, regrade) use: typed tasks, nothing written;
* ``load_tasks_for_source``, the original KSI's entry point, which (as the
  original did) writes every task's inline files to a temporary directory
  so that ``metadata["repo_path"]`` exists: 30,000 files here.

Run: ``.venv/bin/python benchmarks/bench_load_tasks.py [N] [--source-only]`` (``--source-only``:
not the original's entry point, whose 30,000 files take seconds).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from ksi.tasks.loaders import get_task_source, load_tasks_for_source


def make_tasks_file(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            record = {
                "task_id": f"task-{i:05d}",
                "prompt": f"Implement function number {i} in src/mod_{i}.py.",
                "files": {
                    f"src/mod_{i}.py": "def f():\n    raise NotImplementedError\n",
                    "test_mod.py": f"from src.mod_{i} import f\nassert f() == {i}\n",
                    "README.md": "A small task.\n" * 5,
                },
                "eval": {"command": "python3 test_mod.py", "timeout_sec": 60},
                "solution": {"files": {f"src/mod_{i}.py": f"def f():\n    return {i}\n"}},
            }
            fh.write(json.dumps(record) + "\n")


def baseline(path: Path) -> int:
    records = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                records.append(json.loads(line))
    return len(records)


def interleaved(fns: list[object], rounds: int) -> list[list[tuple[float, float]]]:
    """Each function's (wall, CPU) times, one call of each per round in turn, so that a busy
    machine slows all of them alike. The CPU time (this thread's) is what another process
    on the same cores distorts least."""
    times: list[list[tuple[float, float]]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, times, strict=True):
            start, cpu = time.perf_counter(), time.thread_time()
            fn()  # type: ignore[operator]
            out.append((time.perf_counter() - start, time.thread_time() - cpu))
    return times


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--source-only"]
    n = int(args[0]) if args else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tasks.jsonl"
        make_tasks_file(path, n)
        size_mb = path.stat().st_size / 1e6
        source = get_task_source("custom")  # loads the plugins once
        assert baseline(path) == n
        assert len(source.load(path)) == n
        base_times, ksi_times = interleaved([lambda: baseline(path), lambda: source.load(path)], 7)
        base, ksi = min(base_times), min(ksi_times)
        ratios = sorted(k[0] / b[0] for b, k in zip(base_times, ksi_times, strict=True))
        print(f"{n} records with inline files ({size_mb:.1f} MB), best of 7 interleaved rounds:")
        print(f"  baseline (json.loads per line):          {base[0] * 1000:8.1f} ms wall")
        print(f"  ksi run's load (the source, no writes):  {ksi[0] * 1000:8.1f} ms wall")
        print(
            f"  ratio: {ksi[0] / base[0]:.2f}x (best to best); median of the rounds' ratios:"
            f" {ratios[len(ratios) // 2]:.2f}x"
        )
        base_cpu = min(b[1] for b in base_times)
        ksi_cpu = min(k[1] for k in ksi_times)
        print(
            f"  CPU time: {base_cpu * 1000:.1f} ms against {ksi_cpu * 1000:.1f} ms,"
            f" ratio {ksi_cpu / base_cpu:.2f}x"
        )
        if "--source-only" in sys.argv:
            return
        start = time.perf_counter()
        load_tasks_for_source(task_source="custom", tasks_path=path)
        original = time.perf_counter() - start
        print(f"  load_tasks_for_source (writes {n} dirs, one round): {original * 1000:8.1f} ms")


if __name__ == "__main__":
    main()

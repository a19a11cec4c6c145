"""How long loading 10,000 records with inline files takes.

The baseline, measured in the same run on the same file, is the least any
loader must do: read the file and ``json.loads`` each line into a dict.
Targets: "well under a second" (issue 9), at most 2x the baseline (issue 30;
2.6x measured on the 2-core VM: the JSON itself is the baseline, building a
typed task per record and checking its fields take the rest).

Two KSI figures:

* the task source's ``load``, what ``ksi run`` (and ``ksi.run(path)``,
  ``ksi tasks``, ``ksi grade``, regrade) use: typed tasks, nothing written;
* ``load_tasks_for_source``, the original KSI's entry point, which (as the
  original did) writes every task's inline files to a temporary directory
  so that ``metadata["repo_path"]`` exists: 30,000 files here.

Run: ``.venv/bin/python benchmarks/bench_load_tasks.py [N]``
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


def best_of(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tasks.jsonl"
        make_tasks_file(path, n)
        size_mb = path.stat().st_size / 1e6
        source = get_task_source("custom")  # loads the plugins once
        assert baseline(path) == n
        assert len(source.load(path)) == n
        base = best_of(lambda: baseline(path), 5)
        ksi = best_of(lambda: source.load(path), 5)
        original = best_of(lambda: load_tasks_for_source(task_source="custom", tasks_path=path), 1)
        print(f"{n} records with inline files ({size_mb:.1f} MB), best of 5:")
        print(f"  baseline (json.loads per line):          {base * 1000:8.1f} ms")
        print(f"  ksi run's load (the source, no writes):  {ksi * 1000:8.1f} ms")
        print(f"  ratio: {ksi / base:.2f}x")
        print(f"  load_tasks_for_source (writes {n} dirs, one round): {original * 1000:8.1f} ms")


if __name__ == "__main__":
    main()

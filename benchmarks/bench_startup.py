"""How long ``ksi`` takes to start, against the floor of any Typer CLI.

The baseline is ``python -c 'import typer'`` in the same interpreter: no Typer
command line can start faster. Each command runs N times, interleaved with the
baseline in the same rounds (so a busy machine slows both alike), and the
medians and their ratios are printed. Targets (issue 9): ``ksi --help`` at
most 1.5x the baseline, ``ksi run --help`` at most 2x.

``ksi run --help`` reads the component flags (docker's ``--image``, plugins'
flags) from its cache, as it does for a user after their first ``ksi run``
(the warm-up round fills it); ``ksi run --help (no cache)`` starts each time
with an empty cache directory (``KSI_CACHE_DIR``), loading every plugin to
list the flags, as the first ``ksi run --help`` after an install or upgrade
does. The benchmark's caches live in a temporary directory, never the user's.

Plugins installed in the interpreter count, as they would for a user
(``ksi --help`` lists their commands); ``KSI_LOAD_PLUGINS=`` measures KSI alone.
``PYTHONDONTWRITEBYTECODE`` is dropped for the runs: a user's installed KSI
has its bytecode cached, so compiling it at every start would measure nothing
a user sees. (To measure another checkout, put it first on ``PYTHONPATH``.)

Run: ``.venv/bin/python benchmarks/bench_startup.py [N]`` (default 30 rounds)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: name -> the argv run each round.
COMMANDS: dict[str, list[str]] = {
    "python (interpreter alone)": [sys.executable, "-c", "pass"],
    "import typer (baseline)": [sys.executable, "-c", "import typer"],
    "ksi --help": [sys.executable, "-m", "ksi", "--help"],
    "ksi run --help": [sys.executable, "-m", "ksi", "run", "--help"],
    "ksi run --help (no cache)": [sys.executable, "-m", "ksi", "run", "--help"],
    "ksi --version": [sys.executable, "-m", "ksi", "--version"],
}
BASELINE = "import typer (baseline)"
TARGETS = {"ksi --help": 1.5, "ksi run --help": 2.0}
#: Commands that start with an empty cache directory each time.
COLD = {"ksi run --help (no cache)"}

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(argv: list[str], cache_dir: Path) -> float:
    env = {**ENV, "KSI_CACHE_DIR": str(cache_dir)}
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main(rounds: int) -> int:
    with tempfile.TemporaryDirectory(prefix="ksi-bench-startup-") as tmp:
        return measure(rounds, Path(tmp))


def measure(rounds: int, tmp: Path) -> int:
    warm = tmp / "warm"
    for argv in COMMANDS.values():  # warm the file cache, .pyc files and KSI's cache first
        once(argv, warm)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for n in range(rounds):
        for name, argv in COMMANDS.items():
            times[name].append(once(argv, tmp / f"cold-{n}" if name in COLD else warm))
    base = statistics.median(times[BASELINE])
    print(f"{rounds} rounds, medians (ratio to {BASELINE}):")
    failed = False
    for name, samples in times.items():
        med = statistics.median(samples)
        ratio = med / base
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            ok = ratio <= target
            failed |= not ok
            verdict = f"  target <= {target}x: {'ok' if ok else 'MISSED'}"
        print(f"  {name:<28} {med * 1000:7.1f} ms  {ratio:4.2f}x{verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))

"""How long does ``ksi view`` take on a big run, and how big is the page?

Writes a synthetic run directory of N attempts (default 10,000: 1,000 tasks x
10 attempts over 3 generations) with the files a real run leaves per attempt:
a prompt, a diff, agent logs (one attempt in 100 prints 1 MB), eval logs and
``record.json``; the journal holds one record per attempt with a realistic mix
of statuses. Then it times, in the same session, ``ksi report --json`` on the
run (the baseline: reading the journal and summarising it) and ``ksi view``
(everything the baseline does, plus reading every attempt's files and
rendering the page), each as a fresh ``ksi`` process, and prints both times,
their ratio, the report's size and ``ksi view``'s peak memory.

Targets (issue 14): the report written in under 10 s and under 50 MB at
10,000 attempts.

With ``--steps N`` every attempt also leaves a ``trajectory.json`` of about N
steps (a shell call each, one in seven failing, written by KSI's own writer),
and one attempt a 2,000-step one; the page then holds every attempt's
timeline within its budget (issue 27: figures for 1,000 attempts with
trajectories). With ``--browser`` (Playwright and Chromium, as the browser
tests use) it also times how long Chromium takes to open the page.

    python benchmarks/bench_view.py [--attempts 10000] [--steps 40] [--browser] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ksi.layout import RunLayout
from ksi.models import EvalResult, Usage
from ksi.records import AttemptRecord, SkippedFile, Timings
from ksi.rundir.config import RunConfig
from ksi.rundir.run_state import RunState, Session, save_run_state
from ksi.serialization import dumps_line, write_json_atomic
from ksi.trajectories import (
    TRAJECTORY_FILE,
    Step,
    ToolCall,
    ToolResult,
    Trajectory,
    write_trajectory,
)

ATTEMPTS_PER_TASK = 10
GENERATIONS = 3


def _diff(task: int, attempt: int, lines: int) -> str:
    body = [
        f"diff --git a/src/module_{task}.py b/src/module_{task}.py",
        f"--- a/src/module_{task}.py",
        f"+++ b/src/module_{task}.py",
        f"@@ -1,{lines} +1,{lines} @@",
    ]
    for i in range(lines):
        body.append(f"-    value_{i} = compute({i}, attempt={attempt - 1})")
        body.append(f"+    value_{i} = compute({i}, attempt={attempt})")
    return "\n".join(body) + "\n"


def trajectory(n_steps: int, rng: random.Random) -> Trajectory:
    """The prompt, then agent steps of one shell call each (one in seven fails)."""
    steps = [Step("user", "Fix the bug in src/module.py.\n" * 8)]
    for i in range(1, n_steps):
        fails = i % 7 == 0
        output = "".join(
            f"test_{j} ... {'FAIL' if fails and j == 3 else 'ok'}\n" for j in range(30)
        )
        steps.append(
            Step(
                "agent",
                f"I will run the tests again ({i}).",
                tool_calls=(ToolCall(f"c{i}", "Bash", {"command": f"pytest -q -k case_{i}"}),),
                results=(ToolResult(f"c{i}", output, exit_code=1 if fails else 0),),
                usage=Usage(input_tokens=rng.randint(500, 5000), output_tokens=120),
            )
        )
    return Trajectory(agent="command", steps=tuple(steps), model="bench-model")


def write_run(root: Path, n_attempts: int, n_steps: int = 0) -> None:
    rng = random.Random(14)
    layout = RunLayout(root)
    n_tasks = max(1, n_attempts // ATTEMPTS_PER_TASK)
    task_ids = [f"task-{i:05d}" for i in range(n_tasks)]
    save_run_state(
        layout,
        RunState(
            run_id="bench-view",
            config=RunConfig(agent="command", attempts=ATTEMPTS_PER_TASK, solved_threshold=1.0),
            task_ids=task_ids,
            sessions=(Session("2026-01-01T00:00:00+00:00", "2026-01-01T02:00:00+00:00"),),
            run_complete=True,
        ),
    )
    lines = []
    for t, task_id in enumerate(task_ids):
        for attempt in range(1, ATTEMPTS_PER_TASK + 1):
            if len(lines) >= n_attempts:
                break
            rel = f"attempts/{task_id}/{attempt}"
            adir = root / rel
            (adir / "eval").mkdir(parents=True)
            (adir / "prompt.md").write_text(f"Fix the bug in src/module_{t}.py.\n" * 8)
            (adir / "diff.patch").write_text(_diff(t, attempt, rng.randint(2, 120)))
            big = rng.random() < 0.01
            stdout = "".join(f"step {i}: reading files, running tests\n" for i in range(30_000))
            (adir / "agent.stdout.log").write_text(stdout if big else "done\n" * 40)
            (adir / "agent.stderr.log").write_text("warning: slow disk\n" * rng.randint(0, 50))
            roll = rng.random()
            status = "scored" if roll < 0.85 else ("unscored" if roll < 0.95 else "error")
            score = (
                (1.0 if rng.random() < 0.4 else rng.choice([0.0, 0.5]))
                if status == "scored"
                else None
            )
            eval_out = "".join(f"test_{i} ... {'ok' if score else 'FAIL'}\n" for i in range(60))
            (adir / "eval" / "eval.stdout.log").write_text(eval_out)
            (adir / "eval" / "eval.stderr.log").write_text("")
            record = AttemptRecord(
                task_id=task_id,
                attempt=attempt,
                status=status,
                score=score,
                agent="command",
                evaluator="command",
                environment="local",
                eval=EvalResult(
                    "scored" if status == "scored" else "timeout",
                    score,
                    exit_code=0 if score == 1.0 else 1,
                    stdout_tail=eval_out[-4096:],
                    details={"command": "pytest -q", "timeout_sec": 60},
                ),
                timings=Timings(seed=0.01, agent=30.0, capture=0.1, eval=2.0, total=32.1),
                usage=Usage(input_tokens=12_000, output_tokens=900, cost_usd=0.02),
                skipped_files=(SkippedFile("test_x.py", "test-named file edited: restored"),)
                if rng.random() < 0.02
                else (),
                error="EnvironmentFailure: container exited" if status == "error" else "",
                attempt_dir=rel,
                generation=1 + (attempt - 1) * GENERATIONS // ATTEMPTS_PER_TASK,
            )
            write_json_atomic(adir / "record.json", dumps_line(record), durable=False)
            if n_steps:
                steps = 2000 if not lines else max(2, rng.randint(n_steps // 2, n_steps * 3 // 2))
                write_trajectory(adir / TRAJECTORY_FILE, trajectory(steps, rng))
            lines.append(dumps_line(record))
    layout.journal.write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(args: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one ``ksi`` process.

    CPU time is quoted beside wall time because a loaded machine (other jobs on
    the same cores) stretches the wall time without changing the work done.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ksi", *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def open_in_chromium(page: Path) -> tuple[float, float] | None:
    """Milliseconds to DOMContentLoaded and to load in headless Chromium (None: no browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    chromium = os.environ.get("KSI_CHROMIUM") or shutil.which("chromium")
    if not chromium:
        return None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            tab = browser.new_page()
            tab.goto(page.resolve().as_uri(), timeout=300_000)
            ready, loaded = tab.evaluate(
                "() => { const t = performance.getEntriesByType('navigation')[0];"
                " return [t.domContentLoadedEventEnd, t.loadEventEnd]; }"
            )
        finally:
            browser.close()
    return float(ready), float(loaded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="write the run here and keep it")
    parser.add_argument("--steps", type=int, default=0, help="steps per trajectory (0: none)")
    parser.add_argument("--browser", action="store_true", help="time opening it in Chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp) / "run"
        start = time.perf_counter()
        write_run(root, args.attempts, args.steps)
        with_steps = f" with ~{args.steps}-step trajectories" if args.steps else ""
        print(
            f"wrote a {args.attempts}-attempt run{with_steps} in "
            f"{time.perf_counter() - start:.1f} s"
        )
        baseline, baseline_cpu = timed(["report", str(root), "--json"])
        out = root / "report.html"
        view, view_cpu = timed(["view", str(root), "-o", str(out)])
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        size_mb = out.stat().st_size / (1024 * 1024)
        print(f"ksi report --json (baseline): {baseline:.2f} s wall, {baseline_cpu:.2f} s CPU")
        print(
            f"ksi view:                     {view:.2f} s wall, {view_cpu:.2f} s CPU "
            f"({view / baseline:.1f}x the baseline's wall time)"
        )
        print(
            f"report size: {size_mb:.1f} MB   peak RSS of the largest ksi process: {peak_mb:.0f} MB"
        )
        if args.browser:
            opened = open_in_chromium(out)
            if opened is None:
                print("Chromium: not timed (no playwright or no chromium)")
            else:
                print(f"Chromium: DOMContentLoaded {opened[0]:.0f} ms, load {opened[1]:.0f} ms")
        print(
            f"targets: under 10 s ({'met' if view < 10 else 'MISSED'}), "
            f"under 50 MB ({'met' if size_mb < 50 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()

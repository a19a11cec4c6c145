"""Run directories for the view tests: real runs of a scripted agent, and hand-written journals.

:func:`make_mixed_run` runs the real ``ksi run`` with the ``command`` agent on
tasks chosen so every kind of outcome is present: solved, partial credit,
failed (with a long log), unscored (eval timeout), a tampered test file, and a
task whose id, output, diff and eval output are hostile HTML and terminal
escapes. Variant ``B`` fixes the failed task and breaks the solved one, so two
runs compare with one task gained and one lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ksi.layout import RunLayout
from ksi.models import EvalResult, Usage
from ksi.records import AttemptRecord
from ksi.rundir.config import RunConfig
from ksi.rundir.journal import Journal
from ksi.rundir.run_state import RunState, Session, save_run_state
from ksi.trajectories import (
    TRAJECTORY_FILE,
    Step,
    ToolCall,
    ToolResult,
    Trajectory,
    write_trajectory,
)
from tests.run_helpers import ksi, write_tasks

EVIL_ID = "evil<script>alert(1)</script>"

AGENT = r"""
import os, pathlib, sys
task = os.environ["KSI_TASK_ID"]
repo = pathlib.Path(os.environ["KSI_REPO"])
variant = sys.argv[1]
if task == "fixed":
    body = "a + b" if variant == "A" else "a - b"
    (repo / "calc.py").write_text(f"def add(a, b):\n    return {body}\n")
    print("wrote calc.py")
elif task == "partial":
    (repo / "half.txt").write_text("half done\n")
elif task == "broken":
    for i in range(4000):
        print(f"thinking step {i:05d} " + "." * 60)
    print("LAST LINE OF THE AGENT LOG")
    (repo / "answer.txt").write_text("42\n" if variant == "B" else "41\n")
elif task == "slow":
    print("nothing to do")
elif task.startswith("evil"):
    print("<script>window.__pwned = 1</script>")
    print("\x1b[31mRED\x1b[0m and a title escape \x1b]0;owned\x07 end")
    sys.stderr.write('</pre><img src=x onerror="window.__pwned = 2">\n')
    (repo / "page.html").write_text("<script>window.__pwned = 3</script>\n")
    (repo / "test_guard.py").write_text("assert True  # the agent weakened this test\n")
"""

TASKS: list[dict[str, Any]] = [
    {
        "task_id": "fixed",
        "prompt": "Make add() in calc.py add.",
        "files": {"calc.py": "def add(a, b):\n    return 0\n"},
        "eval": {"command": "python3 -c 'from calc import add; assert add(2, 3) == 5'"},
    },
    {
        "task_id": "partial",
        "prompt": "Do half of the work.",
        "eval": {
            "command": 'python3 -c "import json; '
            "json.dump({'score': 0.5}, open('score.json', 'w'))\""
        },
    },
    {
        "task_id": "broken",
        "prompt": "Write the answer to answer.txt.",
        "eval": {
            "command": "python3 -c \"import sys; got = open('answer.txt').read().strip(); "
            "print('FAIL: expected 42, got', got); sys.exit(got != '42')\""
        },
    },
    {
        "task_id": "slow",
        "prompt": "Nothing; the eval is too slow.",
        "eval": {"command": "sleep 10", "timeout_sec": 1},
    },
    {
        "task_id": EVIL_ID,
        "prompt": "Print <b>hostile</b> things. \u202eTXT.EXE",
        "files": {"test_guard.py": "assert 1 + 1 == 2\n"},
        "eval": {
            "command": 'sh -c \'echo "</pre><script>window.__pwned = 4</script>"; '
            'printf "\\033[2Jcleared\\n"; exit 1\''
        },
    },
]


def make_mixed_run(tmp: Path, name: str, variant: str = "A") -> Path:
    """A real run directory of :data:`TASKS` with the scripted agent (variant A or B)."""
    agent = tmp / "agent.py"
    agent.write_text(AGENT)
    tasks = write_tasks(tmp / "tasks.jsonl", TASKS)
    run_dir = tmp / name
    result = ksi(
        "run",
        str(tasks),
        "--agent",
        "command",
        "--agent-option",
        f"cmd=python3 {agent} {variant}",
        "--run-dir",
        str(run_dir),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return run_dir


def record(
    task_id: str, attempt: int, score: float | None, *, generation: int = 1, **fields: Any
) -> AttemptRecord:
    """A journal record of a finished attempt (scored when ``score`` is a number)."""
    ev = (
        EvalResult("scored", score, exit_code=0 if score == 1.0 else 1)
        if score is not None
        else EvalResult("timeout", None, details={"timeout_sec": 5})
    )
    return AttemptRecord(
        task_id=task_id,
        attempt=attempt,
        status="scored" if score is not None else "unscored",
        score=score,
        agent="command",
        evaluator="command",
        environment="local",
        eval=ev,
        attempt_dir=f"attempts/{task_id}/{attempt}",
        generation=generation,
        **fields,
    )


def write_run(
    root: Path,
    task_ids: list[str],
    records: list[AttemptRecord],
    *,
    config: dict[str, Any] | None = None,
) -> Path:
    """A run directory holding exactly ``records`` (run.json and journal, no attempt files)."""
    layout = RunLayout(root)
    root.mkdir(parents=True)
    save_run_state(
        layout,
        RunState(
            run_id=root.name,
            config=RunConfig(
                **{"agent": "command", "attempts": 1, "solved_threshold": 1.0, **(config or {})}
            ),
            task_ids=task_ids,
            sessions=(Session("2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00"),),
            run_complete=True,
        ),
    )
    journal = Journal(layout.journal)
    try:
        for rec in records:
            journal.append(rec)
    finally:
        journal.close()
    return root


GENERATIONS_DEMO = Path(__file__).resolve().parent.parent / "examples" / "generations"


def make_generations_run(run_dir: Path) -> Path:
    """A real ``ksi run --generations 3`` of examples/generations with its scripted agent.

    ``greet`` is a hold-out (run every generation, never learned from), so it
    stays unsolved while the notes of generation 1 let generation 2 solve the rest.
    """
    agent = f"{GENERATIONS_DEMO / 'scripted_agent.py'}:ScriptedAgent"
    result = ksi("run", str(GENERATIONS_DEMO / "tasks.jsonl"), "--agent", agent,
                 "--generations", "3", "--strategy", "all", "--holdout-task-ids", "greet",
                 "--run-dir", str(run_dir))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return run_dir


HOSTILE_TOOL = "<b onclick='window.__pwned = 7'>Bash</b>"
HOSTILE_OUTPUT = "</pre><script>window.__pwned = 5</script>\x1b[31mRED-STEP\x1b[0m"


def steps_trajectory(n_steps: int, *, hostile: bool = False) -> Trajectory:
    """A trajectory of ``n_steps`` (the prompt, then agent steps each running one command;
    every seventh fails), with hostile text in its arguments and outputs when asked."""
    steps = [Step("user", "Fix the bug in calc.py.")]
    for i in range(1, n_steps):
        fails = i % 7 == 0
        command = f"pytest -q tests/test_{i:05d}.py"
        output = f"step {i:05d} output\n" + ("1 failed\n" if fails else "ok\n")
        if hostile:
            command, output = f"<img src=x onerror='window.__pwned = 6'> {i}", HOSTILE_OUTPUT
        steps.append(
            Step(
                "agent",
                f"Running the tests, try {i:05d}.",
                tool_calls=(
                    ToolCall(
                        f"call-{i}", HOSTILE_TOOL if hostile else "Bash", {"command": command}
                    ),
                ),
                results=(ToolResult(f"call-{i}", output, exit_code=1 if fails else 0),),
                usage=Usage(input_tokens=100 + i, output_tokens=20),
            )
        )
    return Trajectory(agent="command", steps=tuple(steps), model="mock-model")


def make_steps_run(
    root: Path, n_steps: int, *, hostile: bool = False, task_id: str = "calc"
) -> Path:
    """A run of one scored attempt whose ``trajectory.json`` has ``n_steps`` steps."""
    run = write_run(root, [task_id], [record(task_id, 1, 0.0)])
    adir = run / "attempts" / task_id / "1"
    adir.mkdir(parents=True)
    write_trajectory(adir / TRAJECTORY_FILE, steps_trajectory(n_steps, hostile=hostile))
    return run

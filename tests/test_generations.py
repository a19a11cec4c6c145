"""Generations: the loop, notes that change outcomes, the control arm, resume by phase.

The demo in examples/generations (tasks whose tests check a detail only the
eval output reveals, and a scripted stand-in for an LLM agent that reads
KNOWLEDGE.md) is the subject: it fails in generation 1 and, with notes,
solves in generation 2.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ksi
from ksi.errors import RunError, UserInputError
from ksi.generations.phases import read_phases
from ksi.hookspecs import hookimpl
from ksi.knowledge.models import DistillRequest, DistillResult, Knowledge, Note, PlanRequest
from ksi.knowledge.render import IndexedNotes
from ksi.knowledge.store import read_knowledge, write_knowledge
from tests.docker_support import needs_bwrap
from tests.run_helpers import journal_lines, write_tasks
from tests.run_helpers import ksi as ksi_cli

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "generations"
DEMO_TASKS = DEMO / "tasks.jsonl"
AGENT = f"{DEMO / 'scripted_agent.py'}:ScriptedAgent"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "generations"


def demo(run_dir: Path, **options: Any) -> ksi.RunSummary:  # type: ignore[name-defined]
    return ksi.run(DEMO_TASKS, agent=AGENT, run_dir=run_dir, concurrency=4, **options)


def rates(summary: Any) -> list[float]:
    return [g.solve_rate for g in summary.generations.generations]


def test_notes_change_outcomes_generation_2_solves_what_generation_1_failed(
    tmp_path: Path,
) -> None:
    summary = demo(tmp_path / "run", generations=3, wipe_workspace=False)
    gens = summary.generations.generations
    assert [g.generation for g in gens] == [1, 2], "retry-unsolved stops once all are solved"
    assert (gens[0].tasks_attempted, gens[0].solved) == (4, 1)
    assert (gens[1].tasks_attempted, gens[1].solved, gens[1].newly_solved) == (3, 3, 3)
    assert rates(summary)[0] < rates(summary)[1]
    assert gens[1].cumulative_solved == 4 and gens[1].knowledge_from == 1
    assert summary.run_complete and summary.solved_tasks == 4
    by_task = {t.task_id: t for t in summary.generations.tasks}
    assert by_task["greet"].best_generation == 2 and by_task["version"].best_generation == 1

    # What generation 2 got: KNOWLEDGE.md beside repo/, named in the prompt and the record.
    records = {(r["task_id"], r["attempt"]): r for r in journal_lines(tmp_path / "run")}
    greet = records[("greet", 2)]
    assert greet["generation"] == 2 and records[("greet", 1)]["knowledge"] is None
    attempt = tmp_path / "run" / greet["attempt_dir"]
    notes = (attempt / "workspace" / "KNOWLEDGE.md").read_text()
    assert "AssertionError: 'Hello, Ada!' != 'Howdy, Ada!'" in notes
    assert hashlib.sha256(notes.encode()).hexdigest() == greet["knowledge"]["sha256"]
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None
    assert set(greet["knowledge"]["note_ids"]) <= {n.id for n in stored.notes}
    assert "KNOWLEDGE.md" in (attempt / "prompt.md").read_text()
    # Never graded, never in the diff or the captured repo.
    assert not (attempt / "captured" / "repo" / "KNOWLEDGE.md").exists()
    assert "KNOWLEDGE" not in (attempt / "diff.patch").read_text()
    # Every note cites the attempts it came from, and they exist.
    for note in stored.notes:
        assert note.attempts and all((tmp_path / "run" / a).is_dir() for a in note.attempts)
    assert (tmp_path / "run" / "knowledge" / "1" / "KNOWLEDGE.md").is_file()


def test_knowledge_none_is_the_control_arm_and_does_not_improve(tmp_path: Path) -> None:
    summary = demo(tmp_path / "run", generations=3, knowledge="none")
    gens = summary.generations.generations
    assert [g.solved for g in gens] == [1, 0, 0]
    assert [g.tasks_attempted for g in gens] == [4, 3, 3]
    assert all(g.knowledge_from is None and not g.distilled for g in gens)
    assert not (tmp_path / "run" / "knowledge").exists()
    assert all(r["knowledge"] is None for r in journal_lines(tmp_path / "run"))


def test_generations_1_is_a_plain_run_with_a_generation_number(tmp_path: Path) -> None:
    summary = demo(tmp_path / "run")
    assert summary.generations is None and summary.n_attempts == 4
    run = tmp_path / "run"
    assert sorted(p.name for p in (run / "attempts" / "greet").iterdir()) == ["1"]
    assert not (run / "knowledge").exists() and not (run / "generations.jsonl").exists()
    assert {r["generation"] for r in journal_lines(run)} == {1}


def test_a_plain_run_resumed_with_more_generations_learns_from_its_first(tmp_path: Path) -> None:
    demo(tmp_path / "run")
    summary = demo(tmp_path / "run", generations=3)
    gens = summary.generations.generations
    assert [(g.tasks_attempted, g.solved) for g in gens] == [(4, 1), (3, 3)]
    assert gens[1].knowledge_from == 1 and summary.run_complete


def test_notes_travel_in_the_job_to_worker_processes(tmp_path: Path) -> None:
    """Each job runs in a worker process (``processes``): the notes must be in the job."""
    summary = demo(tmp_path / "run", generations=2, executor="processes")
    assert [g.solved for g in summary.generations.generations] == [1, 3]


def test_unscored_attempts_never_reach_the_notes(tmp_path: Path) -> None:
    """An attempt whose eval times out is unscored: its output, message and id stay out."""
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": "scored",
                "prompt": "p",
                "eval": {"command": "echo SCORED-EVAL-OUTPUT; exit 1", "timeout_sec": 30},
            },
            {
                "task_id": "unscored",
                "prompt": "p",
                "eval": {"command": "echo UNSCORED-EVAL-OUTPUT; sleep 30", "timeout_sec": 1},
            },
        ],
    )
    cmd = 'echo "FINAL-$KSI_TASK_ID"; echo x > repo/f.txt'
    summary = ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": cmd},
        run_dir=tmp_path / "run",
        generations=2,
    )
    statuses = {(r.task_id, r.generation): r.status for r in summary.records}
    assert statuses[("unscored", 1)] == "unscored" and statuses[("scored", 1)] == "scored"
    stored = (tmp_path / "run" / "knowledge" / "1" / "notes.json").read_text()
    assert "SCORED-EVAL-OUTPUT" in stored and "FINAL-scored" in stored
    assert "UNSCORED-EVAL-OUTPUT" not in stored and "FINAL-unscored" not in stored
    assert "attempts/unscored/" not in stored
    given = tmp_path / "run" / "knowledge" / "1" / "KNOWLEDGE.md"
    assert "UNSCORED-EVAL-OUTPUT" not in given.read_text()


def test_eval_output_can_be_kept_out_of_the_notes(tmp_path: Path) -> None:
    summary = demo(tmp_path / "run", generations=2, knowledge_eval_output="none")
    notes = (tmp_path / "run" / "knowledge" / "1" / "notes.json").read_text()
    assert "AssertionError" not in notes
    assert [g.solved for g in summary.generations.generations] == [1, 0]


def test_holdouts_run_every_generation_are_reported_apart_and_never_learned_from(
    tmp_path: Path,
) -> None:
    summary = demo(tmp_path / "run", generations=2, holdout_task_ids=["greet"], strategy="all")
    gens = summary.generations.generations
    assert [(g.tasks_attempted, g.holdout_attempted) for g in gens] == [(3, 1), (3, 1)]
    assert [g.holdout_solved for g in gens] == [0, 0], "no notes about a hold-out: no gain"
    assert [g.solved for g in gens] == [1, 3]
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None
    assert all(n.task_id != "greet" for n in stored.notes)
    assert all("greet" not in a for n in stored.notes for a in n.attempts)
    assert summary.generations.holdout_task_ids == ("greet",)


def test_a_bad_holdout_id_or_strategy_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    with pytest.raises(UserInputError, match="--holdout-task-ids: unknown task id"):
        demo(tmp_path / "a", generations=2, holdout_task_ids=["nope"])
    with pytest.raises(Exception, match="strateg"):
        demo(tmp_path / "b", generations=2, strategy="nope")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    result = ksi_cli("run", str(DEMO_TASKS), "--agent", AGENT, "--knowledge", "some",
                     "--run-dir", str(tmp_path / "c"))  # fmt: skip
    assert result.returncode == 2 and "--knowledge" in result.stderr


def test_resume_refuses_changed_generation_options(tmp_path: Path) -> None:
    demo(tmp_path / "run", generations=2)
    with pytest.raises(RunError, match="knowledge: the run has 'notes'"):
        demo(tmp_path / "run", generations=2, knowledge="none")
    # Generation g's attempt numbers follow from --attempts: more would renumber them.
    with pytest.raises(RunError, match="attempts: the run has 1, this command has 2"):
        demo(tmp_path / "run", generations=2, attempts=2)
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["config"]["generations"] == 2
    assert run_json["config"]["distiller"] == "evidence"
    assert run_json["config"]["strategy"] == "retry-unsolved"


def test_stored_notes_are_never_rewritten(tmp_path: Path) -> None:
    demo(tmp_path / "run", generations=2)
    before = (tmp_path / "run" / "knowledge" / "1" / "notes.json").read_bytes()
    with pytest.raises(FileExistsError, match="generation 1 are stored"):
        write_knowledge(tmp_path / "run", Knowledge(generation=1, distiller="other"))
    assert (tmp_path / "run" / "knowledge" / "1" / "notes.json").read_bytes() == before


def test_knowledge_budget_bounds_what_one_attempt_receives(tmp_path: Path) -> None:
    demo(tmp_path / "run", generations=2, knowledge_budget_bytes=600)
    for r in journal_lines(tmp_path / "run"):
        if r["generation"] == 2:
            assert r["knowledge"] is not None
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None
    rendered = IndexedNotes.of(stored).render("greet", 600)
    assert 0 < len(rendered.text.encode()) <= 600 and rendered.left_out > 0


# -- plugins: strategies, distillers, observers --------------------------------------


class OnlyGreet:
    name = "only-greet"
    aliases = ()
    description = "Generation 2 on: greet only."

    def plan(self, request: PlanRequest) -> list[str]:
        if request.generation == 1:
            return [t.task_id for t in request.tasks]
        return [t.task_id for t in request.tasks if t.task_id == "greet" and not t.solved]


class _Strategies:
    @staticmethod
    @hookimpl
    def ksi_register_strategies(register: Any) -> None:
        register(OnlyGreet)


def test_hook_ksi_register_strategies(tmp_path: Path, ksi_plugin: Any) -> None:
    ksi_plugin(_Strategies, name="only-greet-plugin")
    summary = demo(tmp_path / "run", generations=3, strategy="only-greet")
    gens = summary.generations.generations
    assert [g.tasks_attempted for g in gens] == [4, 1]
    assert [e.task_ids for e in read_phases(tmp_path / "run") if e.kind == "started"] == [
        ("greet", "gateway-port", "log-level", "version"),
        ("greet",),
    ]


class InsightDistiller:
    name = "insight"
    aliases = ()
    description = "One insight per task, plus one citing an attempt that does not exist."

    def distill(self, request: DistillRequest) -> DistillResult:
        notes = []
        for task in request.evidence:
            cited = task.attempts[0].attempt_id
            notes.append(Note(f"i-{task.task_id}", "insight", "INSIGHT-TEXT", task.task_id,
                              attempts=(cited,), generation=request.generation))  # fmt: skip
            notes.append(Note(f"x-{task.task_id}", "pitfall", "MADE-UP", task.task_id,
                              attempts=("attempts/nowhere/9",)))  # fmt: skip
        return DistillResult(notes=tuple(notes))


class BrokenDistiller:
    name = "broken"
    aliases = ()
    description = "Always raises."

    def distill(self, request: DistillRequest) -> DistillResult:
        raise RuntimeError("the model said no")


class _Distillers:
    @staticmethod
    @hookimpl
    def ksi_register_distillers(register: Any) -> None:
        register(InsightDistiller)
        register(BrokenDistiller)


def test_hook_ksi_register_distillers(tmp_path: Path, ksi_plugin: Any) -> None:
    ksi_plugin(_Distillers, name="distillers-plugin")
    demo(tmp_path / "run", generations=2, distiller="insight")
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "insight" and not stored.fallback
    texts = {n.text for n in stored.notes}
    assert "INSIGHT-TEXT" in texts and "MADE-UP" not in texts, "unknown attempt ids dropped"
    greet = next(r for r in journal_lines(tmp_path / "run") if r["attempt"] == 2)
    assert greet["knowledge"]["note_ids"][0].startswith("i-")


def test_a_failing_distiller_falls_back_to_evidence_notes_and_says_so(
    tmp_path: Path, ksi_plugin: Any
) -> None:
    ksi_plugin(_Distillers, name="distillers-plugin")
    summary = demo(tmp_path / "run", generations=2, distiller="broken")
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "evidence"
    assert "the model said no" in stored.fallback
    assert any("the model said no" in w for w in summary.warnings)
    assert summary.generations.generations[0].fallback == stored.fallback
    assert summary.generations.generations[1].solved == 3, "the fallback notes still help"


def test_a_generation_left_without_notes_passes_on_the_newest_earlier_ones(
    tmp_path: Path, ksi_plugin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Generation 2's distiller and its evidence fallback both fail: generation 3 gets
    generation 1's notes, never nothing (failure injected into the fallback)."""
    import ksi.generations.steps as generations

    real = generations.evidence_notes

    def fails_in_generation_2(request: DistillRequest) -> tuple[Note, ...]:
        if request.generation == 2:
            raise OSError("injected failure")
        return real(request)

    monkeypatch.setattr(generations, "evidence_notes", fails_in_generation_2)
    ksi_plugin(_Distillers, name="distillers-plugin")
    summary = demo(tmp_path / "run", generations=3, strategy="all", distiller="broken")
    gens = summary.generations.generations
    assert [g.knowledge_from for g in gens] == [None, 1, 1]
    assert not gens[1].distilled and "injected failure" in gens[1].not_distilled
    assert any("injected failure" in w for w in summary.warnings)
    assert [g.solved for g in gens] == [1, 4, 4], "strategy all: every task, every time"
    assert sorted(p.name for p in (tmp_path / "run" / "knowledge").iterdir()) == ["1", "3"]


class _Observer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, Any]] = []

    @hookimpl
    def ksi_generation_started(self, generation: int, task_ids: tuple[str, ...]) -> None:
        self.calls.append(("started", generation, task_ids))

    @hookimpl
    def ksi_generation_finished(self, generation: int, knowledge: Any) -> None:
        self.calls.append(("finished", generation, knowledge and knowledge.generation))


def test_hook_ksi_generation_started(tmp_path: Path, ksi_plugin: Any) -> None:
    observer = _Observer()
    ksi_plugin(observer, name="generation-observer")
    demo(tmp_path / "run", generations=3)
    started = [c for c in observer.calls if c[0] == "started"]
    assert started == [
        ("started", 1, ("greet", "gateway-port", "log-level", "version")),
        ("started", 2, ("greet", "gateway-port", "log-level")),
    ]


def test_hook_ksi_generation_finished(tmp_path: Path, ksi_plugin: Any) -> None:
    observer = _Observer()
    ksi_plugin(observer, name="generation-observer")
    demo(tmp_path / "run", generations=3)
    assert [c for c in observer.calls if c[0] == "finished"] == [
        ("finished", 1, 1),
        ("finished", 2, 2),
    ]


# -- transfer: export and seed ---------------------------------------------------------


def test_exported_notes_seed_a_new_run(tmp_path: Path) -> None:
    demo(tmp_path / "first", generations=2)
    bundle = tmp_path / "bundle.json"
    result = ksi_cli("knowledge", "export", str(tmp_path / "first"), "-o", str(bundle))
    assert result.returncode == 0, result.stderr
    summary = demo(tmp_path / "second", seed_knowledge=str(bundle))
    assert summary.solved_tasks == 4, "frozen notes solve the tasks in generation 1"
    seeded = read_knowledge(tmp_path / "second", 0)
    assert seeded is not None and all(n.id.startswith("seed-") for n in seeded.notes)
    first = journal_lines(tmp_path / "second")[0]
    assert first["knowledge"]["generation"] == 0
    run_json = json.loads((tmp_path / "second" / "run.json").read_text())
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert run_json["config"]["seed_knowledge_sha256"] == digest


def test_a_bad_bundle_is_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    fields = {"format": "ksi-knowledge-bundle", "version": 1, "source_run": "r", "generation": 1}
    bad.write_text(json.dumps({**fields, "notes": [{"id": "a"}]}))
    result = ksi_cli("run", str(DEMO_TASKS), "--agent", AGENT, "--seed-knowledge", str(bad),
                     "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert result.returncode == 2
    assert str(bad) in result.stderr and "$.notes[0]" in result.stderr
    assert not (tmp_path / "run").exists()
    empty = ksi_cli("knowledge", "export", str(tmp_path), "-o", str(tmp_path / "x.json"))
    assert empty.returncode == 2


# -- the command line and the done-when check -------------------------------------------


def test_cli_shows_generations_with_notes_and_none_arm(tmp_path: Path) -> None:
    args = ("run", str(DEMO_TASKS), "--agent", AGENT, "--generations", "3")
    notes = ksi_cli(*args, "--run-dir", str(tmp_path / "notes"),
                    "--output-json", str(tmp_path / "notes.json"))  # fmt: skip
    assert notes.returncode == 0, notes.stderr
    assert "per generation:" in notes.stdout
    lines = notes.stdout.splitlines()
    gen_rows = lines[lines.index("per generation:") + 2 :][:2]
    assert gen_rows[0].split()[:4] == ["1", "4", "1", "25%"]
    assert gen_rows[1].split()[:4] == ["2", "3", "3", "100%"]
    report = json.loads((tmp_path / "notes.json").read_text())
    assert [g["solve_rate"] for g in report["summary"]["generations"]["generations"]] == [
        0.25,
        1.0,
    ]
    none = ksi_cli(*args, "--knowledge", "none", "--run-dir", str(tmp_path / "none"))
    assert none.returncode == 0, none.stderr
    again = ksi_cli("report", str(tmp_path / "none"))
    for out in (none.stdout, again.stdout):
        rows = out.splitlines()
        gen_rows = rows[rows.index("per generation:") + 2 :][:3]
        assert [r.split()[2] for r in gen_rows] == ["1", "0", "0"]


def _without_eval(tmp_path: Path, task_id: str) -> Path:
    """The demo tasks, ``task_id``'s eval removed: that task can never be scored."""
    tasks = [json.loads(line) for line in DEMO_TASKS.read_text().splitlines()]
    for task in tasks:
        if task["task_id"] == task_id:
            del task["eval"]
    return write_tasks(tmp_path / "tasks.jsonl", tasks)


def test_a_task_that_cannot_be_scored_runs_once_and_the_figures_agree_with_the_notes(
    tmp_path: Path,
) -> None:
    """Not "unsolved" for retry-unsolved (re-run in every generation, it left generation 3
    with "1 task, 0 solved, 0%"), and not in the rates: the table says what the notes say."""
    run_dir, tasks = tmp_path / "run", _without_eval(tmp_path, "greet")
    args = ("run", str(tasks), "--agent", AGENT)
    out = ksi_cli(*args, "--generations", "3", "--run-dir", str(run_dir))
    assert out.returncode == 0, out.stderr
    assert [r["task_id"] for r in journal_lines(run_dir)].count("greet") == 1
    lines = out.stdout.splitlines()
    rows = lines[lines.index("per generation:") + 2 :][:3]
    assert rows[0].split()[:6] == ["1", "4", "(1", "unscored)", "1", "33%"]
    assert rows[1].split()[:4] == ["2", "2", "2", "100%"]
    assert rows[2].startswith("generations: 2 run of 3"), "nothing left: solved or unscorable"
    notes = (run_dir / "knowledge" / "1" / "KNOWLEDGE.md").read_text()
    assert "Generation 1: 1 of 3 scored tasks solved." in notes
    # Resumed: nothing to run; the same figures from Python.
    summary = ksi.run(tasks, agent=AGENT, run_dir=run_dir, generations=3)
    first = summary.generations.generations[0]
    assert (first.tasks_attempted, first.tasks_scored, first.solved) == (4, 3, 1)
    assert first.solve_rate == pytest.approx(1 / 3)


def test_strategy_all_still_runs_a_task_that_cannot_be_scored(tmp_path: Path) -> None:
    tasks = _without_eval(tmp_path, "greet")
    summary = ksi.run(tasks, agent=AGENT, run_dir=tmp_path / "run", generations=2, strategy="all")
    gens = summary.generations.generations
    assert [(g.tasks_attempted, g.tasks_scored) for g in gens] == [(4, 3), (4, 3)]


def test_dry_run_says_how_the_loop_will_run(tmp_path: Path) -> None:
    result = ksi_cli("run", str(DEMO_TASKS), "--agent", AGENT, "--generations", "3",
                     "--holdout-task-ids", "version", "--dry-run",
                     "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "generations: up to 3 (strategy retry-unsolved, knowledge notes, distiller evidence, "
        "hold-outs version)" in result.stdout
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.sandbox
@needs_bwrap
def test_notes_reach_an_agent_in_the_bubblewrap_sandbox(tmp_path: Path) -> None:
    summary = demo(tmp_path / "run", generations=2, environment="sandbox")
    assert [g.solved for g in summary.generations.generations] == [1, 3]


# -- resume by phase: a real `ksi run` killed with SIGKILL ------------------------------


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ksi", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(predicate: Any, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 90
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _kill(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _phase_kinds(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.kind, e.generation) for e in read_phases(run_dir)]


def test_kill_9_mid_attempts_then_resume_runs_each_attempt_once(tmp_path: Path) -> None:
    """Killed while generation 2's attempts run: the resume finishes them, then goes on."""
    run_dir = tmp_path / "run"
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": f"t{i}", "prompt": "p", "eval": {"command": "test -f done.txt"}}
         for i in range(3)],
    )  # fmt: skip
    # Generation 1 fails; generation 2 (it has notes) waits until the test kills the run,
    # then, resumed, solves.
    gate = tmp_path / "gate"
    cmd = (
        f"if [ -f KNOWLEDGE.md ]; then if [ ! -f {gate} ]; then touch {gate}; sleep 300; fi; "
        "echo ok > repo/done.txt; fi"
    )
    args = ["run", str(tasks), "--agent", "command", "--agent-option", f"cmd={cmd}",
            "--generations", "3", "--concurrency", "1", "--run-dir", str(run_dir)]  # fmt: skip
    proc = _start(args)
    _wait_for(gate.exists, proc, "generation 2's first attempt")
    _kill(proc)
    assert _phase_kinds(run_dir) == [("started", 1), ("distilled", 1), ("started", 2)]
    resumed = ksi_cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    keys = [(r["task_id"], r["attempt"]) for r in journal_lines(run_dir)]
    assert sorted(keys) == sorted({(f"t{i}", a) for i in range(3) for a in (1, 2)})
    second = [r for r in journal_lines(run_dir) if r["generation"] == 2]
    assert [r["knowledge"]["generation"] for r in second] == [1, 1, 1]
    assert _phase_kinds(run_dir) == [
        ("started", 1), ("distilled", 1), ("started", 2), ("distilled", 2),
    ]  # fmt: skip
    assert "solved: 3/3" in resumed.stdout


def test_kill_9_mid_distillation_then_resume_distils_exactly_once(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    marker = tmp_path / "distilling"
    distiller = f"{FIXTURES / 'components.py'}:BlockingDistiller"
    args = ["run", str(DEMO_TASKS), "--agent", AGENT, "--generations", "3",
            "--distiller", distiller, "--distiller-option", f"marker={marker}",
            "--run-dir", str(run_dir)]  # fmt: skip
    proc = _start(args)
    _wait_for(marker.exists, proc, "the distillation of generation 1")
    _kill(proc)
    assert _phase_kinds(run_dir) == [("started", 1)]
    assert not (run_dir / "knowledge" / "1").exists(), "no half-written notes"
    records_before = journal_lines(run_dir)
    assert len(records_before) == 4

    resumed = ksi_cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert _phase_kinds(run_dir) == [
        ("started", 1), ("distilled", 1), ("started", 2), ("distilled", 2),
    ]  # fmt: skip
    assert journal_lines(run_dir)[:4] == records_before, "generation 1 is not run again"
    assert len(journal_lines(run_dir)) == 7
    # Called once per generation by the run that finished it (plus the killed call).
    calls = Path(f"{marker}.calls").read_text().split()
    assert calls == ["1", "1", "2"]
    assert sorted(p.name for p in (run_dir / "knowledge").iterdir()) == ["1", "2"]
    assert "solved: 4/4" in resumed.stdout


# -- the agent distiller: a real agent process writes the notes ---------------------------

WRITE_NOTES = FIXTURES / "write_notes.py"
COSTLY = f"{FIXTURES / 'components.py'}:CostlyAgent"


def _agent_distiller(mode: str, **extra: str) -> dict[str, str]:
    return {"agent": "command", "cmd": f"python3 {WRITE_NOTES} {mode}", **extra}


def test_agent_distiller_notes_from_a_command_agent_change_outcomes(tmp_path: Path) -> None:
    summary = demo(
        tmp_path / "run",
        generations=2,
        distiller="agent",
        distiller_options=_agent_distiller("good", with_evidence="false"),
    )
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "agent" and not stored.fallback
    assert {n.kind for n in stored.notes} == {"insight"}, "only the agent's notes"
    texts = " ".join(n.text for n in stored.notes)
    assert "AGENT-INSIGHT" in texts and "MADE-UP" not in texts, "unknown attempt ids dropped"
    assert all(n.attempts and n.applies_when == "always" for n in stored.notes)
    # The agent ran as an attempt of its own, kept in distill/1/ for inspection.
    assert list((tmp_path / "run" / "distill" / "1").rglob("agent.stdout.log"))
    assert [g.solved for g in summary.generations.generations] == [1, 3]


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("garbage", "is not JSON"),
        ("wrong-kind", "does not follow schema.json: invalid value (kind: expected one of"),
    ],
)
def test_agent_distiller_falls_back_to_evidence_notes_and_says_why(
    tmp_path: Path, mode: str, why: str
) -> None:
    summary = demo(
        tmp_path / "run", generations=2, distiller="agent",
        distiller_options=_agent_distiller(mode),
    )  # fmt: skip
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "evidence"
    assert why in stored.fallback and "agent distiller" in stored.fallback
    assert any(why in w for w in summary.warnings)
    assert [g.solved for g in summary.generations.generations] == [1, 3]


def test_agent_distiller_cost_counts_toward_spend_and_max_cost(tmp_path: Path) -> None:
    options = {"agent": COSTLY, "cmd": f"python3 {WRITE_NOTES} good"}
    summary = demo(
        tmp_path / "run", generations=3, distiller="agent", distiller_options=options,
        max_cost_usd=0.4,
    )  # fmt: skip
    gens = summary.generations.generations
    assert [g.generation for g in gens] == [1], "the distillation's $0.50 passed --max-cost"
    assert gens[0].distill_cost_usd == 0.5 and gens[0].cost_usd == 0.5
    assert not summary.run_complete and "max_cost" in summary.stopped_reason
    # Raising the budget resumes: generation 2 runs, distilled once more.
    summary = demo(
        tmp_path / "run", generations=3, distiller="agent", distiller_options=options,
        max_cost_usd=5.0,
    )  # fmt: skip
    assert [g.distill_cost_usd for g in summary.generations.generations] == [0.5, 0.5]
    assert summary.run_complete


def test_agent_distiller_options_are_checked_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Exception, match="no-such-agent"):
        demo(tmp_path / "run", generations=2, distiller="agent",
             distiller_options={"agent": "no-such-agent"})  # fmt: skip
    for name in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN",
                 "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = ksi_cli("run", str(DEMO_TASKS), "--agent", AGENT, "--generations", "2",
                     "--distiller", "agent", "--distiller-option", "agent=claude-code",
                     "--run-dir", str(tmp_path / "run"))  # fmt: skip
    assert result.returncode == 2
    assert "--distiller-option" in result.stderr and "no credentials" in result.stderr
    assert not (tmp_path / "run").exists()

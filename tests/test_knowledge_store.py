"""The knowledge store (issue 25 §1): one SQLite file of evidence and notes, shared by runs.

Real ``ksi run`` processes write real SQLite files; the offline demo
(examples/generations: tasks whose tests check a detail only the eval output
reveals, and a scripted stand-in for an LLM agent that reads KNOWLEDGE.md) is
the subject wherever a run is needed.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ksi.generations.phases import read_phases
from ksi.generations.run_store import open_run_store
from ksi.knowledge.db import KnowledgeDB
from ksi.knowledge.db_schema import SCHEMA_VERSION
from ksi.knowledge.models import Knowledge, Note
from ksi.knowledge.render import IndexedNotes
from ksi.knowledge.retrieval import NoteIndex
from ksi.knowledge.store import read_knowledge
from tests.run_helpers import journal_lines, write_tasks
from tests.run_helpers import ksi as ksi_cli

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "generations"
DEMO_TASKS = DEMO / "tasks.jsonl"
AGENT = f"{DEMO / 'scripted_agent.py'}:ScriptedAgent"
SLOW_STORE = Path(__file__).parent / "fixtures" / "knowledge" / "slow_store.py"


def demo_args(run_dir: Path, *extra: str) -> list[str]:
    return ["run", str(DEMO_TASKS), "--agent", AGENT, "--run-dir", str(run_dir),
            "--concurrency", "4", *extra]  # fmt: skip


def run_demo(run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    done = ksi_cli(*demo_args(run_dir, *extra), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def generation_rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    start = lines.index("per generation:") + 2
    rows = []
    for line in lines[start:]:
        if not line[:1].isdigit():
            break
        rows.append(line.split())
    return rows


def run_id(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["run_id"])


def store_rows(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def scored_attempts(run_dir: Path) -> dict[str, float]:
    """Attempt dir -> score of the newest try of each scored attempt in the journal."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for r in journal_lines(run_dir):
        latest[(r["task_id"], r["attempt"])] = r
    return {r["attempt_dir"]: r["score"] for r in latest.values() if r["status"] == "scored"}


# -- sharing a store across runs ---------------------------------------------------------


def test_a_second_run_on_the_first_runs_store_solves_in_generation_1(tmp_path: Path) -> None:
    store = tmp_path / "demo.sqlite"
    first = run_demo(tmp_path / "first", "--generations", "3", "--knowledge-db", str(store))
    assert [r[:3] for r in generation_rows(first.stdout)] == [["1", "4", "1"], ["2", "3", "3"]]

    second = run_demo(tmp_path / "second", "--generations", "3", "--knowledge-db", str(store))
    rows = generation_rows(second.stdout)
    assert [r[:3] for r in rows] == [["1", "4", "4"]], "what the first needed two generations for"
    assert rows[0][-2] == "0", "generation 1 got the notes read from the store (generation 0)"

    # The run records the store and the notes it read, so it can be reproduced.
    run = tmp_path / "second"
    config = json.loads((run / "run.json").read_text())["config"]
    assert config["knowledge_db"] == str(store)
    read = read_knowledge(run, 0)
    assert read is not None and read.distiller == f"store:{store}"
    first_id = run_id(tmp_path / "first")
    assert read.notes and all(n.id.startswith(f"{first_id}-") for n in read.notes)
    for record in journal_lines(run):
        assert record["knowledge"]["generation"] == 0
        assert set(record["knowledge"]["note_ids"]) <= {n.id for n in read.notes}
    # ... and adds to the store: its evidence and its own notes.
    stats = json.loads(ksi_cli("knowledge", "stats", "--knowledge-db", str(store), "--json").stdout)
    assert stats["runs"] == 2
    assert stats["attempts"] == len(scored_attempts(tmp_path / "first")) + 4
    assert store_rows(store, "SELECT generation FROM generations WHERE run_id = ?", run_id(run))


def test_a_changed_task_is_not_given_the_old_tasks_notes(tmp_path: Path) -> None:
    store = tmp_path / "k.sqlite"
    run_demo(tmp_path / "first", "--generations", "2", "--knowledge-db", str(store))
    # The same task id, another task: its test now wants another greeting.
    tasks = [json.loads(line) for line in DEMO_TASKS.read_text().splitlines()]
    greet = next(t for t in tasks if t["task_id"] == "greet")
    greet["files"]["test_greet.py"] = greet["files"]["test_greet.py"].replace("Howdy", "Ahoy")
    greet["eval"]["command"] += " "  # the eval is part of what identifies a task
    changed = write_tasks(tmp_path / "changed.jsonl", tasks)
    done = ksi_cli("run", str(changed), "--agent", AGENT, "--run-dir", str(tmp_path / "second"),
                   "--knowledge-db", str(store))  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = {r["task_id"]: r for r in journal_lines(tmp_path / "second")}
    assert records["greet"]["score"] == 0.0, "the old task's notes would have said Howdy"
    assert all(records[t]["score"] == 1.0 for t in ("gateway-port", "log-level", "version"))
    read = read_knowledge(tmp_path / "second", 0)
    assert read is not None and not [n for n in read.notes if n.task_id == "greet"]


def test_two_real_runs_writing_one_store_at_once_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "shared.sqlite"
    runs = [tmp_path / "a", tmp_path / "b"]
    args = ["--generations", "3", "--attempts", "4", "--knowledge-db", str(store)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ksi", *demo_args(run, *args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run in runs
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
    for run in runs:
        rid = run_id(run)
        # Every scored attempt's evidence, with its newest score.
        stored = dict(
            store_rows(store, "SELECT attempt_id, score FROM attempts WHERE run_id = ?", rid)
        )
        assert stored == scored_attempts(run)
        # Every generation's notes, as its files say, in their order.
        for generation in (0, 1, 2, 3):
            files = read_knowledge(run, generation)
            in_store = store_rows(
                store,
                """SELECT CASE WHEN n.run_id = ? THEN n.local_id ELSE n.uid END
                FROM generation_notes gn JOIN notes n ON n.id = gn.note
                WHERE gn.run_id = ? AND gn.generation = ? ORDER BY gn.position""",
                rid, rid, generation,
            )  # fmt: skip
            assert [i for (i,) in in_store] == ([n.id for n in files.notes] if files else [])
        # Every note each attempt received.
        given = sum(
            len(r["knowledge"]["note_ids"])
            for r in journal_lines(run)
            if r["knowledge"] and r["attempt_dir"] in scored_attempts(run)
        )
        received = store_rows(store, "SELECT count(*) FROM received WHERE run_id = ?", rid)
        assert received == [(given,)]


# Each process opens store <round>.sqlite when the round's slot starts, all at once (it
# sleeps to 2 ms before the slot, then spins, so they wake together on a busy machine).
_OPEN_AT_ONCE = """
import sys, time
from pathlib import Path
from ksi.knowledge.db import KnowledgeDB
folder, start, rounds = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
for n in range(rounds):
    slot = start + n * 0.03
    time.sleep(max(0.0, slot - 0.002 - time.time()))
    while time.time() < slot:
        pass
    KnowledgeDB.open(folder / f"{n}.sqlite").close()
"""


def test_processes_creating_one_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    # Two runs started together on a new --knowledge-db: one may see the other's tables
    # half-way through its check, or be told "database is locked" switching to WAL.
    start, rounds = time.time() + 2, 150
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AT_ONCE, str(tmp_path), str(start), str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
    for n in range(rounds):
        assert store_rows(tmp_path / f"{n}.sqlite", "PRAGMA user_version") == [(SCHEMA_VERSION,)]
        assert store_rows(tmp_path / f"{n}.sqlite", "PRAGMA journal_mode") == [("wal",)]


# -- kill -9 during a store write --------------------------------------------------------


def _held(tmp_path: Path, where: str) -> tuple[Path, list[str]]:
    """A demo run killed while generation 1's notes are being stored (``where``)."""
    run_dir, marker = tmp_path / "run", tmp_path / "held"
    args = demo_args(run_dir, "--generations", "3")
    proc = subprocess.Popen(
        [sys.executable, str(SLOW_STORE), str(marker), where, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "generation 1's notes were never stored"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return run_dir, args


def _phases(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.kind, e.generation) for e in read_phases(run_dir)]


def test_kill_9_inside_the_store_write_leaves_nothing_and_the_resume_distils_once(
    tmp_path: Path,
) -> None:
    run_dir, args = _held(tmp_path, "in")
    store = run_dir / "knowledge.sqlite"
    rid = run_id(run_dir)
    assert store_rows(store, "SELECT count(*) FROM generations WHERE run_id = ?", rid) == [(0,)]
    assert store_rows(store, "SELECT count(*) FROM notes") == [(0,)], "nothing half-written"
    assert not (run_dir / "knowledge" / "1").exists()
    assert _phases(run_dir) == [("started", 1)]

    resumed = ksi_cli(*args, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert _phases(run_dir) == [("started", 1), ("distilled", 1), ("started", 2), ("distilled", 2)]
    assert len(journal_lines(run_dir)) == 7
    generations = store_rows(store, "SELECT generation FROM generations WHERE run_id = ?", rid)
    assert sorted(generations) == [(1,), (2,)]
    with KnowledgeDB.open(store, readonly=True) as db:
        assert db.generation(rid, 1) == read_knowledge(run_dir, 1)


def test_kill_9_after_the_store_write_writes_the_files_from_the_store(tmp_path: Path) -> None:
    run_dir, args = _held(tmp_path, "after")
    store = run_dir / "knowledge.sqlite"
    rid = run_id(run_dir)
    with KnowledgeDB.open(store, readonly=True) as db:
        stored = db.generation(rid, 1)
    assert stored is not None and stored.notes
    assert not (run_dir / "knowledge" / "1").exists()

    resumed = ksi_cli(*args, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    # Not distilled again: the files say exactly what the store held before the resume.
    assert read_knowledge(run_dir, 1) == stored
    assert store_rows(store, "SELECT count(*) FROM generations WHERE run_id = ? AND generation = 1",
                      rid) == [(1,)]  # fmt: skip
    assert "solved: 4/4" in resumed.stdout


# -- asking the store ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("store") / "run"
    run_demo(run, "--generations", "3")
    return run


def test_search_finds_notes_and_evidence_and_filters_them(demo_run: Path) -> None:
    found = ksi_cli("knowledge", "search", "Howdy", "--run-dir", str(demo_run), "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert {h["source"] for h in hits} == {"note", "attempt"}
    assert all(h["task_id"] == "greet" for h in hits)
    assert any(h["kind"] == "eval_output" and "«Howdy»" in h["snippet"] for h in hits)
    relevance = [h["relevance"] for h in hits]
    assert relevance == sorted(relevance, reverse=True)

    only = ksi_cli("knowledge", "search", "Howdy", "--run-dir", str(demo_run), "--json",
                   "--kind", "attempt")  # fmt: skip
    attempts = json.loads(only.stdout)["hits"]
    assert attempts and {h["source"] for h in attempts} == {"attempt"}
    assert {h["id"].split(":", 1)[1] for h in attempts} <= set(scored_attempts(demo_run))
    other = ksi_cli("knowledge", "search", "Howdy", "--run-dir", str(demo_run), "--task", "version")
    assert other.returncode == 0 and "nothing matches" in other.stdout

    text = ksi_cli("knowledge", "search", "AssertionError 8443", "--run-dir", str(demo_run))
    assert text.returncode == 0, text.stderr
    assert "task gateway-port" in text.stdout and "task greet" not in text.stdout
    # Words, never query syntax: nothing a user types breaks the search.
    odd = ksi_cli("knowledge", "search", 'NEAR( "x OR * -', "--run-dir", str(demo_run))
    assert odd.returncode == 0, odd.stderr


def test_show_gives_the_note_its_citations_and_who_received_it(demo_run: Path) -> None:
    notes = read_knowledge(demo_run, 1)
    assert notes is not None
    note = next(n for n in notes.notes if n.task_id == "greet" and n.kind == "eval_output")
    shown = ksi_cli("knowledge", "show", note.id, "--run-dir", str(demo_run))
    assert shown.returncode == 0, shown.stderr
    assert "AssertionError: 'Hello, Ada!' != 'Howdy, Ada!'" in shown.stdout
    assert "attempts/greet/1: score 0.00" in shown.stdout
    receivers = [r for r in journal_lines(demo_run)
                 if r["knowledge"] and note.id in r["knowledge"]["note_ids"]]  # fmt: skip
    assert receivers, "generation 2 received it"
    for r in receivers:
        assert f"{r['attempt_dir']} (generation 2): score {r['score']:.2f}" in shown.stdout
    detail = json.loads(
        ksi_cli("knowledge", "show", note.id, "--run-dir", str(demo_run), "--json").stdout
    )
    assert detail["uid"] == f"{run_id(demo_run)}-{note.id}"
    assert detail["distiller"] == "evidence" and detail["note"]["generation"] == 1
    assert len(detail["receivers"]) == len(receivers)
    # The global id finds it through the store file too.
    store = demo_run / "knowledge.sqlite"
    by_store = ksi_cli("knowledge", "show", detail["uid"], "--knowledge-db", str(store))
    assert by_store.returncode == 0 and note.id in by_store.stdout
    missing = ksi_cli("knowledge", "show", "no-such-note", "--knowledge-db", str(store))
    assert missing.returncode == 2 and "no note 'no-such-note'" in missing.stderr


def test_stats_count_what_the_run_stored(demo_run: Path) -> None:
    done = ksi_cli("knowledge", "stats", "--run-dir", str(demo_run), "--json")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["schema_version"] == SCHEMA_VERSION
    assert (stats["runs"], stats["tasks"]) == (1, 4)
    assert stats["attempts"] == len(scored_attempts(demo_run))
    assert stats["stored_generations"] == 2
    assert stats["notes_by_status"]["superseded"] > 0, "generation 2's histories replace 1's"
    assert stats["size_bytes"] > 0
    plain = ksi_cli("knowledge", "stats", "--run-dir", str(demo_run))
    assert "scored attempts: 7" in plain.stdout


def test_the_store_must_be_named_once(demo_run: Path) -> None:
    neither = ksi_cli("knowledge", "stats")
    both = ksi_cli("knowledge", "stats", "--run-dir", str(demo_run),
                   "--knowledge-db", str(demo_run / "knowledge.sqlite"))  # fmt: skip
    for done in (neither, both):
        assert done.returncode == 2 and "--knowledge-db PATH or a run as --run-dir" in done.stderr


# -- the lifecycle of notes ------------------------------------------------------------------


def test_a_newer_note_on_the_same_point_supersedes_the_old_one(demo_run: Path) -> None:
    first, second = read_knowledge(demo_run, 1), read_knowledge(demo_run, 2)
    assert first is not None and second is not None
    old = next(n for n in first.notes if n.task_id == "greet" and n.kind == "score_history")
    new = next(n for n in second.notes if n.task_id == "greet" and n.kind == "score_history")
    assert new.replaces == (old.id,)
    assert old.id not in {n.id for n in second.notes}, "never given after it was replaced"
    shown = ksi_cli("knowledge", "show", old.id, "--run-dir", str(demo_run), "--json")
    detail = json.loads(shown.stdout)
    assert detail["status"] == "superseded"
    assert detail["superseded_by"] == f"{run_id(demo_run)}-{new.id}"


def test_a_note_whose_receivers_keep_failing_is_demoted_and_given_last(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"task_id": "hard", "prompt": "Make it pass.", "eval": {"command": "echo nope; exit 1"}},
    ])  # fmt: skip
    run = tmp_path / "run"
    done = ksi_cli("run", str(tasks), "--agent", "command", "--agent-option",
                   "cmd=cp KNOWLEDGE.md repo/ 2>/dev/null; echo tried", "--attempts", "3",
                   "--generations", "3", "--run-dir", str(run))  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = read_knowledge(run, 1), read_knowledge(run, 2)
    assert first is not None and second is not None
    # Generation 2's three attempts received generation 1's notes and all failed.
    carried = [n.id for n in second.notes if n.generation == 1]
    assert carried and set(carried) <= set(second.demoted)
    assert not {n.id for n in second.notes if n.generation == 2} & set(second.demoted)
    # Given last, and said to be demoted.
    gen3 = next(r for r in journal_lines(run) if r["generation"] == 3)
    given = (run / gen3["attempt_dir"] / "captured" / "repo" / "KNOWLEDGE.md").read_text()
    own = {n.id for n in second.notes if n.task_id == "hard"}
    ids = [i for i in gen3["knowledge"]["note_ids"] if i in own]
    fresh = [i for i in ids if i not in second.demoted]
    assert ids == fresh + [i for i in ids if i in second.demoted], "demoted last of the task's"
    assert "_Demoted: the attempts that received it kept failing._" in given
    shown = json.loads(
        ksi_cli("knowledge", "show", carried[0], "--run-dir", str(run), "--json").stdout
    )
    assert shown["status"] == "demoted" and len(shown["receivers"]) >= 3


def _note(id: str, text: str, task_id: str | None, kind: str = "insight") -> Note:
    return Note(id=id, kind=kind, text=text, task_id=task_id, attempts=("a/1",), generation=1)


def test_two_notes_that_say_the_same_thing_are_given_once() -> None:
    notes = (
        _note("n1", "Run the tests with -q.", "t"),
        _note("n2", "  run the TESTS   with -q.\n", "t"),
        _note("n3", "run the tests with -q.", None),
    )
    rendered = IndexedNotes.of(Knowledge(1, "x", notes)).render("t", 100_000)
    assert rendered.note_ids == ("n1",) and rendered.duplicates == 2
    assert rendered.text.count("with -q.") == 1


def test_other_tasks_notes_come_by_relevance_after_the_tasks_own() -> None:
    notes = (
        _note("own", "Check the config loader first.", "parser"),
        _note("near", "The tokenizer splits on commas; the parser must join quoted fields.", "csv"),
        _note("far", "Ports below 1024 need root.", "server"),
        _note("shared", "Every task: run the linter.", None),
    )
    knowledge = Knowledge(1, "x", notes)
    index = IndexedNotes.of(knowledge, withheld=["held"], ranker=NoteIndex(notes).rank)
    prompt = "parser: parse CSV lines; quoted fields may hold commas (tokenizer)"
    rendered = index.render("parser", 100_000, query=prompt)
    assert rendered.note_ids == ("own", "near", "shared"), "far matches nothing of the prompt"
    assert "_About task `csv`_" in rendered.text
    # Own notes come first whatever the budget leaves; then the most relevant that fits.
    assert index.render("parser", 300, query=prompt).note_ids == ("own",)
    assert index.render("parser", 400, query=prompt).note_ids == ("own", "near")
    # A hold-out gets shared notes only, never another task's.
    assert index.render("held", 100_000, query=prompt).note_ids == ("shared",)


# -- what the store keeps out, and stores it refuses ------------------------------------------


def test_unscored_and_holdout_attempts_never_reach_the_store(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"task_id": "learn", "prompt": "p", "eval": {"command": "echo learnword; exit 1"}},
        {"task_id": "slow", "prompt": "p",
         "eval": {"command": "echo slowword; sleep 30", "timeout_sec": 1}},
        {"task_id": "held", "prompt": "p", "eval": {"command": "echo heldword; exit 1"}},
    ])  # fmt: skip
    run = tmp_path / "run"
    done = ksi_cli("run", str(tasks), "--agent", "command", "--agent-option", "cmd=true",
                   "--generations", "2", "--holdout-task-ids", "held",
                   "--run-dir", str(run))  # fmt: skip
    assert done.returncode == 0, done.stderr
    store = run / "knowledge.sqlite"
    assert {t for (t,) in store_rows(store, "SELECT DISTINCT task_id FROM attempts")} == {"learn"}
    assert not store_rows(store, "SELECT uid FROM notes WHERE task_id IN ('slow', 'held')")
    for word in ("slowword", "heldword"):
        found = json.loads(
            ksi_cli("knowledge", "search", word, "--run-dir", str(run), "--json").stdout
        )
        assert found["hits"] == [], word
    assert store_rows(store, "SELECT count(*) FROM received WHERE task_id = 'held'") == [(0,)]


def test_a_store_ksi_cannot_use_is_refused_before_the_run_directory_exists(
    tmp_path: Path,
) -> None:
    newer = tmp_path / "newer.sqlite"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (name TEXT)")
    conn.close()
    for path, why in ((newer, "written by a newer KSI"), (other, "not a knowledge store"),
                      (tmp_path, "a directory")):  # fmt: skip
        done = ksi_cli(*demo_args(tmp_path / "run", "--knowledge-db", str(path)))
        assert done.returncode == 2, done.stdout + done.stderr
        assert why in done.stderr
        assert not (tmp_path / "run").exists()


def test_a_resume_must_name_the_same_store(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_demo(run)
    done = ksi_cli(*demo_args(run, "--knowledge-db", str(tmp_path / "other.sqlite")))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "knowledge_db" in done.stderr and "--knowledge-db" in done.stderr


# -- show that it helps (issue 25 §4) ---------------------------------------------------------


def test_report_and_view_set_each_notes_receivers_against_comparable_attempts(
    demo_run: Path, tmp_path: Path
) -> None:
    report = json.loads(ksi_cli("report", str(demo_run), "--json").stdout)
    generations = report["summary"]["generations"]
    evidence = {e["note_id"]: e for e in generations["notes"]}
    first = read_knowledge(demo_run, 1)
    assert first is not None
    hint = next(n for n in first.notes if n.task_id == "greet" and n.kind == "eval_output")
    # Generation 2's three attempts received it and solved; generation 1's three, at the
    # same tasks without it, did not.
    assert evidence[hint.id] == {
        "note_id": hint.id, "kind": "eval_output", "task_id": "greet",
        "received": 3, "received_solved": 3, "compared": 3, "compared_solved": 0,
        "control": None, "control_solved": None,
    }  # fmt: skip
    tasks = {t["task_id"]: t for t in generations["tasks"]}
    assert hint.id in tasks["greet"]["notes_before_solve"]
    assert tasks["version"]["notes_before_solve"] == [], "solved in generation 1, with no notes"

    table = ksi_cli("report", str(demo_run))
    assert "notes and solves (evidence, not proof):" in table.stdout
    assert f"greet: first solved in generation 2, after notes {hint.id}" in table.stdout

    control = tmp_path / "none"
    run_demo(control, "--generations", "3", "--knowledge", "none")
    against = json.loads(
        ksi_cli("report", str(demo_run), "--json", "--control", str(control)).stdout
    )
    noted = {e["note_id"]: e for e in against["summary"]["generations"]["notes"]}
    # The none arm's generation-2 attempts at the same three tasks: none solved.
    assert (noted[hint.id]["control"], noted[hint.id]["control_solved"]) == (3, 0)
    with_control = ksi_cli("report", str(demo_run), "--control", str(control)).stdout
    assert "control: the control run's (--control) at the same tasks" in with_control

    page = tmp_path / "view.html"
    assert ksi_cli("view", str(demo_run), "-o", str(page)).returncode == 0
    html = page.read_text()
    assert "Notes and solves" in html and "evidence, not proof" in html
    assert f"<code>{hint.id}</code>" in html


def test_the_query_api_reads_a_store_opened_read_only_and_keeps_tasks_out(
    demo_run: Path,
) -> None:
    """What a query tool serving an agent (an MCP server) calls: nothing it asks writes,
    and the tasks it must not answer about (a run's hold-outs) stay out of every answer."""
    from ksi.knowledge.db_schema import StoreUnusable
    from ksi.knowledge.queries import note_detail, search, task_history

    store = demo_run / "knowledge.sqlite"
    before = store.read_bytes()
    with KnowledgeDB.open(store, readonly=True) as db:
        with pytest.raises(StoreUnusable, match="read-only"), db.write():
            pass
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.conn.execute("DELETE FROM notes")
        assert {h.task_id for h in search(db, "AssertionError")} >= {"greet", "gateway-port"}
        kept = search(db, "AssertionError", exclude_tasks=["greet"])
        assert kept and "greet" not in {h.task_id for h in kept}
        history = task_history(db, "greet")
        assert [a.score for a in history.attempts] == [0.0, 1.0] and history.notes
        assert task_history(db, "greet", exclude_tasks=["greet"]).attempts == ()
        rid = run_id(demo_run)
        note = next(h for h in search(db, "Howdy", kind="eval_output"))
        assert note_detail(db, note.id) is not None
        assert note_detail(db, note.id, exclude_tasks=["greet"]) is None
        shared = next(h for h in search(db, "Solved", kind="score_history") if h.task_id is None)
        detail = note_detail(db, shared.id, exclude_tasks=["greet"])
        assert detail is not None and detail.receivers
        assert "greet" not in {r.task_id for r in detail.receivers}
        assert detail.run_id == rid
    assert store.read_bytes() == before


def test_an_agent_distiller_says_which_notes_its_notes_replace(tmp_path: Path) -> None:
    write_notes = Path(__file__).parent / "fixtures" / "generations" / "write_notes.py"
    run = tmp_path / "run"
    run_demo(run, "--generations", "2", "--distiller", "agent",
             "--distiller-option", "agent=command",
             "--distiller-option", f"cmd=python3 {write_notes} replace",
             "--distiller-option", "with_evidence=false")  # fmt: skip
    first, second = read_knowledge(run, 1), read_knowledge(run, 2)
    assert first is not None and second is not None and second.distiller == "agent"
    for note in second.notes:
        old = [n.id for n in first.notes if n.task_id == note.task_id and n.kind == "insight"]
        assert note.replaces == tuple(old), "made-up ids are dropped"
        for old_id in old:
            shown = ksi_cli("knowledge", "show", old_id, "--run-dir", str(run), "--json")
            detail = json.loads(shown.stdout)
            assert detail["status"] == "superseded"
            assert detail["superseded_by"] == f"{run_id(run)}-{note.id}"


# -- evidence cut where the attempt wrote it ---------------------------------------------------


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_evidence_cut_by_the_attempt_is_what_reading_its_files_stores(
    tmp_path: Path, executor: str
) -> None:
    """The store's evidence of each attempt (cut in its worker from the diff it wrote) is
    byte for byte what a store rebuilt from the journal and the attempt's files holds,
    diffs cut to the budget and past it included."""
    # Diffs over the budget's cut (128 bytes of diff, 1024 for the touched files), with
    # two-byte characters where the cuts fall.
    cmd = 'for i in $(seq 1 40); do printf \'x = "%s"\\n\' "$i ééééééééé" > repo/f$i.py; done'
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"task_id": "big", "prompt": "p", "eval": {"command": "true"}},
        {"task_id": "failed", "prompt": "p", "files": {"a.py": "A = 1\n"},
         "eval": {"command": "echo not yet; exit 1"}},
    ])  # fmt: skip
    run = tmp_path / "run"
    done = ksi_cli("run", str(tasks), "--agent", "command", "--agent-option", f"cmd={cmd}",
                   "--knowledge-budget", "256", "--executor", executor, "--concurrency", "2",
                   "--run-dir", str(run))  # fmt: skip
    assert done.returncode == 0, done.stderr
    sql = (
        "SELECT attempt_id, score, solved, final_message, eval_output, files_touched, diff "
        "FROM attempts ORDER BY attempt_id"
    )
    stored = store_rows(run / "knowledge.sqlite", sql)
    assert [row[:3] for row in stored] == [
        ("attempts/big/1", 1.0, 1),
        ("attempts/failed/1", 0.0, 0),
    ]
    assert stored[1][4] == "not yet"
    big = stored[0]
    assert big[6].endswith("# ksi: cut to the knowledge budget\n")
    assert 5 < len(big[5].splitlines()) < 40  # the touched files, cut too
    (run / "knowledge.sqlite").rename(tmp_path / "kept.sqlite")
    rebuilt, _ = open_run_store(run)  # no store: one in memory, from the journal and files
    try:
        assert rebuilt.conn.execute(sql).fetchall() == stored
    finally:
        rebuilt.close()

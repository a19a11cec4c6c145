"""What the knowledge store costs: per attempt, per query, on disk.

Four figures, each beside what KSI did before the store (the same run, the
same machine):

* **write per attempt**: storing one scored attempt's evidence and the notes
  it received (one transaction: what ``ksi run`` adds per attempt), against
  appending its record to the journal (the one JSON file written per attempt
  before; a line, then ``fsync``);
* **per generation**: storing a generation's notes in the store, against
  writing ``knowledge/<g>/`` (``notes.json`` and ``KNOWLEDGE.md``, as before
  and still, after the store);
* **read per attempt**: choosing and rendering one attempt's ``KNOWLEDGE.md``
  with retrieval (BM25 over the store), against the in-memory render without it;
* **search** over a store of ``N`` notes (default 100,000; goal < 50 ms per
  query): median and 95th percentile over varied queries (rare and common
  words, two words, a prefix, a task filter), wall clock and CPU time (the
  CPU time is what the query costs on a machine shared with other work);
* **size on disk per 1,000 attempts**, evidence and notes of a realistic shape.

Text is synthetic (a Zipf-distributed vocabulary of 8,000 words, identifiers,
diff and test output lines), generated from a fixed seed.

Run: ``.venv/bin/python benchmarks/bench_knowledge_store.py [N_NOTES]``
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ksi.knowledge.db import KnowledgeDB, Receipt, StoredAttempt, store_size
from ksi.knowledge.models import AttemptEvidence, Knowledge, Note
from ksi.knowledge.queries import search
from ksi.knowledge.render import IndexedNotes
from ksi.knowledge.retrieval import NoteIndex
from ksi.knowledge.store import write_knowledge
from ksi.records import AttemptRecord, Timings
from ksi.rundir.journal import Journal

RNG = random.Random(20250125)
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vo",
    "zi",
    "pe",
    "sa",
    "do",
    "fu",
    "gi",
    "ha",
    "je",
    "ku",
    "ly",
    "mo",
    "nu",
    "pi",
]
VOCAB = ["".join(RNG.choice(SYLLABLES) for _ in range(RNG.randint(2, 4))) for _ in range(8000)]
WEIGHTS = [1 / (i + 1) for i in range(len(VOCAB))]
KINDS = ("eval_output", "best_diff", "final_message", "files_touched", "score_history", "insight")


def words(n: int) -> str:
    return " ".join(RNG.choices(VOCAB, WEIGHTS, k=n))


def evidence_text() -> tuple[str, str, str]:
    """A final message, an eval output tail and a diff of realistic sizes."""
    message = words(RNG.randint(20, 60))
    eval_output = "\n".join(
        f"FAIL: test_{RNG.choice(VOCAB)} AssertionError: {words(6)} != {words(6)}"
        for _ in range(RNG.randint(5, 15))
    )
    diff = "\n".join(f"+    {words(8)}" for _ in range(RNG.randint(20, 60)))
    return message, eval_output, diff


def note(i: int, task: str, generation: int) -> Note:
    kind = KINDS[i % len(KINDS)]
    return Note(
        id=f"g{generation}-{i:06d}",
        kind=kind,
        text=words(RNG.randint(30, 150)),
        task_id=None if i % 50 == 0 else task,
        attempts=(f"attempts/{task}/{generation}",),
        generation=generation,
    )


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def write_per_attempt(root: Path) -> None:
    n = 500
    db = KnowledgeDB.open(root / "w.sqlite")
    db.register_run("r", root, "t")
    notes = tuple(note(i, f"t{i % 50}", 1) for i in range(500))
    db.put_generation("r", Knowledge(1, "evidence", notes), task_hashes={})
    ids = tuple(n.id for n in notes[:20])
    attempts = []
    for i in range(n):
        message, eval_output, diff = evidence_text()
        ev = AttemptEvidence(f"attempts/t{i}/2", 2, 2, 0.0, False, message, eval_output, (), diff)
        attempts.append(StoredAttempt("r", f"t{i}", "h", ev, "agent", None, "t"))
    it = iter(attempts)

    def store_one() -> None:
        a = next(it)
        receipt = Receipt(a.evidence.attempt_id, a.task_id, 2, 0.0, False, 1, ids)
        db.put_attempts([a], [receipt])

    store_times = timed(store_one, n)
    db.close()
    journal = Journal(root / "journal.jsonl")
    record = AttemptRecord(
        task_id="t",
        attempt=1,
        try_number=0,
        status="scored",
        score=0.0,
        agent="a",
        evaluator="command",
        environment="local",
        model=None,
        attempt_dir="attempts/t/1",
        timings=Timings(),
        finished_at="t",
        final_message=attempts[0].evidence.final_message,
    )
    journal_times = timed(lambda: journal.append(record), n)
    journal.close()
    print(
        f"write per attempt (median of {n}): store {ms(statistics.median(store_times))} "
        f"(evidence + 20 receipts, one transaction) vs journal line "
        f"{ms(statistics.median(journal_times))} (JSON + fsync, as before)"
    )


def per_generation(root: Path) -> None:
    notes = tuple(note(i, f"t{i % 100}", 1) for i in range(2000))
    knowledge = Knowledge(1, "evidence", notes)
    db = KnowledgeDB.open(root / "g.sqlite")
    db.register_run("r", root, "t")
    start = time.perf_counter()
    db.put_generation("r", knowledge, task_hashes={})
    store_time = time.perf_counter() - start
    start = time.perf_counter()
    write_knowledge(root / "run", knowledge)
    files_time = time.perf_counter() - start
    print(
        f"per generation (2,000 notes, 100 tasks): store {ms(store_time)} vs "
        f"knowledge/<g>/ files {ms(files_time)} (still written, from the store)"
    )
    plain = IndexedNotes.of(knowledge)
    start = time.perf_counter()
    index = NoteIndex(knowledge.notes)
    index_time = time.perf_counter() - start
    ranked = IndexedNotes.of(knowledge, ranker=index.rank)
    prompts = [f"t{i} {words(25)}" for i in range(200)]
    plain_times = timed(lambda: [plain.render(f"t{i}", 16384) for i in range(200)], 1)
    ranked_times = timed(lambda: [ranked.render(f"t{i}", 16384, prompts[i]) for i in range(200)], 1)
    print(
        f"read per attempt (KNOWLEDGE.md, 16 KiB budget, 2,000 notes): with retrieval "
        f"{ms(ranked_times[0] / 200)} vs in-memory render without {ms(plain_times[0] / 200)} "
        f"(plus {ms(index_time)} once per generation to index its notes)"
    )
    db.close()


def search_latency(root: Path, n_notes: int) -> None:
    db = KnowledgeDB.open(root / "s.sqlite")
    per_gen = 10_000
    start = time.perf_counter()
    for g in range(n_notes // per_gen):
        run = f"run{g:03d}"
        db.register_run(run, root, "t")
        notes = tuple(note(i, f"t{i % 1000}", 1) for i in range(per_gen))
        db.put_generation(run, Knowledge(1, "evidence", notes), task_hashes={})
    build = time.perf_counter() - start
    queries = []
    for i in range(40):
        queries.append((VOCAB[RNG.randint(2000, 7999)], {}))  # a rare word
        queries.append((VOCAB[RNG.randint(0, 20)], {}))  # a common word
        queries.append((f"{VOCAB[RNG.randint(0, 300)]} {VOCAB[RNG.randint(0, 300)]}", {}))
        queries.append((VOCAB[RNG.randint(0, 500)][:3] + "*", {}))
        queries.append((VOCAB[RNG.randint(0, 100)], {"task": f"t{i}"}))
    times, cpu = [], []
    for query, filters in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        search(db, query, limit=20, **filters)  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    times.sort()
    cpu.sort()
    print(
        f"search over {n_notes:,} notes ({len(queries)} queries; store built in {build:.1f} s, "
        f"{store_size(db.path) / 2**20:.0f} MiB): median {ms(statistics.median(times))}, "
        f"95th percentile {ms(times[int(len(times) * 0.95)])}, worst {ms(times[-1])} "
        f"(CPU time: median {ms(statistics.median(cpu))}, 95th percentile "
        f"{ms(cpu[int(len(cpu) * 0.95)])}; goal: < 50 ms)"
    )
    db.close()


def size_per_thousand(root: Path) -> None:
    path = root / "size.sqlite"
    db = KnowledgeDB.open(path)
    db.register_run("r", root, "t")
    attempts = []
    for i in range(1000):
        message, eval_output, diff = evidence_text()
        ev = AttemptEvidence(f"attempts/t{i}/1", 1, 1, 0.0, False, message, eval_output, (), diff)
        attempts.append(StoredAttempt("r", f"t{i}", "h", ev, "agent", None, "t"))
    db.put_attempts(attempts)
    # The evidence distiller's notes: about five per attempt.
    notes = tuple(note(i, f"t{i // 5}", 1) for i in range(5000))
    db.put_generation("r", Knowledge(1, "evidence", notes), task_hashes={})
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print(
        f"size on disk per 1,000 attempts (evidence, 5,000 notes): "
        f"{store_size(path) / 2**20:.1f} MiB"
    )
    db.close()


def main() -> None:
    n_notes = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_per_attempt(root)
        per_generation(root)
        size_per_thousand(root)
        search_latency(root, n_notes)


if __name__ == "__main__":
    main()

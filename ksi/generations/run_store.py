"""One run's side of the knowledge store (:mod:`ksi.knowledge.db`): what it writes, what it reads.

The run writes the evidence of each scored attempt as it is journalled, and
which notes it received; each generation's notes; its forum's posts (as each
session ends; the forum's files are their record, and fill in what a failed
write left out); and, when it starts, the
notes earlier runs left about its tasks become its generation 0 (beside
``--seed-knowledge`` notes), so the run's own files record what it read.
Hold-outs write nothing (they are never learned from) and are never given
other tasks' notes. The journal stays the record of the attempts: whatever
the store lacks of it (a store write that failed, a run made before the
store, a power cut) is written again from it before a generation is
distilled (:meth:`RunStore.sync`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ksi.attempt.evidence import DiffEvidence
from ksi.choices import KnowledgeEvalOutput
from ksi.generations.evidence import attempt_evidence, scored
from ksi.knowledge.db import DB_FILE, KnowledgeDB, Receipt, StoredAttempt, StoredPost
from ksi.knowledge.forum import FORUM_DIR, FileForumStore, Post, posts_of, room_path
from ksi.knowledge.models import Knowledge, Note
from ksi.knowledge.store import read_knowledge, stored_generations
from ksi.layout import RunLayout
from ksi.models import is_solved
from ksi.records import AttemptRecord, AttemptStatus, now
from ksi.rundir.config import RunConfig
from ksi.rundir.journal import read_records
from ksi.rundir.run_state import load_run_state

#: The ``distiller`` of a generation 0 read from the store.
FROM_STORE = "store"


def store_path(run_dir: Path, knowledge_db: str | None) -> Path:
    """Where a run's store is: ``--knowledge-db``, else ``knowledge.sqlite`` in the run."""
    return Path(knowledge_db) if knowledge_db else Path(run_dir) / DB_FILE


class RunStore:
    """The store as one run (``run_id``) uses it; the driver alone holds it."""

    def __init__(
        self,
        db: KnowledgeDB,
        *,
        run_id: str,
        run_dir: Path,
        config: RunConfig,
        task_hashes: Mapping[str, str],
    ) -> None:
        self.db = db
        self.run_id = run_id
        self._run_dir = Path(run_dir)
        self._config = config
        self._hashes = dict(task_hashes)
        self._holdouts = frozenset(config.holdout_task_ids or ())

    @classmethod
    def open(
        cls, config: RunConfig, run_dir: Path, *, run_id: str, task_hashes: Mapping[str, str]
    ) -> RunStore:
        db = KnowledgeDB.open(store_path(run_dir, config.knowledge_db))
        try:
            db.register_run(run_id, Path(run_dir), now())
        except BaseException:
            db.close()
            raise
        return cls(db, run_id=run_id, run_dir=run_dir, config=config, task_hashes=task_hashes)

    @property
    def path(self) -> Path:
        return self.db.path

    def close(self) -> None:
        self.db.close()

    # -- attempts -----------------------------------------------------------------------
    def _learns_from(self, record: AttemptRecord) -> bool:
        return (
            record.status == AttemptStatus.SCORED
            and record.score is not None
            and (record.task_id not in self._holdouts)
        )

    def _evidence(self, record: AttemptRecord, diff: DiffEvidence | None = None) -> StoredAttempt:
        cfg = self._config
        return StoredAttempt(
            run_id=self.run_id,
            task_id=record.task_id,
            task_hash=self._hashes.get(record.task_id, ""),
            evidence=attempt_evidence(
                record,
                self._run_dir,
                solved_threshold=cfg.solved_threshold,
                budget_bytes=cfg.knowledge_budget_bytes,
                eval_output=cfg.knowledge_eval_output == KnowledgeEvalOutput.TAIL,
                with_diff=True,
                with_trajectory=False,  # the store keeps no trajectory digest
                diff=diff,
            ),
            agent=record.agent,
            model=record.model,
            finished_at=record.finished_at,
        )

    def _receipt(self, record: AttemptRecord) -> Receipt | None:
        ref = record.knowledge
        if ref is None or not ref.note_ids or record.score is None:
            return None
        return Receipt(
            attempt_id=record.attempt_dir,
            task_id=record.task_id,
            generation=record.generation,
            score=float(record.score),
            solved=is_solved(record.score, self._config.solved_threshold),
            knowledge_generation=ref.generation,
            note_ids=ref.note_ids,
        )

    def record(
        self, records: Iterable[AttemptRecord], diffs: Mapping[str, DiffEvidence] | None = None
    ) -> None:
        """Store journalled attempts' evidence, and the notes each received, in one
        transaction (scored attempts of tasks that are not hold-outs; any other is left out).
        ``diffs``: the pieces of their ``diff.patch`` their workers cut, by attempt
        directory (an attempt without them has its file read)."""
        usable = [r for r in records if self._learns_from(r)]
        if not usable:
            return
        diffs = diffs or {}
        receipts = [receipt for r in usable if (receipt := self._receipt(r)) is not None]
        self.db.put_attempts(
            [self._evidence(r, diffs.get(r.attempt_dir)) for r in usable], receipts
        )

    def sync(self, records: Iterable[AttemptRecord]) -> None:
        """Write what the store lacks of the journal's scored attempts (their newest try)."""
        usable = [r for r in scored(records) if self._learns_from(r)]
        have = self.db.attempt_scores(self.run_id)
        self.db.put_attempts(
            [self._evidence(r) for r in usable if have.get(r.attempt_dir) != r.score]
        )
        received = self.db.received_attempts(self.run_id)
        receipts = [
            receipt
            for r in usable
            if r.attempt_dir not in received and (receipt := self._receipt(r)) is not None
        ]
        self.db.put_receipts(self.run_id, receipts)

    # -- notes ----------------------------------------------------------------------------
    def stored(self, generation: int) -> Knowledge | None:
        return self.db.generation(self.run_id, generation)

    def store(self, knowledge: Knowledge) -> Knowledge:
        """Store a generation's notes; what is stored (and what its files must say)."""
        cfg = self._config
        model = None
        if knowledge.generation > 0 and knowledge.distiller != "evidence":
            model = cfg.distiller_options.get("model") or cfg.model
        return self.db.put_generation(self.run_id, knowledge, task_hashes=self._hashes, model=model)

    def ensure(self, knowledge: Knowledge) -> None:
        """Notes the run's files hold and the store lacks (a run made before the store)
        are stored as they are."""
        if not self.db.has_generation(self.run_id, knowledge.generation):
            self.store(knowledge)

    # -- the forum's posts ----------------------------------------------------------------
    def put_posts(self, posts: Iterable[Post]) -> None:
        """Store forum posts, searchable beside notes and evidence (the forum's files stay
        their full record; a post stored already is kept as it is). Their uid is
        ``<run id>:<post id>``; what they cite is what they rest on, and the post they
        answer."""
        self.db.put_posts(
            [
                StoredPost(
                    uid=f"{self.run_id}:{post.id}",
                    run_id=self.run_id,
                    generation=post.generation,
                    thread=f"{FORUM_DIR}/{post.generation}/{room_path(post.task_id)}",
                    author=f"round {post.round}, participant {post.participant}",
                    text=f"{post.kind}: {post.text}" if post.text else post.kind,
                    task_id=post.task_id,
                    task_hash=self._hashes.get(post.task_id) if post.task_id else None,
                    cites=(*post.attempts, *((post.reply_to,) if post.reply_to else ())),
                    created_at=now(),
                )
                for post in posts
            ]
        )

    def earlier_notes(self) -> tuple[Note, ...]:
        """What earlier runs in the store learnt about this run's tasks (none about a
        hold-out), by their global ids."""
        return self.db.notes_for_tasks(
            self._hashes, exclude_run=self.run_id, exclude_tasks=self._holdouts
        )


def open_run_store(run_dir: Path) -> tuple[KnowledgeDB, str]:
    """The store a run used, read-only, and the run's id.

    A run made before the store has none: its notes (``knowledge/<g>/``) and
    the evidence of its journal are read into a store in memory, so the same
    questions can be asked of it (nothing is written to the run).
    """
    layout = RunLayout(Path(run_dir).resolve())
    state = load_run_state(layout)
    path = store_path(layout.root, state.config.knowledge_db)
    if path.is_file():
        return KnowledgeDB.open(path, readonly=True), state.run_id
    db = KnowledgeDB.open(Path(":memory:"))
    store = RunStore(
        db, run_id=state.run_id, run_dir=layout.root, config=state.config, task_hashes=state.tasks
    )
    db.register_run(state.run_id, layout.root, now())
    for generation in stored_generations(layout.root):
        knowledge = read_knowledge(layout.root, generation)
        if knowledge is not None:
            store.ensure(knowledge)
    store.sync(read_records(layout.journal))
    forum = FileForumStore(layout.root)
    for generation in forum.generations():
        store.put_posts(posts_of(forum.sessions(generation)))
    return db, state.run_id

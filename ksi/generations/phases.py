"""``generations.jsonl``: the phases of a run's generations, one durable line each.

The attempt journal says which attempts finished; this log says where the
generation loop stands: ``started`` (with the tasks the strategy planned, so
a resume never asks the strategy again) and ``distilled`` (the notes are
stored, or the generation was not to be distilled). Lines are written as the
journal writes its lines (one ``write``, then ``fsync``), so a ``kill -9``
leaves at most a torn last line, which reading ignores and the next append
trims.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs

from ksi.records import now
from ksi.serialization import dumps_line, from_data

PHASES_FILE = "generations.jsonl"


@attrs.frozen
class PhaseEvent:
    kind: str
    generation: int
    #: ``started``: the tasks the generation runs (hold-outs included, last).
    task_ids: tuple[str, ...] = ()
    holdout_task_ids: tuple[str, ...] = ()
    #: ``started``: the stored generation whose notes its attempts get (None: no notes).
    knowledge_from: int | None = None
    #: ``distilled``: who wrote the notes, why the configured distiller was not used,
    #: and "" when notes were stored (else why there are none).
    distiller: str = ""
    fallback: str = ""
    skipped: str = ""
    at: str = attrs.field(factory=now)


def phases_path(run_dir: Path) -> Path:
    return Path(run_dir) / PHASES_FILE


def read_phases(run_dir: Path) -> list[PhaseEvent]:
    """Every complete event (a torn or damaged line is skipped)."""
    try:
        data = phases_path(run_dir).read_bytes()
    except FileNotFoundError:
        return []
    events = []
    for raw in data.split(b"\n")[:-1]:
        try:
            events.append(from_data(json.loads(raw), PhaseEvent))
        except Exception:
            continue
    return events


def append_phase(run_dir: Path, event: PhaseEvent) -> None:
    """Append ``event`` durably (after trimming a torn last line a crash left)."""
    path = phases_path(run_dir)
    line = (dumps_line(event) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            os.lseek(fd, 0, os.SEEK_SET)
            content = os.read(fd, size)
            keep = content.rfind(b"\n") + 1
            if keep != size:
                os.ftruncate(fd, keep)
        os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


@attrs.frozen
class Phases:
    """The events of a run, by generation."""

    started: dict[int, PhaseEvent]
    distilled: dict[int, PhaseEvent]

    @classmethod
    def read(cls, run_dir: Path) -> Phases:
        started: dict[int, PhaseEvent] = {}
        distilled: dict[int, PhaseEvent] = {}
        for event in read_phases(run_dir):
            target = started if event.kind == "started" else distilled
            target.setdefault(event.generation, event)
        return cls(started, distilled)

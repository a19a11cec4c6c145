"""The knowledge store: ``knowledge/<generation>/`` in the run directory, and bundles.

Each generation's notes are written once, to a temporary directory renamed
into place, so a reader sees all of them or none; a directory that exists is
never written again (``write_knowledge`` refuses). ``notes.json`` is the data,
``KNOWLEDGE.md`` every note rendered for a person to read. Generation 0 holds
notes seeded from a bundle (``ksi run --seed-knowledge``).

A later generation reads :func:`newest_knowledge` at or before the previous
generation, so one distillation that left nothing never leaves the next
generation with no notes at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import attrs

from ksi.errors import UserInputError
from ksi.knowledge.models import Knowledge, Note
from ksi.knowledge.render import render_all
from ksi.serialization import (
    from_data,
    lone_surrogate_path,
    strict_converter,
    to_data,
    validation_problems,
    write_json_atomic,
)

KNOWLEDGE_DIR = "knowledge"
NOTES_FILE = "notes.json"
BUNDLE_FORMAT = "ksi-knowledge-bundle"
BUNDLE_VERSION = 1


def knowledge_root(run_dir: Path) -> Path:
    return Path(run_dir) / KNOWLEDGE_DIR


def generation_dir(run_dir: Path, generation: int) -> Path:
    return knowledge_root(run_dir) / str(generation)


def stored_generations(run_dir: Path) -> list[int]:
    """The generations with stored notes, ascending (temporary directories are not)."""
    root = knowledge_root(run_dir)
    if not root.is_dir():
        return []
    return sorted(
        int(p.name) for p in root.iterdir() if p.name.isdigit() and (p / NOTES_FILE).is_file()
    )


def write_knowledge(run_dir: Path, knowledge: Knowledge) -> Path:
    """Store ``knowledge`` as ``knowledge/<generation>/``, all at once; never overwrite."""
    final = generation_dir(run_dir, knowledge.generation)
    if final.exists():
        raise FileExistsError(f"{final}: notes of generation {knowledge.generation} are stored")
    tmp = knowledge_root(run_dir) / f".tmp-{knowledge.generation}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write_json_atomic(tmp / NOTES_FILE, to_data(knowledge))
        (tmp / "KNOWLEDGE.md").write_text(render_all(knowledge), encoding="utf-8")
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(final.parent)
    return final


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def clear_unfinished(run_dir: Path) -> None:
    """Remove temporary directories a killed distillation left (never stored notes)."""
    root = knowledge_root(run_dir)
    if root.is_dir():
        for p in root.iterdir():
            if p.name.startswith(".tmp-"):
                shutil.rmtree(p, ignore_errors=True)


class KnowledgeUnreadable(UserInputError):
    """A stored generation's ``notes.json`` that cannot be read (edited, truncated)."""


def read_knowledge(run_dir: Path, generation: int) -> Knowledge | None:
    """Generation ``generation``'s stored notes; ``None`` when it has none.

    A damaged file raises :class:`KnowledgeUnreadable` naming it and the fix:
    the notes are the record of what was given to later attempts, so KSI never
    guesses them.
    """
    path = generation_dir(run_dir, generation) / NOTES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return from_data(data, Knowledge)
    except FileNotFoundError:
        return None
    except Exception as exc:  # OSError, JSON, UTF-8, or a shape cattrs refuses
        problems = "; ".join(validation_problems(exc))
        raise KnowledgeUnreadable(
            f"{path}: unreadable ({problems}); it holds generation {generation}'s "
            f"notes. Restore it, or delete {path.parent} so that a resume distils generation "
            f"{generation} again"
        ) from exc


def newest_knowledge(run_dir: Path, at_or_before: int) -> Knowledge | None:
    """The newest stored notes of a generation ``<= at_or_before`` (0: seeded ones)."""
    found = [g for g in stored_generations(run_dir) if g <= at_or_before]
    return read_knowledge(run_dir, found[-1]) if found else None


# -- bundles ----------------------------------------------------------------------


@attrs.frozen
class Bundle:
    """Frozen notes that leave a run (``ksi knowledge export``) and seed another."""

    format: str
    version: int
    #: The run and generation the notes come from.
    source_run: str
    generation: int
    notes: tuple[Note, ...]


_strict = strict_converter(forbid_extra_keys=True)


def export_bundle(run_dir: Path, run_id: str) -> Bundle:
    """The run's newest notes as a bundle; a clear error when it has none."""
    gens = stored_generations(run_dir)
    if not gens:
        raise UserInputError(
            f"{run_dir}: no notes stored (a run of one generation, or one with "
            "--knowledge none, distils nothing); run with --generations 2 or more"
        )
    knowledge = read_knowledge(run_dir, gens[-1])
    assert knowledge is not None
    return Bundle(BUNDLE_FORMAT, BUNDLE_VERSION, run_id, knowledge.generation, knowledge.notes)


def bundle_data(bundle: Bundle) -> Any:
    return to_data(bundle)


def load_bundle(path: Path) -> tuple[Bundle, str]:
    """A bundle file and its SHA-256; every problem at once, naming the file and field."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UserInputError(f"--seed-knowledge {path}: cannot read it ({exc.strerror})") from exc
    digest = hashlib.sha256(raw).hexdigest()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UserInputError(
            f"{path}: not JSON ({exc}); give a file `ksi knowledge export` wrote"
        ) from exc
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise UserInputError(
            f"{path}: $.format: expected {BUNDLE_FORMAT!r}; "
            "give a file `ksi knowledge export` wrote"
        )
    try:
        bundle = _strict.structure(data, Bundle)
    except Exception as exc:
        raise UserInputError(
            f"{path}: not a valid knowledge bundle:\n"
            + "\n".join(f"  {p}" for p in validation_problems(exc))
        ) from exc
    bad = lone_surrogate_path(data)
    if bad is not None:
        raise UserInputError(
            f"{path}: {bad}: holds an escaped lone surrogate (such as \\ud800), which is not "
            "text; fix or remove that string"
        )
    if bundle.version != BUNDLE_VERSION:
        raise UserInputError(
            f"{path}: $.version: {bundle.version} is not supported (this KSI reads version "
            f"{BUNDLE_VERSION})"
        )
    return bundle, digest


def seeded_knowledge(bundle: Bundle, created_at: str) -> Knowledge:
    """A bundle as this run's generation 0 (ids prefixed so they never clash with the run's)."""
    notes = tuple(attrs.evolve(n, id=f"seed-{n.id}", generation=0) for n in bundle.notes)
    return Knowledge(
        generation=0,
        distiller=f"seed:{bundle.source_run}/{bundle.generation}",
        notes=notes,
        created_at=created_at,
    )

"""Directories as bytes: a task's starting files out to the nodes, attempt directories back.

A tar stream (gzip level 1: quick, and agent repos compress well) keeps
file modes, symlinks and empty directories, so what arrives is byte for byte
what left. Unpacking goes to a temporary sibling first and is renamed into
place, so a reader never sees half a directory.
"""

from __future__ import annotations

import collections
import io
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ksi.jobs import save_unless_disk_full, seed_dir
from ksi.serialization import from_data, to_data

T = TypeVar("T")


def pack_dir(path: Path) -> bytes:
    """The contents of ``path`` (not ``path`` itself) as a compressed tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for entry in sorted(os.listdir(path)):
            tar.add(path / entry, arcname=entry, recursive=True)
    return buf.getvalue()


def unpack_dir(data: bytes, dest: Path) -> None:
    """Make ``dest`` hold exactly what :func:`pack_dir` packed (replacing what was there)."""
    dest = Path(dest)
    tmp = dest.with_name(f".{dest.name}.unpack-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            # "tar": no member may land outside ``tmp``; modes and symlinks are kept.
            tar.extractall(tmp, filter="tar")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@attrs.define
class SeedCache:
    """Each task's starting files in the object store: put once, shared by its attempts.

    The recent tasks' stay (retries come soon after); idle ones past that are
    dropped, so a long run does not hold every task's files in the store.
    """

    #: How many times a task's starting files were put in the object store.
    puts: int = 0
    #: Attempts in flight by task (the executor counts them); a task's with users stay.
    users: collections.Counter[str] = attrs.field(factory=collections.Counter)
    _refs: collections.OrderedDict[str, Any] = attrs.field(factory=collections.OrderedDict)

    def clear(self) -> None:
        """The session ended: let the store drop every task's files (``puts`` stays)."""
        self._refs.clear()
        self.users.clear()

    def ref(self, ray: Any, job: Any, window: int) -> Any:
        """The object-store reference of ``job``'s task's starting files."""
        task_id = job.task.id
        found = self._refs.get(task_id)
        if found is not None:
            self._refs.move_to_end(task_id)
            return found
        ref = ray.put(pack_dir(seed_dir(job.task, job.seed_dir())))
        self.puts += 1
        self._refs[task_id] = ref
        keep = max(8, 2 * window)
        for old in list(self._refs):
            if len(self._refs) <= keep:
                break
            if self.users[old] == 0:
                del self._refs[old]
        return ref


def land(result: Any, job: Any) -> Any:
    """The attempt's record as the driver journals it, its directory unpacked in the run
    directory (``result``: the worker's :class:`~ksi_ray.worker.AttemptResult`)."""
    record = result.record
    if result.local_run_dir:
        record = relocated(record, result.local_run_dir, job.run_dir)
    if result.archive is not None:
        attempt_dir = job.attempt_dir()
        unpack_dir(result.archive, attempt_dir)
        if (attempt_dir / "record.json").exists():
            save_unless_disk_full(
                attempt_dir / "record.json",
                to_data(record),
                durable=False,
                indent=None,
                parents=False,
            )
    return record


def relocated(value: T, old_root: str, new_root: str) -> T:
    """``value`` (an attrs record) with paths under ``old_root`` moved under ``new_root``,
    wherever they appear in its strings.

    An attempt run in a node's scratch directory names it in its record (the
    grading directory, for one); the journal names the run directory instead,
    as a local run's would.
    """
    old, new = old_root.rstrip("/"), new_root.rstrip("/")

    def move(data: Any) -> Any:
        if isinstance(data, str):
            # Paths under it, also in prose ("a copy of /scratch/.../captured/repo").
            return new if data == old else data.replace(old + "/", new + "/")
        if isinstance(data, dict):
            return {k: move(v) for k, v in data.items()}
        if isinstance(data, list):
            return [move(v) for v in data]
        return data

    return from_data(move(to_data(value)), type(value))

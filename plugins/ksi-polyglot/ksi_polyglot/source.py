"""The ``polyglot`` task source: a checkout of Aider's polyglot benchmark becomes KSI tasks.

The tasks path (``TASKS``) is the checkout (``<language>/exercises/practice/<name>/``
under it), one language's directory, or one exercise. The source option
``language`` (``python`` or ``python,javascript``) keeps only those
languages; the usual ``--task-ids`` / ``--max-tasks`` select further. Task ids
are ``<language>.<exercise>`` (``python.bank-account``).

The agent's ``repo/`` is the exercise without ``.meta/`` (the reference
solution and the file lists): stubs, tests, build files and ``.docs/``. It
sees the tests, as in Aider's benchmark; the ``polyglot`` evaluator puts the
original tests back before it runs them, so editing them gains nothing.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import ClassVar

import attrs

from ksi.errors import TaskLoadError, problems_header
from ksi.fileops import scratch_dir
from ksi.fstree import copy_tree, remove_tree
from ksi.models import Problem, TaskSpec
from ksi.task_parts import EvalSpec, Runtime, Solution, StartingFiles, TaskOrigin
from ksi_polyglot.exercise import Exercise, read_exercise
from ksi_polyglot.images import image_name
from ksi_polyglot.languages import LANGUAGES, TEST_TIMEOUT_SEC

PRACTICE = ("exercises", "practice")


def instructions_prompt(exercise: Exercise) -> str:
    """The exercise's instructions, then what to change, as Aider's benchmark asks it."""
    files = " ".join(exercise.solution_files)
    return (
        exercise.instructions.rstrip()
        + "\n\n####\n\n"
        + f"Change the files you were given ({files}) to do what the instructions above say.\n"
        "Keep the names of the existing functions, classes and methods: the tests and other "
        "code use them.\n"
        "Use only the language's standard library; do not install or add packages.\n"
    )


def _practice_dirs(language_dir: Path) -> list[Path]:
    practice = language_dir.joinpath(*PRACTICE)
    return sorted(p for p in practice.iterdir() if p.is_dir() and not p.name.startswith("."))


def find_exercises(path: Path) -> tuple[list[tuple[str, Path]], list[Problem]]:
    """``(language, exercise dir)`` for every exercise at ``path``, or why there is none."""
    if not path.is_dir():
        return [], [
            Problem(
                str(path),
                "is not a directory; TASKS must be a checkout of the polyglot benchmark "
                "(<language>/exercises/practice/<exercise>/), a language directory in it, or "
                "one exercise",
            )
        ]
    if (path / ".meta" / "config.json").is_file() and path.parent.parts[-2:] == PRACTICE:
        return [(path.parent.parent.parent.name, path)], []
    if path.joinpath(*PRACTICE).is_dir():
        return [(path.name, d) for d in _practice_dirs(path)], []
    found: list[tuple[str, Path]] = []
    for language_dir in sorted(
        p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")
    ):
        if language_dir.joinpath(*PRACTICE).is_dir():
            found.extend((language_dir.name, d) for d in _practice_dirs(language_dir))
    if not found:
        return [], [
            Problem(
                str(path),
                "holds no exercise: expected <language>/exercises/practice/<exercise>/ "
                "(a checkout of Aider's polyglot-benchmark)",
            )
        ]
    return found, []


@functools.cache
def _starting_files_root() -> Path:
    return scratch_dir()


def starting_files(exercise: Exercise) -> StartingFiles:
    """The exercise without ``.meta/``, copied once per process (the seed of ``repo/``)."""
    dest = _starting_files_root() / exercise.language / exercise.name
    if not dest.is_dir():
        tmp = dest.with_name(dest.name + ".tmp")
        remove_tree(tmp)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        copy_tree(exercise.directory, tmp)
        remove_tree(tmp / ".meta")
        tmp.rename(dest)
    return StartingFiles(directory=str(dest))


def to_task_spec(exercise: Exercise) -> TaskSpec:
    language = LANGUAGES[exercise.language]
    files, why_none = exercise.example_solution()
    return TaskSpec(
        id=exercise.task_id,
        repo="",
        prompt=instructions_prompt(exercise),
        metadata={
            "polyglot": {
                "language": exercise.language,
                "exercise": exercise.name,
                "exercise_dir": str(exercise.directory.absolute()),
                "solution_files": list(exercise.solution_files),
                "test_files": list(exercise.test_files),
                "example_files": list(exercise.example_files),
                "solution_note": why_none,
            }
        },
        eval=EvalSpec(language.test_command, TEST_TIMEOUT_SEC),
        starting_files=starting_files(exercise),
        runtime=Runtime(image=image_name(exercise.language)),
        solution=None if files is None else Solution.checked(files, None),
        origin=TaskOrigin(source="polyglot", file=str(exercise.directory.absolute())),
    )


def _languages(value: str | tuple[str, ...]) -> tuple[str, ...]:
    """``"python,javascript"`` (or a tuple of names) as checked language names."""
    parts = value.split(",") if isinstance(value, str) else value
    names = tuple(n.strip().lower() for n in parts if n.strip())
    unknown = [n for n in names if n not in LANGUAGES]
    if unknown:
        raise ValueError(
            f"unknown language(s) {', '.join(map(repr, unknown))}; the benchmark's are "
            + ", ".join(sorted(LANGUAGES))
        )
    return names


@attrs.define
class PolyglotTaskSource:
    """Aider's polyglot benchmark: <language>/exercises/practice/<exercise>/ directories."""

    name: ClassVar[str] = "polyglot"
    aliases: ClassVar[tuple[str, ...]] = ("aider-polyglot",)
    description: ClassVar[str] = (
        "Aider's polyglot benchmark checkout (cpp, go, java, javascript, python, rust "
        "exercises); graded by each language's tests"
    )
    default_evaluator: ClassVar[str] = "polyglot"
    #: `ksi run DIR` without --task-source names this source.
    reads_directories: ClassVar[bool] = True
    #: ``ksi run --language python,javascript`` sets the ``language`` option.
    cli_options: ClassVar[dict[str, tuple[str, str]]] = {
        "--language": ("language", "polyglot: only these languages (e.g. python,javascript).")
    }

    #: Only these languages (comma-separated); empty: every language in the checkout.
    language: tuple[str, ...] = attrs.field(default=(), converter=_languages)

    def _read(self, path: Path, *, build: bool) -> tuple[list[TaskSpec], list[Problem]]:
        found, problems = find_exercises(Path(path))
        tasks: list[TaskSpec] = []
        unknown: set[str] = set()
        for language, directory in found:
            if self.language and language not in self.language:
                continue
            if language not in LANGUAGES:
                if language in unknown:
                    continue
                unknown.add(language)
                problems.append(
                    Problem(
                        str(directory.parent.parent.parent),
                        f"language {language!r} is not one the benchmark has; KSI knows "
                        + ", ".join(sorted(LANGUAGES)),
                    )
                )
                continue
            exercise, found_problems = read_exercise(language, directory)
            problems.extend(found_problems)
            if exercise is not None and build:
                tasks.append(to_task_spec(exercise))
        if not problems and not tasks and build:
            problems.append(
                Problem(str(path), f"holds no exercise in language(s) {', '.join(self.language)}")
            )
        return tasks, problems

    def load(self, path: Path) -> list[TaskSpec]:
        tasks, problems = self._read(path, build=True)
        if problems:
            raise TaskLoadError(
                problems,
                header=problems_header(f"the polyglot checkout at {path}", len(problems)),
            )
        return tasks

    def validate(self, path: Path) -> list[Problem]:
        return self._read(path, build=False)[1]

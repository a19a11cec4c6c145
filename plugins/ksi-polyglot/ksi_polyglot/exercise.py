"""One exercise of the Polyglot benchmark checkout, read as Aider's benchmark reads it.

Layout (``<checkout>/<language>/exercises/practice/<name>/``)::

    .docs/introduction.md          optional, put before the instructions
    .docs/instructions.md          required
    .docs/instructions.append.md   optional, put after them
    .meta/config.json              {"files": {"solution": [...], "test": [...], "example": [...]}}
    .meta/...                      the example (reference) solution, never shown to the agent
    <stub files>, <test files>, build files (package.json, Cargo.toml, CMakeLists.txt...)

As in Aider's benchmark, the files the agent is asked to change are
``files.solution`` minus build files (``CMakeLists.txt``, ``Cargo.toml``),
tests, examples and anything under ``.meta/`` or ``.docs/``. Every problem is
collected, naming the file and the JSON path. A symlink that leads out of the
exercise is a problem, and nothing of an exercise holding one is read: its
instructions, tests and example would otherwise be whatever host file it names.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from ksi.models import Problem
from ksi.nesting import json_depth_problem
from ksi.tasks.workspace_rules import link_problems

#: Never the agent's to edit, even when ``files.solution`` lists them (as in Aider's benchmark).
BUILD_FILES = frozenset({"CMakeLists.txt", "Cargo.toml"})
FILE_KINDS = ("solution", "test", "example")


@attrs.frozen
class Exercise:
    language: str
    name: str
    directory: Path
    instructions: str
    #: The files the agent is asked to change (relative to the exercise).
    solution_files: tuple[str, ...]
    test_files: tuple[str, ...]
    example_files: tuple[str, ...]

    @property
    def task_id(self) -> str:
        return task_id(self.language, self.name)

    def example_solution(self) -> tuple[dict[str, str] | None, str]:
        """``{solution file: example text}`` for the oracle, or why there is none.

        An example maps onto the solution file of the same name, else of the
        same extension when that is unambiguous, else the only solution file
        (``.meta/example.py`` -> ``two_fer.py``; ``.meta/example.h`` ->
        ``two_fer.h``; ``.meta/src/reference/java/Foo.java`` ->
        ``src/main/java/Foo.java``).
        """
        if not self.example_files:
            return None, ".meta/config.json lists no example files"
        files: dict[str, str] = {}
        for example in self.example_files:
            target = _match(example, self.solution_files)
            if target is None:
                return None, (
                    f"cannot tell which of {list(self.solution_files)} the example "
                    f"{example!r} solves"
                )
            try:
                files[target] = (self.directory / example).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                return None, f"cannot read the example {example!r}: {exc}"
        return files, ""


def task_id(language: str, exercise: str) -> str:
    """``python.bank-account``: no ``/``, whose escape (``%2F``) in attempt directory names
    breaks toolchains (Rust's linker cannot write under a path holding ``%``)."""
    return f"{language}.{exercise}"


def _match(example: str, solutions: tuple[str, ...]) -> str | None:
    ex = PurePosixPath(example)
    for attempt in (
        [s for s in solutions if PurePosixPath(s).name == ex.name],
        [s for s in solutions if PurePosixPath(s).suffix == ex.suffix],
        list(solutions),
    ):
        if len(attempt) == 1:
            return attempt[0]
    return None


def _file_list(config: Any, kind: str, where: str, problems: list[Problem]) -> list[str]:
    files = config.get("files") if isinstance(config, dict) else None
    value = files.get(kind) if isinstance(files, dict) else None
    if value is None:
        if kind == "example":
            return []
        problems.append(
            Problem(where, f"is missing; list the exercise's {kind} files", field=f"$.files.{kind}")
        )
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(
            Problem(
                where,
                f"must be a list of relative paths, got {value!r:.60}",
                field=f"$.files.{kind}",
            )
        )
        return []
    return list(value)


def read_exercise(language: str, directory: Path) -> tuple[Exercise | None, list[Problem]]:
    """The exercise in ``directory``, or every problem that keeps it from loading."""
    tid = task_id(language, directory.name)
    links = link_problems(directory, "the exercise directory", task_id=tid)
    if links:
        return None, links
    problems: list[Problem] = []
    config_path = directory / ".meta" / "config.json"
    where = str(config_path)
    config: Any = None
    text = ""
    try:
        text = config_path.read_text(encoding="utf-8")
        config = json.loads(text)
    except FileNotFoundError:
        problems.append(Problem(where, "is missing: every exercise needs .meta/config.json"))
    except (OSError, ValueError) as exc:
        problems.append(Problem(where, f"cannot be read as JSON: {exc}"))
    except RecursionError:
        deep = json_depth_problem(text)
        problems.append(Problem(where, deep.message, f"line {deep.line}", field=deep.field))
    if config is not None and not isinstance(config, dict):
        problems.append(Problem(where, "must be a JSON object with a 'files' object"))
        config = None
    lists = (
        {kind: _file_list(config, kind, where, problems) for kind in FILE_KINDS} if config else {}
    )
    for kind, rels in lists.items():
        for i, rel in enumerate(rels):
            path = PurePosixPath(rel)
            if path.is_absolute() or ".." in path.parts:
                problems.append(
                    Problem(
                        where,
                        f"{rel!r} must be a path inside the exercise",
                        field=f"$.files.{kind}[{i}]",
                    )
                )
            elif not (directory / rel).is_file():
                problems.append(
                    Problem(
                        where,
                        f"names {rel!r}, which does not exist in {directory}",
                        field=f"$.files.{kind}[{i}]",
                    )
                )
    docs = directory / ".docs"
    if not (docs / "instructions.md").is_file():
        problems.append(
            Problem(str(docs / "instructions.md"), "is missing: the exercise's instructions")
        )
    if problems:
        return None, [attrs.evolve(p, task_id=tid) for p in problems]
    instructions = "".join(
        (docs / name).read_text(encoding="utf-8")
        for name in ("introduction.md", "instructions.md", "instructions.append.md")
        if (docs / name).is_file()
    )
    hidden = set(lists["test"]) | set(lists["example"])
    solution = [
        rel
        for rel in lists["solution"]
        if rel not in hidden
        and PurePosixPath(rel).name not in BUILD_FILES
        and PurePosixPath(rel).parts[0] not in (".meta", ".docs")
    ]
    if not solution:
        return None, [
            Problem(
                where,
                "lists no solution file the agent could edit",
                field="$.files.solution",
                task_id=tid,
            )
        ]
    return (
        Exercise(
            language=language,
            name=directory.name,
            directory=directory,
            instructions=instructions,
            solution_files=tuple(solution),
            test_files=tuple(lists["test"]),
            example_files=tuple(lists["example"]),
        ),
        [],
    )

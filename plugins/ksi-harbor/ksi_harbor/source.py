"""The ``harbor`` task source: Harbor task directories become KSI tasks.

The tasks path (``TASKS``) is one task directory (it holds ``task.toml`` or
``instruction.md``) or a directory of them (every non-hidden subdirectory
holding any task file is a task; others are ignored). The task id is the
directory's name. Every problem in every task is reported at once.

How a Harbor task maps onto KSI's workspace contract
-----------------------------------------------------
A Harbor task's starting files live in its image (usually in its
``WORKDIR``, e.g. ``/app``), not in a ``repo/`` KSI seeds. So:

* ``repo_path`` is an empty directory: KSI's ``repo/`` starts empty and stays
  out of the way;
* ``agent_workdir`` names the directory inside the container where the agent
  must work (the Dockerfile's final ``WORKDIR``; ``None`` means "the image's
  WORKDIR"). The docker environment runs the agent there;
* ``workspace_note`` is ``False``: the instruction is given verbatim, without
  KSI's note about ``repo/`` (Harbor instructions name their own paths);
* grading happens inside the container (the ``harbor`` evaluator), so what
  counts is the container's state, exactly as in Harbor;
* ``docker_user`` (``[agent] user``, else ``image``: the image's own user) and
  ``docker_capabilities`` (``default``) make the docker environment run the
  task as Harbor does, with no extra options; ``cpus`` and ``memory_mb`` (from
  ``[environment]``) become the container's limits.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.compat.original import legacy_metadata
from ksi.errors import TaskLoadError, problems_header
from ksi.models import Problem, TaskSpec
from ksi.task_parts import EvalSpec, Runtime, Solution, StartingFiles, TaskOrigin
from ksi_harbor.solution import SolutionTooLarge, oracle_command
from ksi_harbor.taskdir import HarborTask, looks_like_task_dir, read_task_dir


@functools.cache
def _empty_repo() -> str:
    """One empty directory per process, the seed of every Harbor task's ``repo/``."""
    return tempfile.mkdtemp(prefix="ksi-harbor-empty-repo-")


def find_task_dirs(path: Path) -> tuple[list[Path], list[Problem]]:
    """The task directories ``path`` names, or the problem that it names none."""
    if not path.exists():
        return [], [
            Problem(
                str(path),
                "does not exist; TASKS must be a Harbor task directory or a directory of them",
            )
        ]
    if path.is_file():
        if path.name in ("task.toml", "instruction.md"):
            return [path.parent], []
        return [], [
            Problem(
                str(path),
                "is a file; the harbor source expects a task directory (with task.toml, "
                "instruction.md, environment/, tests/) or a directory of them",
            )
        ]
    if (path / "task.toml").is_file() or (path / "instruction.md").is_file():
        return [path], []
    dirs = sorted(
        p for p in path.iterdir() if not p.name.startswith(".") and looks_like_task_dir(p)
    )
    if not dirs:
        return [], [
            Problem(
                str(path),
                "holds no Harbor task: expected task.toml and instruction.md in it or in "
                "its subdirectories",
            )
        ]
    return dirs, []


#: The original KSI's metadata keys a Harbor task's ``metadata`` holds (README).
_KSI_KEYS = (
    "task_source",
    "repo_path",
    "eval_command",
    "eval_timeout_sec",
    "agent_timeout_sec",
    "docker_image",
    "dockerfile",
    "docker_context",
    "agent_workdir",
    "workspace_note",
    "cpus",
    "memory_mb",
    "docker_user",
    "docker_capabilities",
)


def to_task_spec(task: HarborTask, *, prefer_dockerfile: bool = False) -> TaskSpec:
    """The KSI task for one Harbor task: KSI's typed parts, plus Harbor's own metadata.

    ``metadata`` keeps every key the README documents; those that are KSI's
    (``eval_command``, ``docker_image``, ``cpus``...) are read from the typed parts.
    """
    solution: Solution | None = None
    solution_note = ""
    if task.solution_dir is not None:
        try:
            command = oracle_command(task.solution_dir, workdir=task.workdir, env=task.solution_env)
        except SolutionTooLarge as exc:
            solution_note = str(exc)
        else:
            solution = Solution(files=None, command=command)
    else:
        solution_note = "the task has no solution/solve.sh"

    dockerfile = task.dockerfile.absolute() if task.dockerfile is not None else None
    use_image = task.docker_image is not None and not (prefer_dockerfile and dockerfile)
    runtime = Runtime(
        image=task.docker_image if use_image else None,
        dockerfile=None if use_image or dockerfile is None else str(dockerfile),
        docker_context=None if use_image or dockerfile is None else str(dockerfile.parent),
        cpus=task.cpus,
        memory_mb=task.memory_mb,
        # As in Harbor: the image's user ([agent] user when set; root in most task images)
        # with the engine's default capabilities, since tasks and their test.sh write /app,
        # /tests and /logs and often install packages. The docker environment applies these.
        user=task.agent_user or "image",
        capabilities="default",
        workdir=task.workdir,
        agent_timeout_sec=task.agent_timeout_sec,
    )
    own: dict[str, Any] = {
        "solution": {"files": None, "command": solution.command} if solution else None,
        # Harbor's own.
        "build_timeout_sec": task.build_timeout_sec,
        "storage_mb": task.storage_mb,
        "gpus": task.gpus,
        "allow_internet": task.allow_internet,
        "harbor": {
            "task_dir": str(task.task_dir.absolute()),
            "tests_dir": str(task.tests_dir.absolute()),
            "name": task.name,
            "schema_version": task.schema_version,
            "metadata": task.metadata,
            "verifier_env": task.verifier_env,
            "verifier_user": task.verifier_user,
            "agent_user": task.agent_user,
            "solution_note": solution_note,
        },
    }
    spec = TaskSpec(
        id=task.id,
        repo="",
        prompt=task.instruction,
        metadata=own,
        eval=EvalSpec("bash /tests/test.sh", task.verifier_timeout_sec),
        # KSI's repo/ starts empty: the starting files live in the image.
        starting_files=StartingFiles(directory=_empty_repo()),
        runtime=runtime,
        solution=solution,
        origin=TaskOrigin(source="harbor", file=str(task.task_dir.absolute())),
        workspace_note=False,
    )
    # KSI's keys, for readers of the README's list: what the typed parts say.
    return attrs.evolve(spec, metadata={**legacy_metadata(spec, _KSI_KEYS), **own})


@attrs.define
class HarborTaskSource:
    """Harbor / Terminal-Bench 2 task directories (instruction.md, task.toml, tests/...)."""

    name: ClassVar[str] = "harbor"
    aliases: ClassVar[tuple[str, ...]] = ("terminal-bench", "tb2")
    description: ClassVar[str] = (
        "Harbor task directories (Terminal-Bench 2 format): one task per directory, "
        "graded in its container by tests/test.sh"
    )
    default_evaluator: ClassVar[str] = "harbor"
    #: `ksi run DIR` without --task-source names this source.
    reads_directories: ClassVar[bool] = True

    #: Build environment/Dockerfile even when task.toml names a prebuilt docker_image
    #: (Harbor's --force-build).
    force_build: bool = False

    def _read(self, path: Path) -> tuple[list[TaskSpec], list[Problem]]:
        dirs, problems = find_task_dirs(Path(path))
        tasks: list[TaskSpec] = []
        for task_dir in dirs:
            task, task_problems = read_task_dir(task_dir)
            problems.extend(task_problems)
            if task is not None:
                tasks.append(to_task_spec(task, prefer_dockerfile=self.force_build))
        return tasks, problems

    def load(self, path: Path) -> list[TaskSpec]:
        tasks, problems = self._read(path)
        if problems:
            raise TaskLoadError(
                problems,
                header=problems_header(f"Harbor tasks at {path}", len(problems)),
            )
        return tasks

    def validate(self, path: Path) -> list[Problem]:
        return self._read(path)[1]

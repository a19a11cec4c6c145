"""The typed task contract: TaskSpec's parts, the original KSI's metadata form, pickling.

Real files, real subprocesses, real eval commands.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

import ksi
from ksi.environments.docker import container_settings
from ksi.errors import InvalidTaskError, UserInputError
from ksi.eval.command import CommandEvaluator
from ksi.models import TaskSpec
from ksi.task_parts import EvalSpec, Runtime, Solution, StartingFiles, TaskOrigin
from ksi.tasks.custom import CustomTaskSource, load_custom_tasks
from ksi.tasks.loaders import load_tasks_for_source
from ksi.tasks.prompts import REPO_NOTE, agent_prompt
from ksi.tasks.seed import seed_repo


def write_tasks(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


INLINE = {
    "task_id": "inline",
    "prompt": "Make check.sh pass.",
    "files": {"check.sh": "test -f done\n", "src/a.py": "A = 1\n"},
    "eval": {"command": "sh check.sh", "timeout_sec": 20},
    "solution": {"command": "touch done"},
}


# -- the two forms build the same task ------------------------------------------------------


def test_typed_form_and_metadata_form_build_equal_tasks(tmp_path: Path) -> None:
    typed = TaskSpec(
        id="t",
        repo="",
        prompt="p",
        eval=EvalSpec(command="python3 tests.py", timeout_sec=300.0),
        starting_files=StartingFiles(directory=str(tmp_path)),
        origin=TaskOrigin(source="custom"),
    )
    original = TaskSpec(
        id="t",
        repo="",
        prompt="p",
        metadata={
            "task_source": "custom",
            "repo_path": str(tmp_path),
            "eval_command": "python3 tests.py",
            "eval_timeout_sec": 300,
        },
    )
    assert typed == original
    assert original.eval == EvalSpec("python3 tests.py", 300.0)
    assert original.starting_files.directory == str(tmp_path)
    assert original.origin.source == "custom"
    # The original's keys read back exactly as given: nothing is written into metadata.
    assert original.metadata == {
        "task_source": "custom",
        "repo_path": str(tmp_path),
        "eval_command": "python3 tests.py",
        "eval_timeout_sec": 300,
    }
    assert isinstance(original.metadata["eval_timeout_sec"], int)
    assert typed.metadata == {}
    assert typed != attrs.evolve(typed, eval=EvalSpec("other"))


def test_a_given_typed_part_wins_and_the_metadata_is_kept_as_given() -> None:
    task = TaskSpec(id="t", eval=EvalSpec("typed"), metadata={"eval_command": "meta", "mine": 1})
    assert task.eval.command == "typed"
    assert task.metadata == {"eval_command": "meta", "mine": 1}
    # A part left at its default is filled from the keys (per part).
    mixed = TaskSpec(id="t", eval=EvalSpec("typed"), metadata={"docker_user": "1000:1000"})
    assert mixed.runtime.user == "1000:1000" and mixed.eval.command == "typed"


def test_plugin_keys_are_kept_and_count_for_equality() -> None:
    a = TaskSpec(id="t", metadata={"answer": "Paris"})
    assert a.metadata == {"answer": "Paris"}
    assert a != TaskSpec(id="t", metadata={"answer": "Rome"})


def test_runtime_keys_of_the_metadata_form_reach_the_container_settings() -> None:
    task = TaskSpec(
        id="t",
        metadata={
            "cpus": 0.5,
            "memory_mb": 64.0,
            "docker_user": " 4321:4321 ",
            "agent_workdir": "/app",
        },
    )
    assert task.runtime == Runtime(cpus=0.5, memory_mb=64, user="4321:4321", workdir="/app")
    got = container_settings(task, cpus=2.0, memory="1g", user="host", capabilities="none")
    assert (got.cpus, got.memory, got.user, got.capabilities) == (0.5, "64m", "4321:4321", "none")
    net = TaskSpec(id="n", runtime=Runtime(network="none"))
    assert (
        container_settings(net, cpus=None, memory=None, user="host", capabilities="none").network
        == "none"
    )
    with pytest.raises(UserInputError, match=r"task 'bad': runtime.network"):
        container_settings(
            TaskSpec(id="bad", runtime=Runtime(network="no such;net")),
            cpus=None,
            memory=None,
            user="host",
            capabilities="none",
        )


# -- bad values are refused when the task is built ----------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: EvalSpec(timeout_sec=0), "timeout_sec must be a number of seconds > 0, got 0"),
        (lambda: EvalSpec(timeout_sec=True), "timeout_sec must be a number of seconds > 0"),
        (lambda: EvalSpec(command=None), "command must be a string, got None"),
        (lambda: StartingFiles(files={"../x.py": "x"}), r"files\['../x.py'\]: .*'\.\.'"),
        (lambda: StartingFiles(files={"a.py": 1}), r"files\['a.py'\] must be the file's text"),
        (lambda: StartingFiles(directory="d", files={}), "a directory or inline files, not both"),
        (lambda: Runtime(cpus=0), r"cpus must be a number of CPUs > 0"),
        (lambda: Runtime(memory_mb=2), r"memory_mb must be a number of MiB >= 4"),
        (lambda: Runtime(capabilities="all"), "capabilities must be 'none' or 'default'"),
        (lambda: Runtime(agent_timeout_sec=-1), "agent_timeout_sec must be a number of seconds"),
        (lambda: Solution(command=["make"]), "solution.command must be a shell command"),
        (lambda: TaskOrigin(file=None), "origin.file must be a string, got None"),
        (
            lambda: TaskSpec(id="t", eval="true"),
            r"task 't': eval must be an EvalSpec \(from ksi.task_parts\), got str",
        ),
        (
            lambda: TaskSpec(id="t", metadata={"memory_mb": "lots"}),
            r"task 't': metadata memory_mb must be a number of MiB >= 4 \(e.g. 2048\), got 'lots'",
        ),
        (
            lambda: TaskSpec(id="t", metadata={"solution": "make"}),
            "task 't': metadata solution must be an object",
        ),
    ],
)
def test_invalid_values_are_refused_with_a_clear_error(build: Any, message: str) -> None:
    with pytest.raises(InvalidTaskError, match=message) as info:
        build()
    assert isinstance(info.value, UserInputError) and isinstance(info.value, ValueError)


# -- loading: typed for ksi run, the original's shape for its two entry points --------------


def test_the_source_loads_typed_parts_and_writes_nothing(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "t.jsonl", INLINE)
    (task,) = CustomTaskSource().load(path)
    assert task.prompt == "Make check.sh pass."
    assert task.eval == EvalSpec("sh check.sh", 20.0)
    assert task.starting_files.kind == "inline" and task.starting_files.directory is None
    assert task.solution == Solution(command="touch done")
    assert task.origin == TaskOrigin("custom", str(path.resolve()), "line 1")
    assert task.metadata == {}


@pytest.mark.parametrize("entry", ["load_tasks_for_source", "load_custom_tasks"])
def test_original_entry_points_give_repo_path_and_the_noted_prompt(
    tmp_path: Path, entry: str
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "seed.txt").write_text("seed")
    path = write_tasks(
        tmp_path / "t.jsonl", INLINE, {"task_id": "dir", "prompt": "Go.", "workspace_dir": "ws"}
    )
    if entry == "load_custom_tasks":
        inline, from_dir = load_custom_tasks(path)
    else:
        inline, from_dir = load_tasks_for_source(task_source="custom", tasks_path=path)
    repo = Path(inline.metadata["repo_path"])
    assert (repo / "src" / "a.py").read_text() == "A = 1\n"
    assert from_dir.metadata["repo_path"] == str((tmp_path / "ws").resolve())
    assert inline.metadata["solution"] == {"command": "touch done"}
    for task in (inline, from_dir):
        assert task.prompt.endswith("\n\n" + REPO_NOTE)
        # The agent-prompt helper never adds it twice.
        assert agent_prompt(task) == task.prompt
        assert agent_prompt(task).count(REPO_NOTE) == 1


def test_a_run_of_originally_loaded_tasks_gives_the_note_once(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "t.jsonl", INLINE)
    tasks = load_tasks_for_source(task_source="custom", tasks_path=path)
    summary = ksi.run(tasks, agent="oracle", run_dir=tmp_path / "run")
    [record] = summary.records
    assert record.score == 1.0
    prompt = (tmp_path / "run" / record.attempt_dir / "prompt.md").read_text()
    assert prompt.count(REPO_NOTE) == 1 and prompt.startswith("Make check.sh pass.")


def test_ksi_run_writes_no_temporary_starting_files(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "t.jsonl", *({**INLINE, "task_id": f"t{i}"} for i in range(5)))
    script = (
        "import glob, os, tempfile, ksi\n"
        f"s = ksi.run({str(path)!r}, agent='oracle', run_dir={str(tmp_path / 'run')!r})\n"
        "print(s.solved_tasks)\n"
        "print(len(glob.glob(os.path.join(tempfile.gettempdir(), f'ksi-tasks-{os.getpid()}-*'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["5", "0"]


# -- picklable, and seeding works in another process ---------------------------------------


SEED_IN_CHILD = """
import pickle, sys
from pathlib import Path
from ksi.tasks.seed import seed_repo
task = pickle.loads(Path(sys.argv[1]).read_bytes())
seed_repo(task, Path(sys.argv[2]))
print(task.id, task.eval.command)
"""


@pytest.mark.parametrize("loader", ["source", "original"])
def test_a_loaded_task_pickles_and_seeds_in_another_process(tmp_path: Path, loader: str) -> None:
    path = write_tasks(tmp_path / "t.jsonl", INLINE)
    if loader == "source":
        (task,) = CustomTaskSource().load(path)
    else:
        (task,) = load_custom_tasks(path)
    again = pickle.loads(pickle.dumps(task))
    assert again == task and again.metadata == task.metadata
    blob = tmp_path / "task.pickle"
    blob.write_bytes(pickle.dumps(task))
    dest = tmp_path / "child" / "repo"
    out = subprocess.run(
        [sys.executable, "-c", SEED_IN_CHILD, str(blob), str(dest)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["inline", "sh", "check.sh"]
    assert (dest / "check.sh").read_text() == "test -f done\n"
    assert (dest / "src" / "a.py").read_text() == "A = 1\n"


def test_seed_from_a_missing_directory_names_the_task(tmp_path: Path) -> None:
    task = TaskSpec(id="gone", starting_files=StartingFiles(directory=str(tmp_path / "nope")))
    with pytest.raises(UserInputError, match=r"task 'gone': .* is not an existing directory"):
        seed_repo(task, tmp_path / "dest")


# -- the original's status words from CommandEvaluator().evaluate() -------------------------


def _evaluate(task: TaskSpec, workdir: Path | None, **options: Any) -> dict[str, Any]:
    meta = {"host_workspace_repo_dir": str(workdir)} if workdir is not None else {}
    return CommandEvaluator(**options).evaluate(task=task, model_output="", runtime_meta=meta)


def _task(command: str, timeout: float = 60.0) -> TaskSpec:
    return TaskSpec(
        id="w", repo="", prompt="p", metadata={"eval_command": command, "eval_timeout_sec": timeout}
    )


def test_evaluated_for_a_command_that_ran(tmp_path: Path) -> None:
    out = _evaluate(_task("exit 3"), tmp_path)
    assert (out["status"], out["native_score"], out["exit_code"]) == ("evaluated", 0.0, 3)
    # KSI's own grade() keeps KSI's word.
    assert CommandEvaluator().grade(_task("exit 3"), tmp_path).status == "scored"


def test_eval_timeout(tmp_path: Path) -> None:
    out = _evaluate(_task("sleep 30", timeout=1.0), tmp_path)
    assert (out["status"], out["native_score"], out["resolved"]) == ("eval_timeout", None, False)


def test_eval_spawn_failed(tmp_path: Path) -> None:
    out = _evaluate(_task("true"), tmp_path, shell=str(tmp_path / "no-such-shell"))
    assert (out["status"], out["native_score"]) == ("eval_spawn_failed", None)


def test_no_workspace(tmp_path: Path) -> None:
    out = _evaluate(_task("true"), tmp_path / "missing")
    assert (out["status"], out["native_score"]) == ("no_workspace", None)


def test_no_eval_command(tmp_path: Path) -> None:
    out = _evaluate(TaskSpec(id="w", prompt="p"), tmp_path)
    assert (out["status"], out["native_score"]) == ("no_eval_command", None)


def test_a_run_record_keeps_ksis_own_statuses(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "t.jsonl", INLINE, {"task_id": "manual", "prompt": "Look."})
    summary = ksi.run(str(path), agent="oracle", run_dir=tmp_path / "run", task_ids=["inline"])
    assert [r.status for r in summary.records] == ["scored"]
    assert summary.records[0].eval.status == "scored"
    assert os.path.isdir(tmp_path / "run")

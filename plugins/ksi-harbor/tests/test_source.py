"""The harbor task source: good task directories load faithfully, bad ones say exactly why."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from harbor_helpers import GOOD_TOML, make_task
from ksi_harbor.source import HarborTaskSource
from ksi_harbor.taskdir import dockerfile_workdir

from ksi.errors import TaskLoadError


def messages(problems: list) -> list[str]:
    return [str(p) for p in problems]


def test_one_task_directory_loads_with_its_own_settings(tmp_path: Path) -> None:
    task_dir = make_task(tmp_path)
    [task] = HarborTaskSource().load(task_dir)
    md = task.metadata
    assert task.id == "hello-world"
    assert task.prompt == "Create /app/hello.txt containing exactly 'Hello, world!'.\n"
    assert md["task_source"] == "harbor"
    assert md["eval_timeout_sec"] == 60.0
    assert md["agent_timeout_sec"] == 120.0
    assert md["build_timeout_sec"] == 300.0
    assert (md["cpus"], md["memory_mb"], md["storage_mb"]) == (1.0, 512, 1024)
    assert md["dockerfile"] == str(task_dir / "environment" / "Dockerfile")
    assert md["docker_context"] == str(task_dir / "environment")
    assert md["docker_image"] is None
    assert md["agent_workdir"] == "/app"
    assert md["workspace_note"] is False
    # Run as Harbor runs it (the image's user, default capabilities) with no --environment-option.
    assert (md["docker_user"], md["docker_capabilities"]) == ("image", "default")
    assert md["harbor"]["metadata"]["tags"] == ["trivial"]
    assert md["harbor"]["tests_dir"] == str(task_dir / "tests")
    # KSI's repo/ starts empty: the starting files live in the image.
    assert Path(md["repo_path"]).is_dir() and not any(Path(md["repo_path"]).iterdir())


def test_the_oracle_command_never_puts_tests_in_reach(tmp_path: Path) -> None:
    task_dir = make_task(tmp_path)
    [task] = HarborTaskSource().load(task_dir)
    solution = task.metadata["solution"]
    assert solution["files"] is None
    command = solution["command"]
    assert "bash /solution/solve.sh" in command
    assert "cd /app" in command
    encoded = base64.b64encode((task_dir / "solution" / "solve.sh").read_bytes()).decode()
    assert encoded[:60] in command
    # tests/ stays with the evaluator.
    test_sh = base64.b64encode((task_dir / "tests" / "test.sh").read_bytes()).decode()
    assert test_sh[:60] not in command and "/tests" not in command


def test_a_directory_of_tasks_loads_each_and_skips_unrelated_entries(tmp_path: Path) -> None:
    make_task(tmp_path, "b-task")
    make_task(tmp_path, "a-task", solve_sh=None)
    (tmp_path / "README.md").write_text("a dataset")
    (tmp_path / "notes").mkdir()
    (tmp_path / ".git").mkdir()
    tasks = HarborTaskSource().load(tmp_path)
    assert [t.id for t in tasks] == ["a-task", "b-task"]
    assert tasks[0].metadata["solution"] is None
    assert "no solution" in tasks[0].metadata["harbor"]["solution_note"]


def test_defaults_and_legacy_spellings_are_read_as_harbor_reads_them(tmp_path: Path) -> None:
    toml = '[environment]\nmemory = "4G"\nstorage = "512M"\ndocker_image = "org/img:1"\n'
    [task] = HarborTaskSource().load(make_task(tmp_path, toml=toml, dockerfile=None))
    md = task.metadata
    assert md["eval_timeout_sec"] == 600.0 and md["agent_timeout_sec"] == 600.0
    assert (md["memory_mb"], md["storage_mb"]) == (4096, 512)
    assert md["docker_image"] == "org/img:1" and md["dockerfile"] is None
    assert md["agent_workdir"] is None  # only the image knows


def test_an_agent_user_in_task_toml_is_the_containers_user(tmp_path: Path) -> None:
    toml = '[agent]\nuser = "builder"\n'
    [task] = HarborTaskSource().load(make_task(tmp_path, toml=toml))
    assert task.metadata["docker_user"] == "builder"


def test_schema_1_1_task_table_and_env_tables(tmp_path: Path) -> None:
    toml = (
        'schema_version = "1.1"\n[task]\nname = "org/hello"\n'
        '[verifier]\ntimeout_sec = 30\nenv = { MODE = "strict" }\n'
        '[solution]\nenv = { HINT = "it works" }\n'
    )
    [task] = HarborTaskSource().load(make_task(tmp_path, toml=toml))
    harbor = task.metadata["harbor"]
    assert harbor["name"] == "org/hello" and harbor["schema_version"] == "1.1"
    assert harbor["verifier_env"] == {"MODE": "strict"}
    assert "HINT='it works'" in task.metadata["solution"]["command"]


def test_force_build_prefers_the_dockerfile_over_a_prebuilt_image(tmp_path: Path) -> None:
    toml = GOOD_TOML + 'docker_image = "org/prebuilt:1"\n'
    task_dir = make_task(tmp_path, toml=toml)
    [prebuilt] = HarborTaskSource().load(task_dir)
    [built] = HarborTaskSource(force_build=True).load(task_dir)
    assert prebuilt.metadata["docker_image"] == "org/prebuilt:1"
    assert prebuilt.metadata["dockerfile"] is None
    assert built.metadata["docker_image"] is None
    assert built.metadata["dockerfile"].endswith("environment/Dockerfile")


@pytest.mark.parametrize(
    ("dockerfile", "workdir"),
    [
        ("FROM x\nWORKDIR /app\n", "/app"),
        ("FROM x\nWORKDIR /srv\nWORKDIR code\n", "/srv/code"),
        ("FROM x\n", None),
        ("FROM x\nWORKDIR $HOME/app\n", None),
        ("FROM x AS build\nWORKDIR /build\nFROM y\nRUN true\n", None),
        ("FROM x AS base\nWORKDIR /base\nFROM base\nRUN true\n", "/base"),
        ('FROM x\nworkdir ["/quoted"]\n', "/quoted"),
    ],
)
def test_workdir_is_the_final_stages_plain_workdir(dockerfile: str, workdir: str | None) -> None:
    assert dockerfile_workdir(dockerfile) == workdir


# -- bad task directories --------------------------------------------------------


def problems_for(tmp_path: Path, **kw: object) -> list[str]:
    task_dir = make_task(tmp_path, **kw)  # type: ignore[arg-type]
    return messages(HarborTaskSource().validate(task_dir))


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            "[verifier]\ntimeout_sec = 0\n",
            "task.toml: task 'hello-world': $.verifier.timeout_sec: must be a number > 0, got 0",
        ),
        (
            '[verifier]\ntimeout_sec = "60"\n',
            "$.verifier.timeout_sec: must be a number > 0, got '60'",
        ),
        ("[agent]\ntimeout_sec = -5\n", "$.agent.timeout_sec: must be a number > 0, got -5"),
        (
            "[environment]\nbuild_timeout_sec = true\n",
            "$.environment.build_timeout_sec: must be a number > 0, got True",
        ),
        ("[environment]\ncpus = 0\n", "$.environment.cpus: must be a number > 0, got 0"),
        (
            "[environment]\nmemory_mb = 1.5\n",
            "$.environment.memory_mb: must be a whole number > 0, got 1.5",
        ),
        (
            '[environment]\nmemory = "lots"\n',
            '$.environment.memory: must be a size such as "512M" or "4G"',
        ),
        (
            '[environment]\nallow_internet = "no"\n',
            "$.environment.allow_internet: must be true or false, got 'no'",
        ),
        ("[environment]\ngpus = -1\n", "$.environment.gpus: must be a whole number >= 0, got -1"),
        (
            '[environment]\ndocker_image = ""\n',
            "$.environment.docker_image: must be a non-empty string",
        ),
        ("verifier = 3\n", "$.verifier: must be a table ([verifier]), got 3"),
        ("[verifier]\nenv = { A = 1 }\n", "$.verifier.env.A: must be a string, got 1"),
        ('[solution]\nenv = "A=1"\n', "$.solution.env: must be a table of strings"),
        ("version = 1.0\n", '$.version: must be a string such as "1.0", got 1.0'),
        ("[task]\nname = 3\n", "$.task.name: must be a non-empty string, got 3"),
    ],
)
def test_each_bad_task_toml_value_is_named_with_its_path(
    tmp_path: Path, toml: str, expected: str
) -> None:
    [problem] = problems_for(tmp_path, toml=toml)
    assert expected in problem
    assert problem.startswith(str(tmp_path / "hello-world" / "task.toml"))


def test_invalid_toml_names_line_and_column(tmp_path: Path) -> None:
    [problem] = problems_for(tmp_path, toml="[verifier]\ntimeout_sec = = 3\n")
    assert f"{tmp_path / 'hello-world' / 'task.toml'}:2:" in problem
    assert "is not valid TOML" in problem


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"toml": None}, "task.toml: task 'hello-world': missing"),
        ({"instruction": None}, "instruction.md: task 'hello-world': missing"),
        ({"instruction": "  \n"}, "instruction.md: task 'hello-world': is empty"),
        (
            {"dockerfile": None},
            "environment/Dockerfile: task 'hello-world': missing: "
            "add environment/Dockerfile or set "
            "[environment].docker_image",
        ),
        ({"test_sh": None}, "tests/test.sh: task 'hello-world': missing: the verifier script"),
        (
            {"extra": {"environment/docker-compose.yaml": "services: {}\n"}},
            "environment/docker-compose.yaml: task 'hello-world': multi-container tasks are "
            "not supported",
        ),
    ],
)
def test_each_missing_or_unsupported_file_is_named(
    tmp_path: Path, kw: dict[str, object], expected: str
) -> None:
    [problem] = problems_for(tmp_path, **kw)
    assert expected in problem


def test_solution_dir_without_solve_sh_is_a_problem(tmp_path: Path) -> None:
    task_dir = make_task(tmp_path, solve_sh=None, extra={"solution/notes.md": "x"})
    [problem] = messages(HarborTaskSource().validate(task_dir))
    assert "solution/solve.sh: task 'hello-world': missing: solution/ exists" in problem


def test_non_utf8_instruction_is_a_problem(tmp_path: Path) -> None:
    task_dir = make_task(tmp_path)
    (task_dir / "instruction.md").write_bytes(b"\xff\xfe bad")
    [problem] = messages(HarborTaskSource().validate(task_dir))
    assert "instruction.md" in problem and "not UTF-8" in problem


def test_every_problem_in_every_task_is_reported_at_once_and_nothing_loads(
    tmp_path: Path,
) -> None:
    make_task(tmp_path, "good")
    make_task(tmp_path, "bad-one", toml="[verifier]\ntimeout_sec = 0\n[agent]\ntimeout_sec = 0\n")
    make_task(tmp_path, "bad-two", instruction=None, test_sh=None)
    with pytest.raises(TaskLoadError) as info:
        HarborTaskSource().load(tmp_path)
    err = info.value
    assert len(err.problems) == 4
    assert {p.task_id for p in err.problems} == {"bad-one", "bad-two"}
    assert "4 problems; no task was loaded" in str(err)
    assert isinstance(err, ValueError)  # what the original KSI's callers catch


def test_paths_that_hold_no_task(tmp_path: Path) -> None:
    source = HarborTaskSource()
    [missing] = messages(source.validate(tmp_path / "nope"))
    assert "does not exist" in missing
    [empty] = messages(source.validate(tmp_path))
    assert "holds no Harbor task" in empty
    (tmp_path / "tasks.jsonl").write_text("{}\n")
    [a_file] = messages(source.validate(tmp_path / "tasks.jsonl"))
    assert "is a file" in a_file


def test_pointing_at_task_toml_means_its_directory(tmp_path: Path) -> None:
    task_dir = make_task(tmp_path)
    [task] = HarborTaskSource().load(task_dir / "task.toml")
    assert task.id == "hello-world"


def test_the_source_and_evaluator_are_found_through_the_plugin(
    harbor_plugin: None, tmp_path: Path
) -> None:
    from ksi.plugins import registry

    source = registry("task source").get("harbor")
    assert source.plugin == "ksi-harbor"
    assert source.obj.default_evaluator == "harbor"
    assert registry("task source").get("TB2").obj is HarborTaskSource
    evaluator = registry("evaluator").get("harbor").obj
    assert evaluator.grades_in == "environment"


def test_a_solution_too_large_for_one_command_leaves_the_task_without_one(
    tmp_path: Path,
) -> None:
    import os

    task_dir = make_task(tmp_path)
    (task_dir / "solution" / "blob.bin").write_bytes(os.urandom(100 * 1024))
    [task] = HarborTaskSource().load(task_dir)
    assert task.metadata["solution"] is None
    assert "KiB" in task.metadata["harbor"]["solution_note"]


def test_the_shipped_examples_load(monkeypatch: pytest.MonkeyPatch) -> None:
    examples = Path(__file__).resolve().parent.parent / "examples"
    monkeypatch.chdir(examples.parent)
    tasks = HarborTaskSource().load(Path("examples"))
    assert [t.id for t in tasks] == ["hello-world", "partial-credit"]
    # Paths KSI hands to environments are absolute, whatever the user typed.
    assert tasks[0].metadata["dockerfile"] == str(examples / "hello-world/environment/Dockerfile")
    assert tasks[0].metadata["harbor"]["tests_dir"] == str(examples / "hello-world/tests")

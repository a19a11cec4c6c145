"""Bad input a user can give ``ksi run`` is refused before anything starts (issue 29 §5).

Each case runs the real ``ksi`` command (or ``ksi.run()``): exit 2, a message
naming the option or file and the field, no run directory created, nothing
written. The input is what a user gets wrong in practice: a typo of a billion
attempts, ``--max-cost nan``, an unset ``$TASK``, a run.toml saved in Latin-1
or nested without end, a runs root that is a file, a hand-edited run.json.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest
from run_helpers import env_without_ksi_settings, journal_lines, ksi, write_tasks

import ksi as ksi_api
from ksi.agents.builtin import CommandAgent
from ksi.environments.local import LocalEnvironment
from ksi.errors import KsiWarning, UserInputError
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, EnvironmentBase, Invocation
from ksi.plugins import registry

TASKS = [
    {"task_id": "alpha", "prompt": "p", "eval": {"command": "test -f done"}},
    {"task_id": "beta", "prompt": "p", "eval": {"command": "test -f done"}},
]


def _tasks(tmp_path: Path) -> Path:
    return write_tasks(tmp_path / "tasks.jsonl", TASKS)


def _refused(res: subprocess.CompletedProcess[str], *words: str) -> str:
    """The error of a command that must exit 2 without a traceback or "bug in ksi"."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "bug in ksi" not in res.stderr, res.stderr
    for word in words:
        assert word in res.stderr, (word, res.stderr)
    return res.stderr


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return ksi(
        "run", str(_tasks(tmp_path)), "--agent", "nop", *args,
        cwd=tmp_path, env=env_without_ksi_settings(**(env or {})),
    )  # fmt: skip


# -- --attempts is bounded, the plan is lazy -------------------------------------------


def _limited_ksi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``ksi`` with 1 GB of address space and 60 s: a plan of a billion would exceed both."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "ksi", *args],
        cwd=cwd,
        env=env_without_ksi_settings(),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )


def _refused_by_every_interface(tmp_path: Path, key: str, value: int, bound: int) -> None:
    """``--KEY VALUE``, ``KEY = VALUE`` in run.toml and ``ksi.run(KEY=VALUE)`` each stop at
    once naming the bound, and leave nothing behind (no run directory)."""
    tasks = _tasks(tmp_path)
    flag = f"--{key}"
    res = _limited_ksi(
        "run", str(tasks), "--agent", "nop", flag, str(value), "--dry-run", cwd=tmp_path
    )
    _refused(res, flag, str(bound))
    toml = tmp_path / "run.toml"
    toml.write_text(f'agent = "nop"\n{key} = {value}\n')
    _refused(
        _limited_ksi("run", str(tasks), "-c", str(toml), "--dry-run", cwd=tmp_path),
        "run.toml",
        key,
        str(bound),
    )
    message = f"{key}: expected an integer <= {bound}, got {value}"
    with pytest.raises(UserInputError, match=message):
        ksi_api.run(str(tasks), agent="nop", run_dir=tmp_path / "api", **{key: value})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.toml", "tasks.jsonl"]


def test_a_billion_attempts_is_refused_at_once_naming_the_bound(tmp_path: Path) -> None:
    _refused_by_every_interface(tmp_path, "attempts", 10**9, 10000)


def test_a_million_generations_is_refused_by_every_interface_naming_the_bound(
    tmp_path: Path,
) -> None:
    _refused_by_every_interface(tmp_path, "generations", 10**6, 1000)
    res = _limited_ksi("run", "--help", cwd=tmp_path)
    assert "Generations to run, at most 1000;" in " ".join(res.stdout.split())


def test_the_generations_bound_itself_is_a_run(tmp_path: Path) -> None:
    res = _run(tmp_path, "--generations", "1000", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "generations: up to 1000 (" in res.stdout


def test_the_bound_itself_plans_without_holding_the_plan(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    res = _limited_ksi(
        "run", str(tasks), "--agent", "nop", "--attempts", "10000", "--dry-run", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert "10000 per task, 20000 to run" in res.stdout


def test_dry_run_counts_what_a_resume_lacks(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert _run(tmp_path, "--run-dir", str(run_dir)).returncode == 0
    assert len(journal_lines(run_dir)) == 2
    res = _run(tmp_path, "--run-dir", str(run_dir), "--attempts", "3", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "3 per task, 4 to run" in res.stdout
    res = _run(tmp_path, "--run-dir", str(run_dir), "--attempts", "3")
    assert res.returncode == 0, res.stderr
    assert len(journal_lines(run_dir)) == 6  # what the dry run said


# -- --max-cost nan, --task-id '' ------------------------------------------------------


@pytest.mark.parametrize("usd", ["nan", "inf", "-1", "0"])
def test_a_max_cost_that_is_no_limit_is_refused(tmp_path: Path, usd: str) -> None:
    err = _refused(_run(tmp_path, "--max-cost", usd, "--dry-run"), "--max-cost", "finite")
    assert f"got {float(usd)!r}" in err
    assert not (tmp_path / "runs").exists()


def test_max_cost_nan_in_run_toml_and_the_python_api(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text("max-cost = nan\n")
    _refused(_run(tmp_path, "-c", str(toml)), "--max-cost", "got nan")
    with pytest.raises(UserInputError, match="max_cost_usd"):
        ksi_api.run(
            str(_tasks(tmp_path)), agent="nop", max_cost_usd=float("nan"), run_dir=tmp_path / "r"
        )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("flag", "value"), [("--task-id", ""), ("--task-id", " , "), ("--exclude", "")]
)
def test_an_empty_task_pattern_is_an_error_not_every_task(
    tmp_path: Path, flag: str, value: str
) -> None:
    """``--task-id "$TASK"`` with TASK unset must not run the whole file."""
    _refused(_run(tmp_path, flag, value), flag, "names no task")
    assert not (tmp_path / "runs").exists()


def test_an_empty_task_pattern_is_refused_by_every_command(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    _refused(ksi("tasks", "list", str(tasks), "--task-id", "", cwd=tmp_path), "--task-id")
    _refused(ksi("check", str(tasks), "--task-id", "", cwd=tmp_path), "--task-id")
    with pytest.raises(UserInputError, match="--task-id: '' names no task"):
        ksi_api.run(str(tasks), agent="nop", task_ids=[""], run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


# -- run.toml, runs root, run.json -----------------------------------------------------


def test_a_run_toml_nested_without_end_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text('agent = "nop"\nmodel = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    _refused(_run(tmp_path, "-c", str(toml)), str(toml), "nested too deeply")
    toml.write_text("[agent-option]\nx = " + "{a=" * 100_000 + "}" * 100_000 + "\n")
    _refused(_run(tmp_path, "-c", str(toml)), str(toml), "nested too deeply")
    toml.write_text('model = [[["a"]]]\n')  # readable, but no value an option takes
    _refused(_run(tmp_path, "-c", str(toml)), str(toml), "'model'", "line 1")
    assert not (tmp_path / "runs").exists()


def test_a_run_toml_not_in_utf8_names_its_line(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_bytes('agent = "nop"\nmodel = "caf\xe9"\n'.encode("latin-1"))
    _refused(_run(tmp_path, "-c", str(toml)), str(toml), "line 2", "not UTF-8", "0xe9")
    assert not (tmp_path / "runs").exists()


def test_a_runs_root_that_is_a_file_is_refused_by_the_dry_run_and_the_run(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    root.write_text("not a directory\n")
    for extra in (["--dry-run"], []):
        err = _refused(_run(tmp_path, *extra, env={"KSI_RUNS_ROOT": str(root)}), "KSI_RUNS_ROOT")
        assert f"{root} is a file, not a directory" in err
        assert "(new)" not in err
    _refused(_run(tmp_path, "--run-dir", str(root / "a" / "b")), f"{root} is a file")
    _refused(_run(tmp_path, "--run-dir", str(root)), f"{root} is a file")
    assert root.read_text() == "not a directory\n"


def _edited_run(tmp_path: Path, **config: Any) -> Path:
    run_dir = tmp_path / "run"
    assert _run(tmp_path, "--run-dir", str(run_dir)).returncode == 0
    run_json = run_dir / "run.json"
    data = json.loads(run_json.read_text())
    data["config"].update(config)
    run_json.write_text(json.dumps(data))
    return run_dir


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"attempts": "three"}, "expected int @ $.config.attempts"),
        ({"attempts": -3}, "config.attempts: expected an integer >= 1"),
        ({"max_cost_usd": "nan"}, "config.max_cost_usd (--max-cost)"),
        ({"max_cost_usd": float("nan")}, "config.max_cost_usd (--max-cost)"),
        ({"generations": [2]}, "expected int @ $.config.generations"),
        ({"generations": 1001}, "config.generations: expected an integer <= 1000"),
        # What cattrs alone would convert, and run an experiment nobody asked for.
        ({"attempts": "3"}, "got '3' (a string), not an integer; expected int @ $.config.attempts"),
        ({"attempts": 3.7}, "got 3.7 (a number), not an integer; expected int @ $.config.attempts"),
        ({"attempts": True}, "got true, not an integer; expected int @ $.config.attempts"),
        (
            {"task_ids": {"a": 1}},
            "got an object, not a list; expected list[str] | None @ $.config.task_ids",
        ),
        ({"wipe_workspace": "false"}, "got 'false' (a string), not true or false; expected bool"),
        ({"agent": 5}, "got 5 (an integer), not a string; expected str @ $.config.agent"),
    ],
)
def test_a_run_json_edited_to_a_wrong_type_is_named_by_every_reader(
    tmp_path: Path, config: dict[str, Any], said: str
) -> None:
    run_dir = _edited_run(tmp_path, **config)
    before = sorted(p.name for p in run_dir.iterdir())
    journal = (run_dir / "journal.jsonl").read_bytes()
    for command in (
        ["run", str(tmp_path / "tasks.jsonl"), "--agent", "nop", "--run-dir", str(run_dir)],
        ["run", "--resume", "--run-dir", str(run_dir)],
        ["report", str(run_dir)],
        ["show", str(run_dir)],
        ["view", str(run_dir), "-o", str(tmp_path / "view.html")],
    ):
        res = ksi(*command, cwd=tmp_path, env=env_without_ksi_settings())
        _refused(res, f"{run_dir / 'run.json'}: not a valid run.json", said, "restore it")
    assert sorted(p.name for p in run_dir.iterdir()) == before
    assert (run_dir / "journal.jsonl").read_bytes() == journal
    assert not (tmp_path / "view.html").exists()


def test_ksi_run_refuses_a_setting_run_json_would_not_give_back(tmp_path: Path) -> None:
    with pytest.raises(UserInputError) as refused:
        ksi_api.run(
            str(_tasks(tmp_path)), agent="nop", model=5, log_cap_bytes=1e6, run_dir=tmp_path / "r"
        )
    said = str(refused.value)
    assert "model: got 5 (an integer), not a string; expected str | None" in said
    assert "log_cap_bytes: got 1000000.0 (a number), not an integer; expected int" in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.jsonl"]


# -- an environment that does not say whether it isolates the agent ---------------------


@attrs.define
class _SilentEnvironment:
    """A plugin's environment that runs on the host and does not say so (no isolates_agent)."""

    name: ClassVar[str] = "silent"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "Runs the agent on this machine; says nothing of isolation."
    _local: LocalEnvironment = attrs.field(factory=LocalEnvironment)

    def prepare(self, tasks: Any) -> None:
        self._local.prepare(tasks)

    def start(self, ctx: Any) -> Any:
        return self._local.start(ctx)

    def cleanup(self, run_id: str | None) -> int:
        return 0


class _SilentPlugin:
    @staticmethod
    @hookimpl
    def ksi_register_environments(register: Any) -> None:
        register(_SilentEnvironment)


SEEN_ISOLATED: list[bool] = []


@attrs.define
class _ProbeAgent(CommandAgent):
    """``command``, noting whether KSI told it the environment isolates it."""

    def invocation(self, ctx: AgentContext) -> Invocation:
        SEEN_ISOLATED.append(ctx.isolated)
        return super().invocation(ctx)


@pytest.mark.sandbox  # host grading runs in bubblewrap
def test_an_environment_that_does_not_say_is_taken_as_not_isolating(
    tmp_path: Path, ksi_plugin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every protection a non-isolating environment gets: the agent keeps its own
    sandbox (told it is not isolated), credentials given to it are warned about;
    and host grading is still sandboxed (auto), the safe side of not knowing."""
    ksi_plugin(_SilentPlugin, name="silent-env")
    monkeypatch.setenv("KSI_TEST_TOKEN", "tok-not-printed")
    SEEN_ISOLATED.clear()
    with pytest.warns(KsiWarning, match="environment 'silent' does not say it keeps") as caught:
        summary = ksi_api.run(
            str(_tasks(tmp_path)),
            agent=_ProbeAgent(cmd="touch repo/done"),
            environment="silent",
            agent_env=["KSI_TEST_TOKEN"],
            run_dir=tmp_path / "run",
            task_ids=["alpha"],
        )
    warning = str(caught[0].message)
    assert "KSI_TEST_TOKEN" in warning and "tok-not-printed" not in warning
    assert SEEN_ISOLATED == [False]
    [record] = summary.records
    assert record.score == 1.0
    assert record.eval is not None and record.eval.details["isolation"] == "sandbox"


def test_every_installed_environment_says_whether_it_isolates() -> None:
    """The built-ins (and the plugins installed here) each say it, never by the default."""
    said = {}
    for reg in registry("environment"):
        owner = next(c for c in reg.obj.__mro__ if "isolates_agent" in vars(c))
        assert owner is not EnvironmentBase, f"{reg.name} leaves isolates_agent to the default"
        said[reg.name] = reg.obj.isolates_agent
    assert {n: said[n] for n in ("local", "sandbox", "docker")} == {
        "local": False,
        "sandbox": True,
        "docker": True,
    }

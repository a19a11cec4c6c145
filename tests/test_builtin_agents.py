"""The built-in agents ``command``, ``oracle`` and ``nop``, run for real on ``local``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from ksi.agents.builtin import (
    PROMPT_ENV_MAX_BYTES,
    CommandAgent,
    NopAgent,
    OracleAgent,
)
from ksi.environments.local import LocalEnvironment, LocalHandle
from ksi.errors import OptionsError, UserInputError
from ksi.interfaces import AgentContext, AgentOutcome, AttemptContext, ExecResult
from ksi.models import TaskSpec
from ksi.options import create_component
from ksi.plugins import registry

PROMPT = 'Fix the bug in repo/app.py.\nIt\'s "quoted", $HOME is literal, and ünïcode.\n'


class Attempt:
    """One attempt's directories, environment handle and agent context, as the runner makes them."""

    def __init__(self, root: Path, task: TaskSpec, prompt: str = PROMPT) -> None:
        self.dir = root / "attempts" / task.id / "1"
        self.workspace = self.dir / "workspace"
        self.repo = self.workspace / "repo"
        self.repo.mkdir(parents=True)
        (self.repo / "app.py").write_text("print('bug')\n")
        self.handle: LocalHandle = LocalEnvironment().start(
            AttemptContext(
                run_id="run",
                task=task,
                attempt=1,
                attempt_dir=self.dir,
                host_workspace=self.workspace,
                base_env={"PATH": os.environ["PATH"]},
            )
        )
        self.ctx = AgentContext(
            task=task,
            prompt=prompt,
            attempt=1,
            attempt_dir=self.dir,
            workspace_path=self.handle.workspace_path,
            repo_path=self.handle.workspace_path + "/repo",
            host_workspace=self.workspace,
        )

    def run(self, agent: Any, timeout: float = 30) -> tuple[ExecResult | None, AgentOutcome]:
        """The runner's sequence: setup, invocation, exec, outcome."""
        agent.setup(self.ctx)
        inv = agent.invocation(self.ctx)
        result = None
        if inv is not None:
            result = self.handle.exec(
                inv,
                timeout=timeout,
                stdout_path=self.dir / "agent.stdout.log",
                stderr_path=self.dir / "agent.stderr.log",
                log_cap_bytes=1 << 20,
            )
        return result, agent.outcome(self.ctx, result)


@pytest.fixture
def make_attempt(tmp_path: Path) -> Iterator[Any]:
    made: list[Attempt] = []

    def make(task: TaskSpec, prompt: str = PROMPT) -> Attempt:
        a = Attempt(tmp_path / str(len(made)), task, prompt)
        made.append(a)
        return a

    yield make
    for a in made:
        a.handle.stop()


def command(cmd: str) -> CommandAgent:
    agent = create_component(
        registry("agent").get("command").obj,
        {"cmd": cmd},
        kind="agent",
        option_flag="--agent-option",
    )
    assert isinstance(agent, CommandAgent)
    return agent


# -- command ---------------------------------------------------------------------------------


def test_command_gets_the_prompt_in_env_file_and_stdin(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="task-7"))
    cmd = (
        'printf %s "$KSI_PROMPT" > repo/from_env.txt; '
        'cat "$KSI_PROMPT_FILE" > repo/from_file.txt; '
        "cat > repo/from_stdin.txt; "
        'printf "%s\\n" "$KSI_TASK_ID" "$KSI_WORKSPACE" "$KSI_REPO" "$KSI_ATTEMPT" '
        '"$KSI_PROMPT_FILE" "$(pwd)" > repo/vars.txt'
    )
    result, outcome = a.run(command(cmd))
    assert result is not None and result.exit_code == 0
    assert outcome.status == "completed"
    for name in ("from_env.txt", "from_file.txt", "from_stdin.txt"):
        assert (a.repo / name).read_text(encoding="utf-8") == PROMPT, name
    prompt_file = f"{a.workspace}/.ksi/prompt.md"
    assert (a.repo / "vars.txt").read_text().splitlines() == [
        "task-7",
        str(a.workspace),
        f"{a.workspace}/repo",
        "1",
        prompt_file,
        str(a.workspace),
    ]
    # The prompt file is in the workspace (visible to sandboxed agents) but outside repo/.
    assert Path(prompt_file).read_text(encoding="utf-8") == PROMPT
    assert not Path(prompt_file).is_relative_to(a.repo)


def test_command_huge_prompt_goes_through_file_and_stdin(make_attempt: Any) -> None:
    big = "x" * (PROMPT_ENV_MAX_BYTES + 10_000)
    a = make_attempt(TaskSpec(id="big"), prompt=big)
    cmd = (
        'echo "${KSI_PROMPT-unset}" > repo/env.txt; cat "$KSI_PROMPT_FILE" > repo/file.txt; '
        "cat > repo/stdin.txt"
    )
    _, outcome = a.run(command(cmd))
    assert outcome.status == "completed", outcome.error
    assert (a.repo / "env.txt").read_text() == "unset\n"
    assert (a.repo / "file.txt").read_text() == big
    assert (a.repo / "stdin.txt").read_text() == big


def test_command_model_is_exported_when_given(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="m"))
    a.ctx = attrs.evolve(a.ctx, model="some-model")
    a.run(command('echo "$KSI_MODEL" > repo/model.txt'))
    assert (a.repo / "model.txt").read_text() == "some-model\n"


def test_command_nonzero_exit_is_crashed_with_the_reason(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="t"))
    result, outcome = a.run(command("echo partial > repo/out.txt; echo boom >&2; exit 3"))
    assert result is not None and result.exit_code == 3
    assert outcome.status == "crashed"
    assert "exited with code 3" in outcome.error and "boom" in outcome.error
    # The agent's work stays in repo/ for grading; the runner grades regardless.
    assert (a.repo / "out.txt").read_text() == "partial\n"


def test_command_timeout_is_timeout(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="t"))
    result, outcome = a.run(command("echo started; sleep 30"), timeout=0.5)
    assert result is not None and result.timed_out
    assert outcome.status == "timeout"
    assert "started" in outcome.final_message


def test_command_final_message_is_the_end_of_stdout(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="t"))
    _, outcome = a.run(command("echo all done"))
    assert outcome.final_message.strip() == "all done"


@pytest.mark.parametrize("options", [{}, {"cmd": ""}, {"cmd": "   "}])
def test_command_without_cmd_is_a_clear_error(options: dict[str, str]) -> None:
    with pytest.raises(OptionsError) as info:
        create_component(CommandAgent, options, kind="agent", option_flag="--agent-option")
    msg = str(info.value)
    assert "--agent-option" in msg and "'cmd' is required" in msg and "cmd=" in msg
    assert info.value.exit_code == 2


def test_command_rejects_unknown_options() -> None:
    with pytest.raises(
        OptionsError, match=r"has no option 'cdm'; did you mean 'cmd'\? valid options: cmd"
    ):
        create_component(CommandAgent, {"cdm": "x"}, kind="agent", option_flag="--agent-option")


# -- oracle ----------------------------------------------------------------------------------


def solved(task_id: str, files: dict[str, Any] | None = None, cmd: str | None = None) -> TaskSpec:
    return TaskSpec(id=task_id, metadata={"solution": {"files": files, "command": cmd}})


def test_oracle_writes_files_then_runs_command_in_repo(make_attempt: Any) -> None:
    task = solved(
        "t",
        files={"app.py": "print('fixed')\n", "pkg/deep/mod.py": "X = 1\r\n"},
        cmd='pwd > where.txt; test -f pkg/deep/mod.py && echo "$KSI_TASK_ID" > ran.txt',
    )
    a = make_attempt(task)
    result, outcome = a.run(OracleAgent())
    assert result is not None and result.exit_code == 0
    assert outcome.status == "completed"
    assert (a.repo / "app.py").read_text() == "print('fixed')\n"
    assert (a.repo / "pkg/deep/mod.py").read_bytes() == b"X = 1\r\n"
    assert (a.repo / "where.txt").read_text().strip() == str(a.repo)
    assert (a.repo / "ran.txt").read_text() == "t\n"


def test_oracle_files_only_needs_no_process(make_attempt: Any) -> None:
    a = make_attempt(solved("t", files={"app.py": "ok\n"}))
    result, outcome = a.run(OracleAgent())
    assert result is None and outcome.status == "completed"
    assert (a.repo / "app.py").read_text() == "ok\n"


def test_oracle_command_only(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="t", metadata={"solution": {"command": "echo made > new.txt"}}))
    _, outcome = a.run(OracleAgent())
    assert outcome.status == "completed"
    assert (a.repo / "new.txt").read_text() == "made\n"


def test_oracle_failing_solution_command_is_crashed(make_attempt: Any) -> None:
    a = make_attempt(solved("t", cmd="exit 4"))
    _, outcome = a.run(OracleAgent())
    assert outcome.status == "crashed" and "code 4" in outcome.error


def test_oracle_check_tasks_names_every_task_without_a_solution() -> None:
    tasks = [
        TaskSpec(id="ok", metadata={"solution": {"files": {"a.py": "x"}, "command": None}}),
        TaskSpec(id="none"),
        TaskSpec(id="null", metadata={"solution": None}),
        TaskSpec(id="empty", metadata={"solution": {"files": {}, "command": None}}),
    ]
    problems = OracleAgent().check_tasks(tasks)
    assert problems == [
        "task 'none' has no `solution`; oracle cannot attempt it — add a solution "
        "{files|command} to its record",
        "task 'null' has no `solution`; oracle cannot attempt it — add a solution "
        "{files|command} to its record",
        "task 'empty' has an empty `solution`; oracle cannot attempt it — give it `files` "
        "and/or a `command`",
    ]


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../escape.py", "'..'"),
        ("a/../../escape.py", "'..'"),
        ("/etc/passwd", "absolute"),
        ("", "empty"),
    ],
)
def test_oracle_rejects_paths_out_of_repo(
    make_attempt: Any, tmp_path: Path, path: str, why: str
) -> None:
    task = solved("bad", files={path: "pwned"})
    (problem,) = OracleAgent().check_tasks([task])
    assert "task 'bad'" in problem and repr(path) in problem and why in problem
    a = make_attempt(task)
    with pytest.raises(UserInputError, match=why):
        OracleAgent().setup(a.ctx)
    assert not (a.workspace / "escape.py").exists()
    assert not (a.workspace.parent / "escape.py").exists()


def test_oracle_refuses_to_write_through_a_symlinked_directory(
    make_attempt: Any, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    task = solved("t", files={"linked/evil.py": "pwned"})
    a = make_attempt(task)
    (a.repo / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserInputError, match="leads out of repo/"):
        OracleAgent().setup(a.ctx)
    assert not (outside / "evil.py").exists()


def test_oracle_replaces_a_symlinked_file_instead_of_writing_through_it(
    make_attempt: Any, tmp_path: Path
) -> None:
    target = tmp_path / "host.txt"
    target.write_text("host file")
    a = make_attempt(solved("t", files={"app.py": "fixed"}))
    (a.repo / "app.py").unlink()
    (a.repo / "app.py").symlink_to(target)
    a.run(OracleAgent())
    assert target.read_text() == "host file"
    assert not (a.repo / "app.py").is_symlink()
    assert (a.repo / "app.py").read_text() == "fixed"


def test_oracle_setup_refuses_a_task_without_solution(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="nosol"))
    with pytest.raises(UserInputError, match="task 'nosol' has no `solution`"):
        OracleAgent().setup(a.ctx)


# -- nop -------------------------------------------------------------------------------------


def test_nop_leaves_the_workspace_untouched(make_attempt: Any) -> None:
    a = make_attempt(TaskSpec(id="t"))
    before = sorted(p.relative_to(a.workspace) for p in a.workspace.rglob("*"))
    result, outcome = a.run(NopAgent())
    assert result is None and outcome == AgentOutcome(status="completed")
    assert sorted(p.relative_to(a.workspace) for p in a.workspace.rglob("*")) == before
    assert (a.repo / "app.py").read_text() == "print('bug')\n"
    assert NopAgent().check_tasks([TaskSpec(id="t")]) == []


# -- registration ----------------------------------------------------------------------------


def test_builtin_agents_are_registered_with_no_env_needs() -> None:
    agents = registry("agent")
    for name, cls in (("command", CommandAgent), ("oracle", OracleAgent), ("nop", NopAgent)):
        reg = agents.get(name)
        assert reg.obj is cls
        assert reg.plugin == "ksi.agents.builtin"
        assert cls.required_env == () and cls.optional_env == ()
        assert cls.description

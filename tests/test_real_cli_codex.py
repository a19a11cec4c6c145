"""The real Codex CLI through ``ksi run``, against the mock model (Responses API over SSE).

Only ``CODEX_API_KEY`` and ``--agent-option base_url=...`` are given, as a user
would; the mock serves a tool call that writes the file, then the final
answer, with known usage per call.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from atif_validator import HarborValidator
from docker_support import needs_bwrap
from mockmodel import RATE_LIMITED, UNAUTHORIZED, Answer, Hang, MockUsage, ToolCall
from real_agents import (
    HELLO_TASK,
    WRITE_AND_SHOW_HELLO,
    check_trajectory,
    free_port,
    ksi_run_with_mock,
)

from ksi.fstree import remove_tree

pytestmark = pytest.mark.real_cli

KEY = {"CODEX_API_KEY": "sk-mock-codex"}
SOLVE = (
    ToolCall("exec_command", {"cmd": WRITE_AND_SHOW_HELLO}, MockUsage(120, 15, 800, 40)),
    Answer("Created hello.txt containing hello.", MockUsage(60, 25, 900, 0)),
)


@pytest.mark.parametrize(
    "environment", ["local", pytest.param("sandbox", marks=pytest.mark.sandbox)]
)
def test_solves_with_usage_and_turns_as_served(
    tmp_path: Path, environment: str, harbor: HarborValidator
) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="codex",
        script=SOLVE,
        env=KEY,
        model="mock-model",
        environment=environment,
    )
    rec = run.record
    assert rec["status"] == "scored" and rec["score"] == 1.0, run.describe()
    assert rec["agent_status"] == "completed"
    served = run.served_usage()
    usage = rec["usage"]
    assert usage["input_tokens"] == served.input_tokens == 180
    assert usage["output_tokens"] == served.output_tokens
    assert usage["cache_read_tokens"] == served.cache_read_tokens
    assert usage["cache_write_tokens"] == served.cache_write_tokens == 40
    assert usage["turns"] == len(run.served) == 2  # one per model call, not one per exec turn
    assert usage["cost_usd"] is None  # codex reports no cost
    assert rec["final_message"] == "Created hello.txt containing hello."
    model_calls = [r for r in run.requests if r.path.endswith("/responses")]
    assert {r.headers.get("authorization") for r in model_calls} == {"Bearer sk-mock-codex"}
    assert all(r.method == "POST" for r in run.requests), "no WebSocket attempts at a base_url"
    assert (run.attempt_file("codex.rollout.jsonl")).is_file()
    # The trajectory (from the session log): the scripted call, its output and exit code.
    doc = check_trajectory(run, harbor, call=(SOLVE[0].name, SOLVE[0].arguments), output="hello")
    [result] = [s["observation"]["results"][0] for s in doc["steps"] if "observation" in s]
    assert result["extra"]["exit_code"] == 0


def test_openai_api_key_alone_is_refused_before_any_attempt(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="codex", script=SOLVE, env={"OPENAI_API_KEY": "sk-x"}, model="mock-model"
    )
    assert run.proc.returncode == 2, run.describe()
    assert "CODEX_API_KEY" in run.proc.stderr and "ignores OPENAI_API_KEY" in run.proc.stderr
    assert run.served == ()


def test_bad_key_is_an_auth_error(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="codex", script=(), then=UNAUTHORIZED, env=KEY, model="mock-model"
    )
    rec = run.record
    assert rec["agent_status"] == "auth_error", run.describe()
    assert "401" in rec["error"] and "Incorrect API key" in rec["error"]


def test_rate_limit_is_retryable(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path, agent="codex", script=(), then=RATE_LIMITED, env=KEY, model="mock-model"
    )
    rec = run.record
    assert rec["agent_status"] == "rate_limited", run.describe()
    assert "429" in rec["error"]
    assert rec["retryable"] is True


def test_timeout_keeps_the_usage_of_calls_served_before(tmp_path: Path) -> None:
    run = ksi_run_with_mock(
        tmp_path,
        agent="codex",
        script=(SOLVE[0], Hang()),
        env=KEY,
        model="mock-model",
        args=["--timeout", "8"],
    )
    rec = run.record
    assert rec["agent_status"] == "timeout", run.describe()
    assert rec["usage"]["input_tokens"] == 120 and rec["usage"]["output_tokens"] == 15
    assert rec["usage"]["turns"] == 1


@pytest.fixture
def home_under_tmp() -> Iterator[Path]:
    """A HOME under /tmp, as in CI and in containers run as a user without a home."""
    home = Path(tempfile.mkdtemp(prefix="ksi-home-", dir="/tmp"))
    try:
        yield home
    finally:
        remove_tree(home)


def test_home_under_tmp_still_lets_codex_run_commands(tmp_path: Path, home_under_tmp: Path) -> None:
    """Codex refuses to make its helper binaries (its sandbox's launcher) in a home under
    the temp dir; every command then failed in its sandbox, and the attempt scored 0."""
    env = {**KEY, "HOME": str(home_under_tmp)}
    run = ksi_run_with_mock(tmp_path, agent="codex", script=SOLVE, env=env, model="mock-model")
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 1.0, "completed"), (
        run.describe()
    )
    assert "Refusing to create helper binaries" not in run.attempt_log("agent.stderr.log")
    assert (home_under_tmp / ".codex" / "sessions").is_dir()  # it kept its own home


@pytest.mark.sandbox
@needs_bwrap
def test_its_own_sandbox_that_cannot_start_is_an_agent_error_naming_the_fix(
    tmp_path: Path,
) -> None:
    """Codex's bubblewrap cannot nest inside KSI's: every command fails before it runs.
    That is no score of the work: the attempt is tools_refused, and the run stops (exit 3)."""
    tasks = [HELLO_TASK, {**HELLO_TASK, "task_id": "hello-2"}]
    run = ksi_run_with_mock(
        tmp_path,
        agent="codex",
        script=SOLVE,
        env=KEY,
        model="mock-model",
        environment="sandbox",
        agent_options=["sandbox=workspace-write"],
        args=["--concurrency", "1"],
        tasks=tasks,
    )
    rec = run.record  # the second task was never launched
    assert (rec["status"], rec["score"], rec["agent_status"]) == (
        "agent_error",
        None,
        "tools_refused",
    ), run.describe()
    assert "refused every tool call it made (1): bwrap: " in rec["error"]
    assert "leave --agent-option sandbox=auto" in rec["error"]
    assert run.proc.returncode == 3, run.describe()
    assert "could not run a single tool call" in run.proc.stderr
    assert "not started (1 attempt(s)): hello-2" in run.proc.stderr
    assert "resume (the tools_refused attempts run again)" in run.proc.stderr


def test_an_endpoint_that_refuses_stops_the_run_and_a_resume_runs_them_again(
    tmp_path: Path,
) -> None:
    """Codex retries a refused connection until KSI's timeout: each attempt is a
    connection_error naming the endpoint, three in a row stop the run (exit 3), and once
    the endpoint is up the resume runs them all."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tasks = [{**HELLO_TASK, "task_id": f"hello-{i}"} for i in range(4)]
    args = ["--concurrency", "1", "--timeout", "10"]
    down = ksi_run_with_mock(
        tmp_path,
        agent="codex",
        script=(),
        env=KEY,
        model="mock-model",
        agent_options=[f"base_url={url}"],  # the mock listens elsewhere: nothing at this port
        args=args,
        tasks=tasks,
    )
    assert down.proc.returncode == 3, down.describe()
    assert [r["agent_status"] for r in down.records] == ["connection_error"] * 3
    assert {r["status"] for r in down.records} == {"agent_error"}
    assert down.records[0]["error"].startswith(
        f"could not connect to {url} (its base_url): the endpoint could not be reached"
    )
    assert "could not connect to its model in 3 attempt(s) in a row" in down.proc.stderr
    assert "not started (1 attempt(s)): hello-3" in down.proc.stderr
    assert "stopped: connection_error: agent 'codex' could not connect in 3" in down.proc.stdout
    assert "changed nothing in repo/" not in down.proc.stdout  # it never worked on the tasks
    up = ksi_run_with_mock(
        tmp_path,
        agent="codex",
        script=SOLVE * 4,
        env=KEY,
        model="mock-model",
        port=port,
        args=args,
        tasks=tasks,
    )
    assert up.proc.returncode == 0, up.describe()
    latest = {r["task_id"]: r for r in up.records}
    assert {t: (r["status"], r["score"]) for t, r in latest.items()} == {
        t["task_id"]: ("scored", 1.0) for t in tasks
    }

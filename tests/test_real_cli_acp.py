"""The ``acp`` agent driving a real ACP agent, Gemini CLI's ``--acp`` mode, against the mock.

Each test runs ``ksi run --agent acp --agent-option cmd='gemini --acp ...'`` and the
mock Gemini API in one loopback-only network namespace (see ``tests/real_agents.py``);
the key and the mock's URL reach Gemini CLI through ``--agent-env``, as a user
passes what an arbitrary ACP agent needs. KSI's ACP client runs inside the
attempt's environment and logs the session (``acp-session.jsonl``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from atif_validator import HarborValidator
from mockmodel import Answer, HttpError, MockUsage, ToolCall
from real_agents import (
    HELLO_TASK,
    WRITE_AND_SHOW_HELLO,
    WRITE_HELLO,
    MockRun,
    ksi_run_with_mock,
)

pytestmark = pytest.mark.real_cli

MODEL = "gemini-2.5-pro"
#: What a user exports for Gemini CLI, passed to the ACP agent by name.
ENV = {"GEMINI_API_KEY": "gm-mock-key", "GOOGLE_GEMINI_BASE_URL": "{mock_url}"}
PASS_ENV = ["--agent-env", "GEMINI_API_KEY", "--agent-env", "GOOGLE_GEMINI_BASE_URL"]
GEMINI_ACP = f"cmd=gemini --acp -m {MODEL}"


#: What the mock's tool call costs (uncached input, output, cache reads).
TOOL_CALL_USAGE = MockUsage(1100, 40, 2000)


def write_hello(usage: MockUsage = TOOL_CALL_USAGE) -> ToolCall:
    return ToolCall("run_shell_command", {"command": WRITE_HELLO}, usage)


def acp_run(
    tmp_path: Path,
    *options: str,
    environment: str = "local",
    args: Sequence[str] = (),
    **kw: Any,
) -> MockRun:
    return ksi_run_with_mock(
        tmp_path,
        agent="acp",
        cli="gemini-cli",
        env=ENV,
        agent_options=[GEMINI_ACP, "endpoints={mock_url}", *options],
        args=[*PASS_ENV, *args],
        environment=environment,
        **kw,
    )


def session_log(run: MockRun) -> list[dict[str, Any]]:
    path = run.attempt_file("acp-session.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def events(log: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in log if line["event"] == event]


def traj_call(
    run: MockRun, harbor: HarborValidator, command: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The trajectory's call of the shell ``command`` and the results that answer it;
    Harbor's validator accepts the file, step 1 is the prompt, the totals are the record's."""
    harbor.check(run.attempt_file("trajectory.json"))
    doc = run.trajectory()
    steps = doc["steps"]
    assert steps[0]["source"] == "user" and "hello.txt" in steps[0]["message"]
    calls = [c for s in steps for c in s.get("tool_calls", [])]
    found = [c for c in calls if c["arguments"].get("command") == command]
    assert found, calls
    results = [
        r
        for s in steps
        for r in (s.get("observation") or {}).get("results", [])
        if r.get("source_call_id") == found[0]["tool_call_id"]
    ]
    usage = run.record["usage"]
    assert doc["final_metrics"]["total_completion_tokens"] == usage["output_tokens"]
    return found[0], results


@pytest.mark.parametrize(
    "environment",
    [
        "local",
        pytest.param(
            "sandbox",
            marks=[
                pytest.mark.sandbox,
                pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
            ],
        ),
    ],
)
def test_gemini_over_acp_solves_a_task_asking_permission_for_the_mocks_tool_call(
    tmp_path: Path, environment: str, harbor: HarborValidator
) -> None:
    run = acp_run(
        tmp_path,
        environment=environment,
        script=[write_hello(), Answer("hello.txt is in place.", MockUsage(1300, 20, 0))],
    )
    assert run.proc.returncode == 0, run.describe()
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 1.0, "completed"), (
        run.describe()
    )
    assert rec["final_message"] == "hello.txt is in place."
    # Gemini CLI reports its usage in the turn's _meta.quota: the input with the cached
    # tokens in it (1100 + 2000 + 1300), no cost and no model-call count.
    usage = rec["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (4400, 60)
    assert (usage["cost_usd"], usage["turns"]) == (None, None)
    assert {r.headers.get("x-goog-api-key") for r in run.served_requests()} == {"gm-mock-key"}

    log = session_log(run)
    assert events(log, "initialized")[0]["agent"]["name"] == "gemini-cli"
    # The mock's tool call came to KSI as a permission request, answered "allow once".
    [asked] = events(log, "permission")
    assert asked["tool_call"]["title"] == WRITE_HELLO
    assert asked["tool_call"]["kind"] == "execute"
    assert (asked["policy"], asked["chosen"]["kind"]) == ("allow", "allow_once")
    call_id = asked["tool_call"]["toolCallId"]
    done = [
        e["update"]
        for e in events(log, "update")
        if e["update"].get("toolCallId") == call_id and e["update"].get("status") == "completed"
    ]
    assert done, log
    assert events(log, "result")[0]["stop_reason"] == "end_turn"
    # The trajectory: Gemini CLI gives no input for a call (its title is the command line)
    # and no output for a shell call, only that it completed.
    call, results = traj_call(run, harbor, WRITE_HELLO)
    assert call["function_name"] == "execute"
    assert [r["extra"] for r in results] == [{"failed": False}]
    doc = run.trajectory()
    assert doc["steps"][-1]["message"] == "hello.txt is in place."
    assert doc["agent"]["version"] == "gemini-cli 0.61.0"
    assert "1 permission request(s): 1 allow_once" in doc["notes"]


def test_permission_deny_rejects_the_tool_call(tmp_path: Path, harbor: HarborValidator) -> None:
    run = acp_run(
        tmp_path,
        "permission=deny",
        script=[write_hello(), Answer("I was not allowed to write hello.txt.")],
    )
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 0.0, "completed"), (
        run.describe()
    )
    assert not (run.run_dir / rec["attempt_dir"] / "captured" / "repo" / "hello.txt").exists()
    [asked] = events(session_log(run), "permission")
    assert (asked["policy"], asked["chosen"]["kind"]) == ("deny", "reject_once")
    assert rec["final_message"] == "I was not allowed to write hello.txt."
    assert len(run.served) == 2  # the model heard of the rejection and answered
    _, results = traj_call(run, harbor, WRITE_HELLO)
    assert [(r["content"], r["extra"]) for r in results] == [
        ("KSI's permission policy answered reject_once.", {"failed": True})
    ]


def test_a_session_mode_that_approves_everything_asks_nothing(tmp_path: Path) -> None:
    # Gemini CLI refuses its yolo mode in an untrusted folder (every fresh workspace is one).
    trusted = f"{GEMINI_ACP} --skip-trust"
    run = acp_run(
        tmp_path,
        trusted,
        "mode=yolo",
        script=[write_hello(), Answer("Done.", MockUsage(1300, 20, 0))],
    )
    rec = run.record
    assert (rec["score"], rec["agent_status"]) == (1.0, "completed"), run.describe()
    log = session_log(run)
    assert events(log, "mode") and not events(log, "permission")
    assert any(e["update"].get("sessionUpdate") == "tool_call" for e in events(log, "update"))


def test_bad_key_is_an_auth_error_that_stops_the_run(tmp_path: Path) -> None:
    message = "API key not valid. Please pass a valid API key."
    run = acp_run(
        tmp_path,
        tasks=[HELLO_TASK, {**HELLO_TASK, "task_id": "hello-2"}],
        args=["--concurrency", "1"],
        script=[],
        then=HttpError(401, message),
    )
    assert run.proc.returncode == 3, run.describe()
    [rec] = run.records
    assert (rec["status"], rec["agent_status"]) == ("agent_error", "auth_error"), run.describe()
    assert message in rec["error"] and "ACP prompt failed" in rec["error"]


def test_claude_code_over_acp_reports_acp_usage_and_cost(
    tmp_path: Path, harbor: HarborValidator
) -> None:
    """Zed's adapter for the Claude Agent SDK: ACP's own usage on the turn's response and
    the session's cost in its ``usage_update``; the tool call comes with its input."""
    run = ksi_run_with_mock(
        tmp_path,
        agent="acp",
        env={"ANTHROPIC_API_KEY": "sk-ant-mock", "ANTHROPIC_BASE_URL": "{mock_url}"},
        agent_options=["cmd=claude-agent-acp", "endpoints={mock_url}"],
        args=["--agent-env", "ANTHROPIC_API_KEY", "--agent-env", "ANTHROPIC_BASE_URL"],
        script=[
            ToolCall("Bash", {"command": WRITE_AND_SHOW_HELLO}, MockUsage(1100, 40, 2000, 300)),
            Answer("hello.txt is in place.", MockUsage(1300, 20, 0)),
        ],
    )
    assert run.proc.returncode == 0, run.describe()
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 1.0, "completed"), (
        run.describe()
    )
    assert rec["final_message"] == "hello.txt is in place."
    usage = rec["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (2400, 60)
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (2000, 300)
    log = session_log(run)
    costs = [
        e["update"]["cost"]["amount"]
        for e in events(log, "update")
        if e["update"].get("sessionUpdate") == "usage_update"
    ]
    assert costs and usage["cost_usd"] == pytest.approx(costs[-1]) and costs[-1] > 0
    [asked] = events(log, "permission")
    assert asked["tool_call"]["rawInput"] == {"command": WRITE_AND_SHOW_HELLO}
    assert asked["chosen"]["kind"] == "allow_once"
    assert {r.headers.get("x-api-key") for r in run.served_requests()} == {"sk-ant-mock"}
    # The trajectory: the call as the model sent it (rawInput), its output as the tool gave it.
    call, results = traj_call(run, harbor, WRITE_AND_SHOW_HELLO)
    assert call["arguments"] == {"command": WRITE_AND_SHOW_HELLO}
    assert len(results) == 1 and "hello" in results[0]["content"]
    assert run.trajectory()["final_metrics"]["total_cost_usd"] == usage["cost_usd"]

"""The agent environment scrub: an allow-list plus what the agent and the user ask for."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ksi.attempt.envscrub import ALLOWED, missing_required, scrubbed_env
from ksi.environments.local import LocalEnvironment
from ksi.interfaces import AttemptContext, Invocation
from ksi.models import TaskSpec
from tests.run_helpers import ksi

HOST = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LC_CTYPE": "C.UTF-8",
    "https_proxy": "http://proxy:3128",
    "NO_PROXY": "localhost",
    "SSL_CERT_FILE": "/etc/ssl/ca.pem",
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-ant",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "GITHUB_TOKEN": "ghp",
    "PYTHONPATH": "/somewhere",
    "MY_TOKEN": "mine",
}


def test_only_the_allow_list_passes_by_default() -> None:
    env = scrubbed_env(required=(), optional=(), passthrough=(), host_env=HOST)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "LC_CTYPE": "C.UTF-8",
        "https_proxy": "http://proxy:3128",
        "NO_PROXY": "localhost",
        "SSL_CERT_FILE": "/etc/ssl/ca.pem",
    }


def test_declared_and_passthrough_variables_are_added_when_set() -> None:
    env = scrubbed_env(
        required=("ANTHROPIC_API_KEY",),
        optional=("ANTHROPIC_BASE_URL",),  # not set on the host: simply absent
        passthrough=("MY_TOKEN",),
        host_env=HOST,
    )
    assert env["ANTHROPIC_API_KEY"] == "sk-ant"
    assert env["MY_TOKEN"] == "mine"
    assert "ANTHROPIC_BASE_URL" not in env
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env


def test_default_host_is_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host")
    monkeypatch.setenv("LC_TIME", "C")
    env = scrubbed_env(required=(), optional=(), passthrough=())
    assert "OPENAI_API_KEY" not in env
    assert env["LC_TIME"] == "C"
    assert env["PATH"] == os.environ["PATH"]
    assert set(env) <= set(ALLOWED) | {k for k in env if k.startswith("LC_")}


def _agent_sees(tmp_path: Path, base: dict[str, str]) -> dict[str, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    handle = LocalEnvironment().start(
        AttemptContext("r", TaskSpec(id="t"), 1, tmp_path, workspace, base)
    )
    res = handle.exec(
        Invocation(argv=("/bin/sh", "-c", "env")),
        timeout=30,
        stdout_path=tmp_path / "env.out",
        stderr_path=tmp_path / "env.err",
        log_cap_bytes=1 << 20,
    )
    handle.stop()
    assert res.exit_code == 0
    lines = (tmp_path / "env.out").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_openai_key_does_not_reach_an_agent_that_does_not_declare_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-needed")
    base = scrubbed_env(required=("ANTHROPIC_API_KEY",), optional=(), passthrough=())
    seen = _agent_sees(tmp_path, base)
    assert "OPENAI_API_KEY" not in seen
    assert "sk-must-not-leak" not in "\n".join(seen.values())
    assert seen["ANTHROPIC_API_KEY"] == "sk-ant-needed"


def test_agent_env_passes_exactly_the_named_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-passed-on-request")
    monkeypatch.setenv("OTHER_SECRET", "nope")
    base = scrubbed_env(required=(), optional=(), passthrough=("OPENAI_API_KEY",))
    seen = _agent_sees(tmp_path, base)
    assert seen["OPENAI_API_KEY"] == "sk-passed-on-request"
    assert "OTHER_SECRET" not in seen


def test_missing_required_names_the_variable_and_the_agent() -> None:
    problems = missing_required(
        "claude-code", ("ANTHROPIC_API_KEY", "PATH"), host_env={"PATH": "/bin"}
    )
    assert problems == [
        "agent 'claude-code' needs the environment variable ANTHROPIC_API_KEY, which is not "
        "set; export ANTHROPIC_API_KEY=... in the shell that runs ksi"
    ]
    assert missing_required("x", ("K",), host_env={"K": ""}) != []  # empty counts as unset
    assert missing_required("x", ("K",), host_env={"K": "v"}) == []


def test_agent_env_mistakes_are_reported() -> None:
    problems = missing_required(
        "command", (), passthrough=("TOKEN=abc", "UNSET_ONE", "SET_ONE"), host_env={"SET_ONE": "1"}
    )
    assert len(problems) == 2
    assert problems[0].startswith("--agent-env TOKEN=<value not shown>: expected a variable name")
    assert "abc" not in "\n".join(problems)
    assert problems[1].startswith("--agent-env UNSET_ONE: UNSET_ONE is not set")
    assert "agent 'command'" in problems[1]


def test_a_value_given_where_a_name_was_expected_is_never_printed(tmp_path: Path) -> None:
    """Issue 11 item 7: ``--agent-env MY_TOKEN=<value>`` (or the bare value) is not echoed."""
    secret = "sk-ant-api03-do-not-print-me"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "t", "prompt": "p"}\n')
    for given in (f"MY_TOKEN={secret}", secret, f"{secret}=x"):
        for flag in ("--agent-env", "--eval-env"):
            res = ksi(
                "run", str(tasks), "--agent", "nop", flag, given,
                "--run-dir", str(tmp_path / "run"),
            )  # fmt: skip
            assert res.returncode == 2, res.stderr
            assert "expected a variable name" in res.stderr
            assert secret not in res.stdout + res.stderr
            assert not (tmp_path / "run").exists()
    res = ksi("run", str(tasks), "--agent", "nop", "--eval-env", f"MY_TOKEN={secret}")
    assert "--eval-env MY_TOKEN=<value not shown>" in res.stderr

"""`ksi agents`, `ksi doctor`, plugin registration, and credential isolation between agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from fakes.harness import FAKES, make, run_agent
from typer.testing import CliRunner

from ksi.agents.claude_code import ClaudeCodeAgent
from ksi.agents.codex import CodexAgent
from ksi.agents.gemini_cli import GeminiCliAgent
from ksi.agents.opencode import OpenCodeAgent
from ksi.cli import build_app
from ksi.plugins import registry

CLI_AGENTS = ("claude-code", "codex", "aider", "gemini-cli", "opencode", "mini-swe-agent")
KEYS = {
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "OPENAI_API_KEY": "sk-openai-secret",
    "GEMINI_API_KEY": "gemini-secret",
    "CODEX_API_KEY": "sk-codex-secret",
}


def _app() -> typer.Typer:
    return build_app()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Only the fakes on PATH, an empty HOME, no provider key set."""
    import os

    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_AUTH_TOKEN", "_OAUTH_TOKEN")) or name.startswith(
            ("CLAUDE_CODE_USE", "GOOGLE_APPLICATION")
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    return tmp_path


@pytest.mark.parametrize(
    ("cls", "own", "foreign"),
    [
        (ClaudeCodeAgent, "ANTHROPIC_API_KEY", ("OPENAI_API_KEY", "GEMINI_API_KEY")),
        (CodexAgent, "CODEX_API_KEY", ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY")),
        (GeminiCliAgent, "GEMINI_API_KEY", ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")),
    ],
)
def test_one_agents_credentials_never_reach_another(
    tmp_path: Path, cls: type, own: str, foreign: tuple[str, ...]
) -> None:
    run = run_agent(make(cls), tmp_path, host_env=dict(KEYS, AWS_SECRET_ACCESS_KEY="aws"))
    env = run.record["env"]
    assert env[own] == KEYS[own]
    for name in foreign:
        assert name not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env


AWS = {"AWS_ACCESS_KEY_ID": "AKIA-test", "AWS_SECRET_ACCESS_KEY": "aws-secret-value"}
VERTEX = {"GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json", "GOOGLE_CLOUD_PROJECT": "proj-x42"}


@pytest.mark.parametrize(
    ("cls", "host_env", "model", "passed", "withheld"),
    [
        # Issue 11 item 4: AWS keys exported for something else are not Claude Code's.
        (ClaudeCodeAgent, dict(KEYS, **AWS), None, (), tuple(AWS)),
        (ClaudeCodeAgent, dict(AWS, CLAUDE_CODE_USE_BEDROCK="0"), None, (), tuple(AWS)),
        (ClaudeCodeAgent, dict(AWS, CLAUDE_CODE_USE_BEDROCK="1"), None, tuple(AWS), ()),
        (
            ClaudeCodeAgent,
            dict(AWS, CLAUDE_CODE_USE_VERTEX="1", CLOUD_ML_REGION="us-east5"),
            None,
            ("CLOUD_ML_REGION",),
            tuple(AWS),
        ),
        (GeminiCliAgent, dict(KEYS, **VERTEX), None, (), tuple(VERTEX)),
        (GeminiCliAgent, dict(VERTEX, GOOGLE_GENAI_USE_VERTEXAI="true"), None, tuple(VERTEX), ()),
        (OpenCodeAgent, dict(KEYS, **AWS), "anthropic/claude-sonnet-4-5", (), tuple(AWS)),
        (OpenCodeAgent, dict(KEYS, **AWS), "amazon-bedrock/anthropic.claude", tuple(AWS), ()),
    ],
)
def test_provider_mode_keys_go_only_with_their_mode(
    tmp_path: Path,
    cls: type,
    host_env: dict[str, str],
    model: str | None,
    passed: tuple[str, ...],
    withheld: tuple[str, ...],
) -> None:
    run = run_agent(make(cls), tmp_path, host_env=host_env, model=model)
    env = run.record["env"]
    for name in passed:
        assert env[name] == host_env[name]
    for name in withheld:
        assert name not in env
    assert all(host_env[n] not in json.dumps(run.record) for n in withheld)


def test_every_cli_agent_is_a_registered_builtin() -> None:
    reg = registry("agent")
    for name in CLI_AGENTS:
        entry = reg.get(name)
        assert entry.plugin == f"ksi.agents.{name.replace('-', '_')}"
    assert reg.get("claude").name == "claude-code"
    assert reg.get("mini").name == "mini-swe-agent"


def test_agents_json_lists_binary_version_and_credentials(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_API_KEY", "k")
    result = CliRunner().invoke(_app(), ["agents", "--json"])
    assert result.exit_code == 0, result.output
    agents = {a["name"]: a for a in json.loads(result.output)["agents"]}
    assert set(CLI_AGENTS) <= set(agents)
    assert {"command", "nop", "oracle"} <= set(agents)
    codex = agents["codex"]
    assert codex["plugin"] == "ksi.agents.codex"
    assert codex["installed"] is True and codex["version"] == "codex-cli 0.46.0"
    assert codex["credentials"]["ok"] is True and codex["credentials"]["set"] == ["CODEX_API_KEY"]
    claude = agents["claude-code"]
    assert claude["credentials"]["ok"] is False
    assert "ANTHROPIC_API_KEY" in claude["credentials"]["fix"]
    assert "sk-" not in result.output  # names only, never values


def test_agents_text_shows_install_command_when_missing(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = CliRunner().invoke(_app(), ["agents"])
    assert result.exit_code == 0, result.output
    assert "claude NOT on PATH; install: npm install -g @anthropic-ai/claude-code" in result.output
    assert "install: python -m pip install mini-swe-agent" in result.output


def test_doctor_fails_for_a_chosen_agent_without_credentials(clean_env: Path) -> None:
    result = CliRunner().invoke(_app(), ["doctor", "--agent", "gemini-cli"])
    assert result.exit_code == 1
    assert "[FAIL] gemini-cli credentials" in result.output
    assert "fix: set one of GEMINI_API_KEY" in result.output
    # The fake CLI says 0.9.0: found, but not the version KSI was tested with (a warning).
    assert "[warn] gemini-cli binary" in result.output
    assert "(0.9.0); KSI was tested with 0.61.0" in result.output
    assert "fix: npm install -g @google/gemini-cli@0.61.0" in result.output


def test_doctor_fails_codex_with_only_openai_api_key(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")  # codex exec ignores it
    result = CliRunner().invoke(_app(), ["doctor", "--agent", "codex", "--environment", "local"])
    assert result.exit_code == 1
    assert "[FAIL] codex credentials" in result.output
    assert "set CODEX_API_KEY" in result.output and "ignores OPENAI_API_KEY" in result.output


def test_doctor_passes_with_login_file_and_local_environment(clean_env: Path) -> None:
    (clean_env / ".codex").mkdir()
    (clean_env / ".codex" / "auth.json").write_text("{}")
    result = CliRunner().invoke(_app(), ["doctor", "--agent", "codex", "--environment", "local"])
    assert result.exit_code == 0, result.output
    assert "login file" in result.output and "Ready." in result.output


def test_doctor_without_agent_only_warns_and_json(clean_env: Path) -> None:
    result = CliRunner().invoke(_app(), ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["ok"] is True
    statuses = {c["name"]: c["status"] for c in data["checks"]}
    assert statuses["python"] == "ok"
    assert statuses["claude-code credentials"] == "warn"


def test_doctor_unknown_agent_is_a_user_error(clean_env: Path) -> None:
    result = CliRunner().invoke(_app(), ["doctor", "--agent", "claud-code"])
    assert result.exit_code == 2
    assert "did you mean 'claude-code'" in result.output


# -- the doctor asks each environment its own start-up check (issue 9, section 2) --


def test_doctor_checks_the_sandbox_with_its_own_bubblewrap_probe(clean_env: Path) -> None:
    result = CliRunner().invoke(_app(), ["doctor", "--agent", "nop", "--environment", "bwrap"])
    assert result.exit_code == 0, result.output
    assert "[ok]   environment sandbox: provided by ksi.environments.sandbox" in result.output
    assert "[ok]   sandbox ready: its start-up check passed" in result.output


def test_doctor_reports_what_the_environment_itself_says_is_missing(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSI_DOCKER_BINARY", "no-such-docker-cli")
    result = CliRunner().invoke(_app(), ["doctor", "--agent", "nop", "--environment", "docker"])
    assert result.exit_code == 1
    assert (
        "[FAIL] docker ready: docker environment: the container CLI 'no-such-docker-cli' was "
        "not found on PATH" in result.output
    )
    assert "Something blocking is missing." in result.output

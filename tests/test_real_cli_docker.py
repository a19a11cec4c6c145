"""Real agent CLIs in the ``docker`` environment, through ``ksi run``, against the mock model.

The image is ``ksi-test/agent-clis`` (``.ci/build-agent-cli-image.sh``): the
busybox test root plus Codex's static binary, Claude Code's native binary
with the glibc it links, and node with the Gemini CLI package, copied from
the CLIs ``.ci/install-agent-clis.sh`` installed; built here when missing.
Each run gets only the provider's key and ``--agent-option
base_url=http://127.0.0.1:PORT`` (the mock), once with the container on the
host's network (``--network host``), where that loopback URL is the host's,
and once on the default network (``endpoints``: the run's internal network,
the mock reached only through KSI's relay, which each CLI must find in
``HTTPS_PROXY``/``HTTP_PROXY``). Tokens, cost and turns must equal what the
mock served.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
import test_real_cli_claude_code as claude
import test_real_cli_codex as codex
import test_real_cli_gemini_cli as gemini
from docker_support import (
    AGENT_CLI_IMAGE,
    agent_cli_image_unavailable,
    needs_docker,
    remove_run_containers,
)
from mockmodel import Answer, MockUsage, Step
from real_agents import MockRun, ksi_run_with_mock

from tests.run_helpers import table_price

pytestmark = [pytest.mark.real_cli, pytest.mark.docker, needs_docker]

#: ``host``: ``--network host``; ``endpoints``: no ``--network`` (the default).
NETWORKS = pytest.mark.parametrize("network", ["host", "endpoints"])


@pytest.fixture
def agent_image(tmp_path: Path) -> Iterator[str]:
    """The image holding the real CLIs; every container the test's run left is removed after."""
    why = agent_cli_image_unavailable()
    if why is not None:
        if os.environ.get("KSI_REQUIRE_AGENT_CLIS") == "1":
            pytest.fail(f"{why} (KSI_REQUIRE_AGENT_CLIS=1)")
        pytest.skip(why)
    yield AGENT_CLI_IMAGE
    remove_run_containers(tmp_path / "run")


def _docker_run(
    tmp_path: Path,
    image: str,
    *,
    agent: str,
    script: Sequence[Step],
    env: Mapping[str, str],
    model: str,
    agent_options: Sequence[str] = (),
    ksi: Sequence[str] = (),
    network: str = "host",
) -> MockRun:
    """``ksi run --environment docker --image IMAGE [--network host]``, the mock on loopback."""
    flags = ["--network", network] if network != "endpoints" else []
    run = ksi_run_with_mock(
        tmp_path,
        agent=agent,
        script=script,
        env=env,
        model=model,
        agent_options=agent_options,
        environment="docker",
        args=["--image", image, *flags],
        netns=False,  # the container joins the daemon's network namespace, not a new one
        ksi=ksi,
    )
    if network == "endpoints":  # reached through the relay: nothing to warn about
        assert "warning:" not in run.proc.stderr, run.describe()
    return run


def _assert_solved(run: MockRun) -> dict[str, object]:
    assert run.proc.returncode == 0, run.describe()
    rec = run.record
    assert (rec["status"], rec["score"], rec["agent_status"]) == ("scored", 1.0, "completed"), (
        run.describe()
    )
    assert rec["environment"] == "docker"
    return rec


@NETWORKS
def test_codex_solves_in_docker_with_usage_and_turns_as_served(
    tmp_path: Path, agent_image: str, network: str
) -> None:
    run = _docker_run(
        tmp_path,
        agent_image,
        agent="codex",
        script=codex.SOLVE,
        env=codex.KEY,
        model="mock-model",
        network=network,
        # No sandbox option: Codex's own sandbox needs bubblewrap, which a container without
        # capabilities cannot run (its command exits 101: "bubblewrap is unavailable");
        # sandbox=auto, the default, leaves it out where the environment isolates the agent.
    )
    rec = _assert_solved(run)
    served = run.served_usage()
    usage = rec["usage"]
    assert isinstance(usage, dict)
    assert usage["input_tokens"] == served.input_tokens == 180
    assert usage["output_tokens"] == served.output_tokens == 40
    assert usage["cache_read_tokens"] == served.cache_read_tokens == 1700
    assert usage["cache_write_tokens"] == served.cache_write_tokens == 40
    assert usage["turns"] == len(run.served) == 2
    assert usage["cost_usd"] is None  # codex reports no cost
    assert rec["final_message"] == "Created hello.txt containing hello."
    assert (run.attempt_file("codex.rollout.jsonl")).is_file()


@NETWORKS
def test_claude_code_solves_in_docker_with_usage_cost_and_turns_as_served(
    tmp_path: Path, agent_image: str, network: str
) -> None:
    first, second = MockUsage(1200, 45, 3000, 400), MockUsage(1500, 30, 4200, 0)
    run = _docker_run(
        tmp_path,
        agent_image,
        agent=claude.AGENT,
        script=[claude.write_hello(first), Answer("Created hello.txt with hello.", second)],
        env=claude.KEY,
        model=claude.MODEL,
        network=network,
    )
    rec = _assert_solved(run)
    usage = rec["usage"]
    assert isinstance(usage, dict)
    assert (usage["input_tokens"], usage["output_tokens"]) == (2700, 75)
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (7200, 400)
    assert usage["turns"] == len(run.served) == 2
    assert usage["cost_usd"] == claude.result_event(run)["total_cost_usd"]
    assert usage["cost_usd"] > 0
    assert rec["final_message"] == "Created hello.txt with hello."
    assert {r.headers.get("x-api-key") for r in run.requests} == {"sk-ant-mock-key"}


@NETWORKS
def test_gemini_cli_solves_in_docker_with_usage_and_turns_as_served(
    tmp_path: Path, agent_image: str, network: str
) -> None:
    """A node program: the image holds the host's node and the CLI's npm package."""
    run = _docker_run(
        tmp_path,
        agent_image,
        agent=gemini.AGENT,
        script=[
            gemini.write_hello(MockUsage(1100, 40, 2000)),
            Answer("hello.txt is in place.", MockUsage(1300, 20, 0)),
        ],
        env=gemini.KEY,
        model=gemini.MODEL,
        network=network,
    )
    rec = _assert_solved(run)
    usage = rec["usage"]
    assert isinstance(usage, dict)
    assert (usage["input_tokens"], usage["output_tokens"]) == (2400, 60)
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (2000, 0)
    assert usage["turns"] == len(run.served) == 2
    # Gemini CLI reports no cost: KSI prices the tokens from the table, and says so.
    assert usage["cost_usd"] == pytest.approx(
        table_price(gemini.MODEL, input_tokens=2400, output_tokens=60, cache_read_tokens=2000)
    )
    assert usage["cost_estimated"] is True
    assert rec["final_message"] == "hello.txt is in place."
    assert {r.headers.get("x-goog-api-key") for r in run.served_requests()} == {"gm-mock-key"}


def test_a_loopback_base_url_on_the_bridge_network_is_warned_about_and_fails(
    tmp_path: Path, agent_image: str
) -> None:
    """On the bridge network 127.0.0.1 is the container's own: KSI says so first, and that
    the agent has the whole network."""
    run = ksi_run_with_mock(
        tmp_path,
        agent="claude-code",
        script=[Answer("never reached", MockUsage(1, 1))],
        env=claude.KEY,
        model=claude.MODEL,
        agent_options=["max_retries=0"],
        environment="docker",
        args=["--image", agent_image, "--network", "bridge"],
        netns=False,
    )
    assert "cannot reach" in run.proc.stderr and "--network host" in run.proc.stderr, run.describe()
    assert "network=bridge" in run.proc.stderr and "the whole network" in run.proc.stderr
    rec = run.record
    # It never reached its endpoint: a connection_error naming it, not a crash (issue 28).
    assert rec["agent_status"] == "connection_error", run.describe()
    assert "ECONNREFUSED" in rec["error"] and "(its base_url)" in rec["error"]
    assert run.proc.returncode == 3 and "could not connect" in run.proc.stderr
    assert run.served == ()

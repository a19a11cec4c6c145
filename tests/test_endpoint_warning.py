"""A loopback ``base_url`` with the docker environment off the host network is warned about.

A container on docker's bridge network has a 127.0.0.1 of its own, so an agent
told ``base_url=http://127.0.0.1:4000`` there fails every model call
(``ECONNREFUSED``); ``ksi run`` says so before the first attempt and names the
fix. On the default network (``endpoints``) KSI's relay reaches it, so nothing
is said. The real runs are in ``test_real_cli_docker.py``.
"""

from __future__ import annotations

import pytest

from ksi.agents.claude_code import ClaudeCodeAgent
from ksi.attempt.safety import endpoint_warning
from ksi.environments.docker import DockerEnvironment, is_loopback_url
from ksi.environments.local import LocalEnvironment


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:4000", True),
        ("http://127.3.2.1:4000/v1", True),
        ("http://localhost:8080", True),
        ("http://[::1]:4000", True),
        ("https://api.anthropic.com", False),
        ("http://172.17.0.1:4000", False),
        ("http://10.0.0.5", False),
        ("http://[not-an-address", False),
    ],
)
def test_loopback_urls_are_told_apart(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback


@pytest.mark.parametrize("network", ["bridge", "none", "my-net"])
def test_a_network_off_the_host_warns_with_the_fix(network: str) -> None:
    agent = ClaudeCodeAgent(base_url="http://127.0.0.1:4000")
    said = endpoint_warning(DockerEnvironment(network=network), agent)
    assert said is not None
    assert "'claude-code'" in said and "http://127.0.0.1:4000" in said
    assert f"{network!r}" in said and "--network host" in said
    assert "network=endpoints, the default" in said


@pytest.mark.parametrize(
    ("environment", "agent"),
    [
        (DockerEnvironment(network="host"), ClaudeCodeAgent(base_url="http://127.0.0.1:4000")),
        (DockerEnvironment(), ClaudeCodeAgent(base_url="http://127.0.0.1:4000")),
        (DockerEnvironment(), ClaudeCodeAgent(base_url="https://gateway.example.com")),
        (DockerEnvironment(), ClaudeCodeAgent()),
        (LocalEnvironment(), ClaudeCodeAgent(base_url="http://127.0.0.1:4000")),
    ],
    ids=["host-network", "endpoints-default", "remote-url", "no-base-url", "local-environment"],
)
def test_no_warning_where_the_endpoint_is_reachable(environment: object, agent: object) -> None:
    assert endpoint_warning(environment, agent) is None

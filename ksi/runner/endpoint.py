"""Whether the agent's model endpoint is within reach of the environment it runs in.

An agent's ``base_url`` option names the provider endpoint its CLI calls (a
proxy, a gateway, a local model server). Some environments cannot reach every
URL the host can: a container on docker's ``bridge`` network has a loopback of
its own, so ``http://127.0.0.1:4000`` there is not the host's port 4000, and
every model call fails (``ECONNREFUSED``). The environment words the warning
(an optional ``endpoint_warning(agent, url)`` method, like
``credential_warning``); the run asks before its first attempt, when the
agent has a ``base_url``.
"""

from __future__ import annotations

from typing import Any


def endpoint_warning(environment: Any, agent: Any) -> str | None:
    """The environment's warning that the agent's ``base_url`` is out of its reach, if any."""
    url = getattr(agent, "base_url", "")
    word = getattr(environment, "endpoint_warning", None)
    if not isinstance(url, str) or not url or not callable(word):
        return None
    said = word(str(getattr(agent, "name", type(agent).__name__)), url)
    return str(said) if said else None

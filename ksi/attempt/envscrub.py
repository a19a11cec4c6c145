"""The environment variables an agent process gets: a small allow-list, never the host's all.

An agent runs with API keys in reach, so the host environment is not handed
over wholesale: a key for one provider must not leak to an agent (or to the
code it writes and runs) that does not need it. An agent process gets:

1. the host variables in :data:`ALLOWED` and every ``LC_*`` locale variable,
   when set: what a shell, a compiler, a package manager and TLS behind a
   corporate proxy need, and nothing that is usually a secret;
2. the variables the agent declares (``required_env``, ``optional_env``),
   when set;
3. the variables the user names with ``--agent-env NAME``, when set.

Values are copied from the host; nothing is invented. Proxy URLs may hold
credentials; they are passed because without them nothing reaches the
network from behind a proxy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ksi.interfaces import Agent

#: Host variables every agent process gets when they are set.
ALLOWED: tuple[str, ...] = (
    # a usable shell
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TZ",
    "TMPDIR",
    # language; every LC_* is allowed as well (see LOCALE_PREFIX)
    "LANG",
    "LANGUAGE",
    # where per-user tools keep their config and caches
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    # network through a proxy, in both the lower- and upper-case spellings tools read
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    # TLS trust stores (corporate CAs)
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)
#: Every host variable starting with this is allowed (LC_ALL, LC_CTYPE...).
LOCALE_PREFIX = "LC_"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _host(host_env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if host_env is None else host_env


def scrubbed_env(
    *,
    required: Sequence[str],
    optional: Sequence[str],
    passthrough: Sequence[str],
    host_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The base environment of an agent process.

    :param required: the agent's ``required_env`` (checked beforehand with
        :func:`missing_required`; here a missing one is simply absent).
    :param optional: the agent's ``optional_env``.
    :param passthrough: names given with ``--agent-env``.
    :param host_env: the host environment (default: ``os.environ``).
    """
    host = _host(host_env)
    env = {name: host[name] for name in ALLOWED if name in host}
    env.update({k: v for k, v in host.items() if k.startswith(LOCALE_PREFIX)})
    for name in (*required, *optional, *passthrough):
        if name in host:
            env[name] = host[name]
    return env


def agent_optional_env(
    agent: Agent, model: str | None, host_env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The agent's ``optional_env`` names that apply on this host with this model.

    The agent's ``optional_env_for(host_env, model)`` may narrow its list to
    the provider mode in use (Claude Code passes the AWS keys only with
    ``CLAUDE_CODE_USE_BEDROCK`` on); by default it is the whole
    ``optional_env`` (:class:`ksi.interfaces.AgentBase`).
    """
    return tuple(agent.optional_env_for(_host(host_env), model))


def missing_required(
    agent: str,
    required: Sequence[str],
    *,
    passthrough: Sequence[str] = (),
    host_env: Mapping[str, str] | None = None,
) -> list[str]:
    """Every reason the agent's environment cannot be built, one message each (empty: fine).

    Reports a required variable that is unset (or empty), an ``--agent-env``
    name that is not a variable name (``NAME=VALUE`` given by mistake), and
    an ``--agent-env`` variable that is not set on the host.
    """
    host = _host(host_env)
    problems = []
    for name in required:
        if not host.get(name):
            problems.append(
                f"agent {agent!r} needs the environment variable {name}, which is not set; "
                f"export {name}=... in the shell that runs ksi"
            )
    problems.extend(
        passthrough_problems("--agent-env", passthrough, f"agent {agent!r}", host_env=host)
    )
    return problems


def passthrough_problems(
    flag: str,
    names: Sequence[str],
    receiver: str,
    *,
    host_env: Mapping[str, str] | None = None,
) -> list[str]:
    """Every problem with the variable names given to ``flag`` (``--agent-env``, ``--eval-env``).

    A name must be a variable name and set on the host. What was given is
    echoed only when it *is* a name: ``MY_TOKEN=sk-...`` typed by mistake is
    shown as ``MY_TOKEN=<value not shown>``, and anything else only by its
    position, because the text may be the secret itself.
    """
    host = _host(host_env)
    problems = []
    for position, name in enumerate(names, start=1):
        if not _NAME.match(name):
            problems.append(
                f"{flag} {_shown(name, position)}: expected a variable name such as MY_TOKEN; "
                "the value is taken from your environment (export it first), not from the "
                "command line"
            )
        elif name not in host:
            problems.append(
                f"{flag} {name}: {name} is not set in the environment ksi runs in, so "
                f"{receiver} cannot receive it; export it or drop the option"
            )
    return problems


def _shown(given: str, position: int) -> str:
    """How a bad ``NAME`` argument is named in a message without showing a value."""
    head, sep, _value = given.partition("=")
    if sep and _NAME.match(head):
        return f"{head}=<value not shown>"
    return f"value #{position} (not shown: it is not a variable name and may be a secret)"

"""What a run decides for safety before it starts.

**Grading on the host.** The eval command of a host evaluator imports the
agent's code, so a run that kept its agent isolated must not hand that code
the host when grading. The
decision is made once per run (``ksi run``, ``ksi regrade``) and handed to an
evaluator that can apply it: one that defines
``for_host_grading(isolation=..., pass_env=...)`` (the ``command``
evaluator). An evaluator without it grades as it always did.

**Credentials on an environment that does not isolate.** On ``local`` the
scrub of the agent's environment keeps nothing secret: any process the agent
starts can read KSI's own environment from ``/proc/<KSI's pid>/environ``. The
environment words the warning (``credential_warning``); the run decides when
it is due: the agent gets credentials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ksi.attempt.envscrub import agent_optional_env
from ksi.errors import UserInputError

#: ``--eval-isolation`` values; ``auto``: ``sandbox`` when the agent ran isolated.
EVAL_ISOLATION_CHOICES = ("auto", "none", "sandbox")


def agent_is_isolated(environment: Any) -> bool:
    """Whether an environment (instance or class) keeps the agent off the host.

    Environments say so with ``isolates_agent``; one that does not say is
    taken as isolating, so its grades are isolated too (the safe side).
    """
    return bool(getattr(environment, "isolates_agent", True))


def decide_eval_isolation(choice: str, environment: Any, *, eval_in: str = "host") -> str:
    """``none`` or ``sandbox`` for ``--eval-isolation choice`` with this environment.

    ``auto`` isolates when the agent ran isolated; with ``--eval-in
    environment`` nothing is graded on the host, so nothing needs bubblewrap.
    """
    if choice not in EVAL_ISOLATION_CHOICES:
        raise UserInputError(
            f"--eval-isolation: {choice!r} is not one of {', '.join(EVAL_ISOLATION_CHOICES)}"
        )
    if choice != "auto":
        return choice
    if eval_in == "environment":
        return "none"
    return "sandbox" if agent_is_isolated(environment) else "none"


def configure_host_grading(evaluator: Any, *, isolation: str, pass_env: Sequence[str]) -> Any:
    """The evaluator set up to grade with ``isolation`` and ``pass_env`` (checked now)."""
    configure = getattr(evaluator, "for_host_grading", None)
    if not callable(configure):
        if pass_env:
            name = getattr(evaluator, "name", type(evaluator).__name__)
            raise UserInputError(
                f"--eval-env: evaluator {name!r} does not take host variables from KSI; "
                "drop --eval-env (or see that evaluator's own options)"
            )
        return evaluator
    return configure(isolation=isolation, pass_env=tuple(pass_env))


def credentials_passed(
    agent: Any,
    *,
    model: str | None,
    agent_env: Sequence[str],
    host_env: Mapping[str, str],
) -> list[str]:
    """The host variables the agent will get beyond the allow-list: its declared ones set
    on this host (``required_env``, ``optional_env`` for this model) and ``--agent-env``."""
    declared = (*getattr(agent, "required_env", ()), *agent_optional_env(agent, model, host_env))
    names = [n for n in declared if host_env.get(n)] + [n for n in agent_env if n in host_env]
    return list(dict.fromkeys(names))


def credential_warning(
    environment: Any,
    agent: Any,
    *,
    model: str | None,
    agent_env: Sequence[str],
    host_env: Mapping[str, str],
) -> str | None:
    """The environment's warning that the agent's credentials are exposed, when due."""
    word = getattr(environment, "credential_warning", None)
    if agent_is_isolated(environment) or not callable(word):
        return None
    names = credentials_passed(agent, model=model, agent_env=agent_env, host_env=host_env)
    if not names:
        return None
    return str(word(str(getattr(agent, "name", type(agent).__name__)), names))


def endpoint_warning(environment: Any, agent: Any) -> str | None:
    """The environment's warning that the agent's ``base_url`` is out of its reach, if any.

    Some environments cannot reach every URL the host can: a container on
    docker's ``bridge`` network has a loopback of its own, so
    ``http://127.0.0.1:4000`` there is not the host's port 4000 and every model
    call fails. The environment words it (an optional ``endpoint_warning(agent,
    url)`` method, as :func:`credential_warning`'s); the run asks before its
    first attempt, when the agent has a ``base_url``.
    """
    url = getattr(agent, "base_url", "")
    word = getattr(environment, "endpoint_warning", None)
    if not isinstance(url, str) or not url or not callable(word):
        return None
    said = word(str(getattr(agent, "name", type(agent).__name__)), url)
    return str(said) if said else None

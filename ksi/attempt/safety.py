"""What a run decides for safety before it starts.

**Grading on the host.** The eval command of a host evaluator imports the
agent's code, so a run that kept its agent isolated must not hand that code
the host when grading. The
decision is made once per run (``ksi run``, ``ksi regrade``) and handed to
the evaluator's ``for_host_grading(isolation=..., pass_env=...)``: the
``command`` evaluator applies it; one that runs no command of KSI's grades as
it always did (:class:`ksi.interfaces.EvaluatorBase`).

**Credentials on an environment that does not isolate.** On ``local`` the
scrub of the agent's environment keeps nothing secret: any process the agent
starts can read KSI's own environment from ``/proc/<KSI's pid>/environ``. The
environment words the warning (``credential_warning``); the run decides when
it is due: the agent gets credentials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ksi.attempt.envscrub import agent_optional_env
from ksi.choices import EvalIn, EvalIsolation
from ksi.errors import UserInputError
from ksi.interfaces import Agent, Environment, Evaluator
from ksi.kinds import EVALUATOR


def agent_is_isolated(environment: Environment | None) -> bool:
    """Whether an environment says it keeps the agent off the host (``isolates_agent``).

    Only ``True`` counts: an environment that does not say (None) is not trusted
    to, so the agent keeps its own sandbox and credentials given to it are warned
    about. With no environment (``ksi grade`` on a directory) nothing ran an agent.
    """
    return environment is not None and environment.isolates_agent is True


def _grade_isolated_by_default(environment: Environment | None) -> bool:
    """Whether ``--eval-isolation auto`` grades in the sandbox: unless the agent is known
    to have had the host already (``isolates_agent`` False), the agent's code gets none
    of it when graded; an environment that does not say, or none (``ksi grade`` on a
    directory), is the safe side."""
    return environment is None or environment.isolates_agent is not False


def decide_eval_isolation(
    choice: str, environment: Environment | None, *, eval_in: str = EvalIn.HOST
) -> EvalIsolation:
    """``none`` or ``sandbox`` for ``--eval-isolation choice`` with this environment.

    ``auto`` isolates when the agent ran isolated; with ``--eval-in
    environment`` nothing is graded on the host, so nothing needs bubblewrap.
    """
    if choice not in tuple(EvalIsolation):
        raise UserInputError(
            f"--eval-isolation: {choice!r} is not one of {', '.join(EvalIsolation)}"
        )
    if choice != EvalIsolation.AUTO:
        return EvalIsolation(choice)
    if eval_in == EvalIn.ENVIRONMENT:
        return EvalIsolation.NONE
    return EvalIsolation.SANDBOX if _grade_isolated_by_default(environment) else EvalIsolation.NONE


def configure_host_grading(
    evaluator: Evaluator, *, isolation: str, pass_env: Sequence[str]
) -> Evaluator:
    """The evaluator set up to grade with ``isolation`` and ``pass_env`` (checked now)."""
    # A plugin's own for_host_grading returns its own object: completed like the first.
    return EVALUATOR.complete(
        evaluator.for_host_grading(isolation=isolation, pass_env=tuple(pass_env))
    )


def credentials_passed(
    agent: Agent,
    *,
    model: str | None,
    agent_env: Sequence[str],
    host_env: Mapping[str, str],
) -> list[str]:
    """The host variables the agent will get beyond the allow-list: its declared ones set
    on this host (``required_env``, ``optional_env`` for this model) and ``--agent-env``."""
    declared = (*agent.required_env, *agent_optional_env(agent, model, host_env))
    names = [n for n in declared if host_env.get(n)] + [n for n in agent_env if n in host_env]
    return list(dict.fromkeys(names))


def credential_warning(
    environment: Environment,
    agent: Agent,
    *,
    model: str | None,
    agent_env: Sequence[str],
    host_env: Mapping[str, str],
) -> str | None:
    """The environment's warning that the agent's credentials are exposed, when due."""
    if agent_is_isolated(environment):
        return None
    names = credentials_passed(agent, model=model, agent_env=agent_env, host_env=host_env)
    if not names:
        return None
    return environment.credential_warning(agent.name, names)


def endpoint_warning(environment: Environment, agent: Agent) -> str | None:
    """The environment's warning that the agent's ``base_url`` is out of its reach, if any.

    Some environments cannot reach every URL the host can: a container on
    docker's ``bridge`` network has a loopback of its own, so
    ``http://127.0.0.1:4000`` there is not the host's port 4000 and every model
    call fails. The environment words it (its ``endpoint_warning(agent, url)``,
    as :func:`credential_warning`'s); the run asks before its first attempt,
    when the agent has a ``base_url``.
    """
    url = agent.base_url
    if not isinstance(url, str) or not url:
        return None  # a plugin's agent may keep ``None`` there for "the provider's own"
    return environment.endpoint_warning(agent.name, url) or None

"""Running the agent of one attempt: its prompt, its process in the environment, its outcome.

The agent's CLI runs through the environment's handle with the attempt's
timeout and log cap, its output going to ``agent.stdout.log`` and
``agent.stderr.log`` of the directory it is given (the attempt's, or a
feedback round's). What it did is read back by the agent plugin
(:meth:`~ksi.interfaces.Agent.outcome`): status, usage, final message. Tokens
the agent reported without a cost are priced here (:func:`ksi.pricing.priced`,
with the attempt's model), so ``--max-cost`` sees every agent's spend. What it
did step by step (:meth:`~ksi.interfaces.Agent.trajectory`) is kept as
``trajectory.json`` beside the logs (:mod:`ksi.attempt.trajectory`), its
totals the priced usage.
"""

from __future__ import annotations

import time

import attrs

from ksi.attempt.cancel import Cancelled, CancelToken
from ksi.attempt.clock import AttemptClock
from ksi.attempt.components import component_name
from ksi.attempt.job import AttemptJob
from ksi.attempt.trajectory import keep_trajectory
from ksi.interfaces import Agent, AgentContext, AgentOutcome, EnvironmentHandle, ExecResult
from ksi.pricing import priced
from ksi.tasks.prompts import agent_prompt

DEFAULT_AGENT_TIMEOUT_SEC = 1800.0


def agent_timeout(job: AttemptJob) -> float:
    """``--timeout``, else the task's own agent timeout, else the default."""
    if job.settings.timeout_sec is not None:
        return job.settings.timeout_sec
    value = job.task.runtime.agent_timeout_sec
    return value if value is not None else DEFAULT_AGENT_TIMEOUT_SEC


def attempt_prompt(job: AttemptJob, workspace_path: str) -> str:
    """The task's prompt, plus one line per context file that asks to be pointed at."""
    prompt = agent_prompt(job.task)
    pointers = [
        item.prompt_pointer.replace("{path}", f"{workspace_path.rstrip('/')}/{item.path}")
        for item in job.context_files
        if item.prompt_pointer
    ]
    return "\n\n".join([prompt, *pointers]) if pointers else prompt


@attrs.frozen
class AgentRunner:
    """Runs the attempt's agent, as many times as the attempt has rounds."""

    job: AttemptJob
    agent: Agent
    token: CancelToken
    clock: AttemptClock

    def run(
        self, ctx: AgentContext, handle: EnvironmentHandle
    ) -> tuple[AgentOutcome, ExecResult | None]:
        """One agent process on ``ctx.prompt``; its logs go to ``ctx.attempt_dir``."""
        agent, t = self.agent, time.monotonic()
        self.clock.step = f"running agent {component_name(agent)!r}"
        agent.setup(ctx)
        invocation = agent.invocation(ctx)
        # Tasks that work in the image's own directory (Harbor's /app) say so.
        workdir = self.job.task.runtime.workdir
        if invocation is not None and isinstance(workdir, str) and invocation.cwd == ".":
            invocation = attrs.evolve(invocation, cwd=workdir)
        result: ExecResult | None = None
        if invocation is not None:
            result = handle.exec(
                invocation,
                timeout=agent_timeout(self.job),
                stdout_path=ctx.attempt_dir / "agent.stdout.log",
                stderr_path=ctx.attempt_dir / "agent.stderr.log",
                log_cap_bytes=self.job.settings.log_cap_bytes,
            )
        outcome = agent.outcome(ctx, result)
        # Each agent process is priced on its own (feedback rounds add up after).
        outcome = attrs.evolve(outcome, usage=priced(outcome.usage, ctx.model))
        if self.token.cancelled:
            raise Cancelled("the agent was killed by the run's teardown")
        keep_trajectory(agent, ctx, result, outcome)
        self.clock.add_time("agent", t)
        return outcome, result

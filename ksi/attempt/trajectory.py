"""After the agent ran: its trajectory, from its plugin, as ``trajectory.json``.

One step of the attempt, right after :meth:`~ksi.interfaces.Agent.outcome`:
the agent plugin reads its logs into a :class:`~ksi.trajectories.Trajectory`
(or says it cannot), KSI sets its totals to the outcome's usage (the attempt
record's), says in its notes where the CLI's per-call numbers do not add up to
them, and writes it, bounded, beside the agent's logs (a feedback round's in
``rounds/<n>/``). A plugin that fails here leaves a trajectory of the prompt
and the error; a trajectory that cannot be written (other than for a full
disk, which the attempt must hear of) is skipped: neither costs the attempt.
"""

from __future__ import annotations

import attrs

from ksi.attempt.diskfull import is_disk_full
from ksi.interfaces import Agent, AgentContext, AgentOutcome, ExecResult
from ksi.models import Usage
from ksi.trajectories import TRAJECTORY_FILE, Step, Trajectory, write_trajectory
from ksi.trajectories.writer import cut_text


def _tokens(u: Usage) -> tuple[int, int, int, int]:
    return (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)


def with_totals(traj: Trajectory, usage: Usage) -> Trajectory:
    """``traj`` with the record's ``usage`` as its totals, and a note where its steps'
    usage differs from them (a CLI that reports some calls only in its totals)."""
    notes = list(traj.notes)
    steps = traj.step_usage()
    if not any(s.usage is not None for s in traj.steps):
        if any(_tokens(usage)) or usage.cost_usd is not None:
            notes.append("The CLI reports usage for the whole run only: the steps carry none.")
    elif _tokens(steps) != _tokens(usage):
        notes.append(
            "The steps' usage (input, output, cache read, cache write: "
            f"{', '.join(map(str, _tokens(steps)))}) differs from the run's totals "
            f"({', '.join(map(str, _tokens(usage)))}), which the attempt record holds."
        )
    if usage.cost_estimated:
        table = usage.price_table or "its price table"
        notes.append(f"The CLI reports no cost: KSI estimated the run's from {table}.")
    elif usage.cost_usd is not None and steps.cost_usd is None:
        notes.append("The CLI reports its cost for the whole run only.")
    elif usage.cost_usd is not None and abs((steps.cost_usd or 0.0) - usage.cost_usd) > 1e-9:
        notes.append(
            f"The steps' costs add up to {steps.cost_usd} USD; the run's total, "
            f"{usage.cost_usd} USD, is the CLI's own (and the attempt record's)."
        )
    return attrs.evolve(traj, usage=usage, notes=tuple(dict.fromkeys(notes)))


def _unreadable(agent: Agent, ctx: AgentContext, exc: Exception) -> Trajectory:
    return Trajectory(
        agent=str(agent.name),
        steps=(Step("user", ctx.prompt),),
        model=ctx.model,
        workspace=ctx.workspace_path,
        notes=(
            cut_text(f"KSI could not read the agent's steps: {type(exc).__name__}: {exc}", 2000),
        ),
    )


def keep_trajectory(
    agent: Agent, ctx: AgentContext, result: ExecResult | None, outcome: AgentOutcome
) -> None:
    """Ask ``agent`` for its trajectory of this run and write it (see the module docstring)."""
    try:
        traj = agent.trajectory(ctx, result)
    except Exception as exc:  # a parser bug must not lose the attempt
        traj = _unreadable(agent, ctx, exc)
    if traj is None:
        return
    try:
        # The directory holds the agent's run already (its prompt, its logs' place).
        write_trajectory(
            ctx.attempt_dir / TRAJECTORY_FILE, with_totals(traj, outcome.usage), parents=False
        )
    except Exception as exc:  # the trajectory is worth less than the attempt
        if is_disk_full(exc):
            raise

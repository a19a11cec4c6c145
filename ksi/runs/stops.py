"""Why a run stops launching attempts: ``--max-cost``, a full disk, the agent's set-up, Ctrl-C.

Each is decided from a record (or the spend) alone, before the record is
journalled, so the next attempt can start while this one is written; the
attempts already running finish and are journalled. The reason goes into
``run.json`` (``stopped_reason``) and, for the agent's set-up, into the message
``ksi run`` exits with (code 3).

The agent's set-up fails the same way in every attempt, so the run stops on
the first sign of it (``--fail-fast``, the default): an ``auth_error``; a
``tools_refused`` (its own sandbox or permission layer refused every tool
call); :data:`CONNECTION_STOP_AFTER` attempts in a row that failed to connect
in the same way before any attempt of the session got through (one refused
connection may be a blip; three before anything worked is an endpoint that is
not there).
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from ksi.attempt.diskfull import DiskFullWatch
from ksi.connection import connection_failure
from ksi.errors import AgentAuthError, AgentSetupError
from ksi.interfaces import Agent
from ksi.models import AgentStatus
from ksi.records import AttemptRecord, AttemptStatus, ErrorKind

#: Connection errors in a row, alike and before any attempt got through, that stop a run.
CONNECTION_STOP_AFTER = 3


@attrs.define
class RunStops:
    """What stops one session of a run (every field starts as "nothing stopped it")."""

    #: ``--max-cost`` (None: no limit) and ``--fail-fast`` (the agent's set-up failing
    #: stops launches: see the module docstring).
    max_cost_usd: float | None
    fail_fast_auth: bool
    #: A full disk seen by any attempt: the run stops launching and ends with its error.
    disk: DiskFullWatch
    #: The reported spend: the journal's and the stored distillations', then this session's.
    spent_usd: float = 0.0
    #: No new attempt is launched (the reason says why; "" when none was given).
    stopping: bool = False
    reason: str = ""
    #: Ctrl-C (or a stop signal): the run exits with code 130, ready to resume.
    interrupted: bool = False
    #: The attempts of this session that ended in ``auth_error``.
    auth_failures: list[AttemptRecord] = attrs.field(factory=list)
    #: ... in ``connection_error``, and the last run of them alike (what failed) with no
    #: other attempt between; ``got_through`` once any attempt ended otherwise.
    connection_failures: list[AttemptRecord] = attrs.field(factory=list)
    connection_streak: list[AttemptRecord] = attrs.field(factory=list)
    got_through: bool = False
    #: ... in ``tools_refused``.
    refusals: list[AttemptRecord] = attrs.field(factory=list)
    #: Planned attempts not launched because the agent's set-up stopped the run.
    not_started: list[str] = attrs.field(factory=list)

    def settle(self, record: AttemptRecord) -> None:
        """What one finished try stops: a full disk, the spend reaching ``--max-cost``, the
        agent's set-up failing (with fail-fast)."""
        if record.error_kind == ErrorKind.DISK_FULL:
            self.note_full_disk(stopped=True)
        if record.usage.cost_usd is not None:
            self.spent_usd += float(record.usage.cost_usd)
            self.over_budget()
        status = record.agent_status
        if status == AgentStatus.AUTH_ERROR:
            self.auth_failures.append(record)
            self._stop_for(
                f"auth_error: agent {record.agent!r} could not authenticate "
                f"(task {record.task_id}); no new attempts launched"
            )
        elif status == AgentStatus.TOOLS_REFUSED:
            self.refusals.append(record)
            self._stop_for(
                f"tools_refused: agent {record.agent!r}'s own sandbox or permission layer "
                f"refused every tool call (task {record.task_id}); no new attempts launched"
            )
        if status == AgentStatus.CONNECTION_ERROR:
            self.connection_failures.append(record)
            streak = self.connection_streak
            if streak and _failed(streak[-1]) != _failed(record):
                streak.clear()
            streak.append(record)
            if not self.got_through and len(streak) >= CONNECTION_STOP_AFTER:
                self._stop_for(
                    f"connection_error: agent {record.agent!r} could not connect in "
                    f"{len(streak)} attempts in a row ({_failed(record)}); "
                    "no new attempts launched"
                )
        elif record.status != AttemptStatus.ERROR:  # KSI's own failure says nothing of it
            self.got_through = True
            self.connection_streak.clear()

    def _stop_for(self, reason: str) -> None:
        """Stop launching for the agent's set-up (unless ``--no-fail-fast``)."""
        if self.fail_fast_auth and not self.stopping:
            self.stopping = True
            self.reason = reason

    @property
    def setup_failed(self) -> bool:
        """Whether any attempt of the session failed for the agent's set-up."""
        return bool(self.auth_failures or self.refusals or self.connection_failures)

    def over_budget(self) -> bool:
        """Stop launching attempts once the reported spend reaches ``--max-cost``."""
        limit = self.max_cost_usd
        if limit is None or self.spent_usd < limit:
            return False
        if not self.stopping:
            self.reason = (
                f"max_cost: reported spend ${self.spent_usd:.4f} reached "
                f"--max-cost ${limit:.4f}; no new attempts launched"
            )
            self.stopping = True
        return True

    def note_full_disk(
        self,
        exc: BaseException | None = None,
        *,
        stopped: bool = False,
        journal_failed: bool = False,
    ) -> None:
        """The disk is full: launch nothing more; the run ends with the disk-full error."""
        self.disk.note(exc, attempt_stopped=stopped, journal_failed=journal_failed)
        self.reason = self.disk.stop_reason()
        self.stopping = True

    def interrupt(self) -> None:
        """Ctrl-C reached the run (the scheduler has already cancelled what was running)."""
        self.interrupted = True
        self.reason = "interrupted"

    def setup_failure(self, agent: Agent, run_dir: Path) -> AgentSetupError | None:
        """What ``ksi run`` exits with when the agent's set-up failed (None: it did not)."""
        if self.auth_failures:
            return AgentAuthError(self._auth_message(agent, run_dir))
        if self.refusals:
            return AgentSetupError(self._refusal_message(run_dir))
        if self.connection_failures and not self.got_through:
            return AgentSetupError(self._connection_message(agent, run_dir))
        return None

    def _auth_message(self, agent: Agent, run_dir: Path) -> str:
        """Which agent failed to authenticate, what to check, and the CLI's own words."""
        first = self.auth_failures[0]
        variables = (*agent.credential_env, *agent.required_env)
        given = [v for v in variables if os.environ.get(v, "").strip()]
        check = given or list(variables)
        lines = [
            f"agent {first.agent!r} could not authenticate in "
            f"{len(self.auth_failures)} attempt(s) (first: task {first.task_id}, "
            f"attempt {first.attempt})",
            f"  the CLI said: {first.error or '(nothing)'}",
        ]
        if check:
            which = "the value of" if given else "set"
            lines.append(f"  check: {which} {' / '.join(check)}")
        return self._ending(lines, "fix the credentials", "auth_error", run_dir)

    def _refusal_message(self, run_dir: Path) -> str:
        """Whose tools were refused, and the fix (the record's error ends with it)."""
        first = self.refusals[0]
        lines = [
            f"agent {first.agent!r} could not run a single tool call in "
            f"{len(self.refusals)} attempt(s) (first: task {first.task_id}, "
            f"attempt {first.attempt}): {first.error}",
        ]
        return self._ending(lines, "fix that", "tools_refused", run_dir)

    def _connection_message(self, agent: Agent, run_dir: Path) -> str:
        """What failed, where (the record's error names the endpoint), and the CLI's words."""
        failures = self.connection_streak or self.connection_failures
        first = failures[0]
        base_url = str(getattr(agent, "base_url", "") or "")
        lines = [
            f"agent {first.agent!r} could not connect to its model in {len(failures)} "
            f"attempt(s) in a row, before any attempt got through (first: task "
            f"{first.task_id}, attempt {first.attempt}): {_failed(first)}",
            f"  first error: {first.error or '(none given)'}",
        ]
        if base_url and base_url not in first.error:
            lines.append(f"  base_url: {base_url}")
        lines.append(
            "  check: that the endpoint is up, and reachable from where the agent runs "
            "(the host name, a proxy, TLS certificates, the environment's network)"
        )
        return self._ending(lines, "fix that", "connection_error", run_dir)

    def _ending(self, lines: list[str], fix: str, status: str, run_dir: Path) -> str:
        """What was not started, and how to resume (the same for every set-up failure)."""
        if self.not_started:
            unique = list(dict.fromkeys(self.not_started))
            lines.append(
                f"  not started ({len(self.not_started)} attempt(s)): {', '.join(unique[:10])}"
                + (" ..." if len(unique) > 10 else "")
            )
        lines.append(
            f"  {fix}, then resume (the {status} attempts run again): "
            f"ksi run --resume --run-dir {run_dir}"
        )
        if self.fail_fast_auth:
            lines.append(f"  (--no-fail-fast keeps launching attempts after {status})")
        return "\n".join(lines)


def _failed(record: AttemptRecord) -> str:
    """What a connection_error record says failed (the key of "the same error")."""
    return connection_failure(record.error) or "the connection failed"

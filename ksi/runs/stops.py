"""Why a run stops launching attempts: ``--max-cost``, a full disk, an auth error, Ctrl-C.

Each is decided from a record (or the spend) alone, before the record is
journalled, so the next attempt can start while this one is written; the
attempts already running finish and are journalled. The reason goes into
``run.json`` (``stopped_reason``) and, for an auth error, into the message
``ksi run`` exits with.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from ksi.attempt.diskfull import DiskFullWatch
from ksi.interfaces import Agent
from ksi.models import AgentStatus
from ksi.records import AttemptRecord, ErrorKind


@attrs.define
class RunStops:
    """What stops one session of a run (every field starts as "nothing stopped it")."""

    #: ``--max-cost`` (None: no limit) and ``--fail-fast`` (an auth error stops launches).
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
    #: Planned attempts not launched because an auth_error stopped the run.
    not_started: list[str] = attrs.field(factory=list)

    def settle(self, record: AttemptRecord) -> None:
        """What one finished try stops: a full disk, the spend reaching ``--max-cost``, an
        auth error (with fail-fast)."""
        if record.error_kind == ErrorKind.DISK_FULL:
            self.note_full_disk(stopped=True)
        if record.usage.cost_usd is not None:
            self.spent_usd += float(record.usage.cost_usd)
            self.over_budget()
        if record.agent_status == AgentStatus.AUTH_ERROR:
            self.auth_failures.append(record)
            if self.fail_fast_auth and not self.stopping:
                self.stopping = True
                self.reason = (
                    f"auth_error: agent {record.agent!r} could not authenticate "
                    f"(task {record.task_id}); no new attempts launched"
                )

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

    def auth_failure_message(self, agent: Agent, run_dir: Path) -> str:
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
        if self.not_started:
            unique = list(dict.fromkeys(self.not_started))
            lines.append(
                f"  not started ({len(self.not_started)} attempt(s)): {', '.join(unique[:10])}"
                + (" ..." if len(unique) > 10 else "")
            )
        lines.append(
            "  fix the credentials, then resume (the auth_error attempts run again): "
            f"ksi run --resume --run-dir {run_dir}"
        )
        if self.fail_fast_auth:
            lines.append("  (--no-fail-fast keeps launching attempts after an auth error)")
        return "\n".join(lines)

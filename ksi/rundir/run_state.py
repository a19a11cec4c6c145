"""``run.json``: what a run is (id, configuration, task set, sessions, versions, provenance).

One model, :class:`RunState`, read by :func:`load_run_state` and written by
:func:`save_run_state`; every command that looks at a run (run, resume,
report, regrade, cleanup) goes through these two, never through a raw dict.
Reading is lenient about keys it does not know, so a run directory written
by another KSI version still reads, and strict about the types of those it
knows: ``run.json`` may have been edited, and ``"3"`` read as 3 (or an object
as the list of its keys) would run an experiment nobody asked for.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs

from ksi.errors import UserInputError
from ksi.layout import RunLayout
from ksi.provenance import Provenance
from ksi.records import now
from ksi.rundir.config import RunConfig
from ksi.rundir.run_option import option_of
from ksi.serialization import strict_converter, to_data, validation_problems, write_json_atomic


@attrs.frozen
class Session:
    """One ``ksi run`` invocation on the run directory (the first, or a resume)."""

    started_at: str
    finished_at: str | None = None

    def wall_time_sec(self) -> float:
        if not self.finished_at:
            return 0.0
        a = dt.datetime.fromisoformat(self.started_at)
        b = dt.datetime.fromisoformat(self.finished_at)
        return (b - a).total_seconds()


def _no_config() -> RunConfig:
    """The configuration of a ``run.json`` that holds none (one written by hand, with
    only the run id ``ksi cleanup`` needs)."""
    return RunConfig(agent="")


@attrs.frozen
class RunState:
    run_id: str = ""
    #: The run's configuration. A setting an older ``run.json`` predates reads as its
    #: default; one this KSI does not know is left out.
    config: RunConfig = attrs.field(factory=_no_config)
    #: Task id -> fingerprint (what a resume must find unchanged).
    tasks: dict[str, str] = attrs.field(factory=dict)
    task_ids: list[str] = attrs.field(factory=list)
    sessions: tuple[Session, ...] = ()
    run_complete: bool = False
    #: Why the last session stopped before the run was complete ("" otherwise).
    stopped_reason: str = ""
    #: ksi, Python and the versions of the plugins the run used.
    versions: dict[str, Any] = attrs.field(factory=dict)
    #: The tasks file's sha256 and the git commits of its checkout and of KSI's (the
    #: latest session's; :mod:`ksi.provenance`).
    provenance: Provenance = attrs.field(factory=Provenance)

    def started_session(self) -> RunState:
        """This state with a new session going (a run is never complete while one goes)."""
        return attrs.evolve(
            self,
            sessions=(*self.sessions, Session(started_at=now())),
            run_complete=False,
            stopped_reason="",
        )

    def finished_session(self, *, complete: bool, stopped_reason: str) -> RunState:
        last = attrs.evolve(self.sessions[-1], finished_at=now())
        return attrs.evolve(
            self,
            sessions=(*self.sessions[:-1], last),
            run_complete=complete,
            stopped_reason="" if complete else stopped_reason,
        )

    def wall_time_sec(self) -> float | None:
        """Time spent in finished sessions; None while the last one has not finished."""
        if not self.sessions or not self.sessions[-1].finished_at:
            return None
        return sum(s.wall_time_sec() for s in self.sessions)


def load_run_state(layout: RunLayout) -> RunState:
    """The run's ``run.json``; a clear error when there is none or it cannot be read."""
    data = layout.read_run_json()
    try:
        state = _strict.structure(data, RunState)
    except Exception as exc:  # cattrs' structuring errors
        raise UserInputError(
            f"{layout.run_json}: not a valid run.json: {_why(exc)}; restore it (the value "
            "`ksi run` wrote) or start a new --run-dir"
        ) from exc
    problems = state.config.problems()
    if problems:
        raise UserInputError(
            f"{layout.run_json}: not a valid run.json: "
            + "; ".join(f"config.{p}" for p in problems)
            + "; restore it (the value `ksi run` wrote) or start a new --run-dir"
        )
    return state


_strict = strict_converter()


def _why(exc: Exception) -> str:
    """Which fields of ``run.json`` could not be read (``$.config.attempts``), and why
    (``got '3' (a string); expected int``)."""
    return "; ".join(_with_flag(p) for p in validation_problems(exc))


def _with_flag(problem: str) -> str:
    """``problem`` with the flag that sets the setting it names (``$.config.attempts
    (--attempts)``): the flag is what a person who edits run.json knows it by."""
    _, _, name = problem.rpartition(" @ $.config.")
    field = getattr(attrs.fields(RunConfig), name, None) if name.isidentifier() else None
    flag = option_of(field).flag if field is not None else ""
    return f"{problem} ({flag})" if flag else problem


def save_run_state(layout: RunLayout, state: RunState) -> None:
    """Write ``run.json`` atomically and durably."""
    write_json_atomic(layout.run_json, to_data(state))

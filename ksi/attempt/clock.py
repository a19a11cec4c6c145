"""Where one attempt is, and how long each of its phases took.

The steps of an attempt (seeding, the agent, capture, grading) run in
different objects; they share one clock, so an error record names the step
that failed ("while grading...") and the timings add up the same way
whichever object ran a phase.
"""

from __future__ import annotations

import time

import attrs

from ksi.records import Timings


@attrs.define
class AttemptClock:
    #: The step running now, named in an error record ("while grading...").
    step: str = "seeding the workspace"
    #: Seconds per phase (``seed``, ``agent``, ``capture``, ``eval``), summed over rounds.
    times: dict[str, float] = attrs.field(factory=dict)
    started: float = attrs.field(factory=time.monotonic)

    def add_time(self, phase: str, started: float) -> None:
        """Add the time since ``started`` (a ``time.monotonic()``) to ``phase``."""
        self.times[phase] = self.times.get(phase, 0.0) + time.monotonic() - started

    def timings(self) -> Timings:
        return Timings(**self.times, total=time.monotonic() - self.started)

"""The built-in observer that keeps ``--output-json`` up to date as a run goes.

It is an ordinary plugin on the lifecycle hooks, so a third-party plugin can
stream results elsewhere the same way. Writes are atomic and throttled (the
report is rebuilt from the journal, which costs O(records)); the final write
happens at ``ksi_run_finished`` with ``run_complete`` set.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ksi.hookspecs import hookimpl
from ksi.records import AttemptRecord, RunInfo, RunSummary
from ksi.serialization import write_json_atomic

#: Minimum seconds between two rewrites while a run is going.
REFRESH_INTERVAL_SEC = 2.0

_lock = threading.Lock()
_last_write: dict[str, float] = {}


def _write(run: RunInfo) -> None:
    target = run.config.output_json
    if not target:
        return
    # start-up: listing components imports this module; this only when used
    from ksi.reporting.report import build_report

    with _lock:
        write_json_atomic(Path(target), build_report(run.run_dir))
        _last_write[run.run_id] = time.monotonic()


@hookimpl(trylast=True)
def ksi_run_started(run: RunInfo) -> None:
    _write(run)


@hookimpl(trylast=True)
def ksi_attempt_finished(run: RunInfo, record: AttemptRecord) -> None:
    if time.monotonic() - _last_write.get(run.run_id, 0.0) >= REFRESH_INTERVAL_SEC:
        _write(run)


@hookimpl(trylast=True)
def ksi_run_finished(run: RunInfo, summary: RunSummary) -> None:
    _write(run)

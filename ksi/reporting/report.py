"""The machine-readable report of a run (``--output-json``, ``ksi report --json``).

Built from ``run.json`` and the journal only, so the report of a killed run
is as trustworthy as that of a finished one (``run_complete`` tells which).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from ksi.layout import RunLayout
from ksi.reporting.summary import summarize_run
from ksi.rundir.run_state import load_run_state
from ksi.serialization import to_data


def build_report(
    run_dir: Path, *, solved_threshold: float | None = None, control: Path | None = None
) -> dict[str, Any]:
    layout = RunLayout(Path(run_dir).resolve())
    summary = summarize_run(layout.root, solved_threshold=solved_threshold, control=control)
    state = load_run_state(layout)
    data = to_data(summary)
    records = data.pop("records")
    return {
        "run_id": state.run_id or None,
        "run_dir": str(layout.root),
        "run_complete": summary.run_complete,
        "stopped_reason": summary.stopped_reason,
        "config": to_data(state.config),
        "versions": state.versions or {"python": platform.python_version()},
        "sessions": to_data(state.sessions),
        "summary": data,
        "attempts": records,
    }

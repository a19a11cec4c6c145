"""The machine-readable report of a run (``--output-json``, ``ksi report --json``).

Built from ``run.json`` and the journal only, so the report of a killed run
is as trustworthy as that of a finished one (``run_complete`` tells which).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from ksi.runner.engine import summarize_run
from ksi.runner.layout import RunLayout
from ksi.serialization import to_data


def build_report(run_dir: Path, *, solved_threshold: float | None = None) -> dict[str, Any]:
    layout = RunLayout(Path(run_dir).resolve())
    summary = summarize_run(layout.root, solved_threshold=solved_threshold)
    stored = layout.read_run_json()
    data = to_data(summary)
    records = data.pop("records")
    return {
        "run_id": stored.get("run_id"),
        "run_dir": str(layout.root),
        "run_complete": summary.run_complete,
        "stopped_reason": summary.stopped_reason,
        "config": stored.get("config", {}),
        "versions": stored.get("versions", {"python": platform.python_version()}),
        "sessions": stored.get("sessions", []),
        "summary": data,
        "attempts": records,
    }

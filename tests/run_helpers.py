"""Helpers for tests that drive real runs: tasks files, journals, processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def env_without_ksi_settings(**extra: str) -> dict[str, str]:
    """os.environ without the KSI_* defaults a developer may have set, plus ``extra``.

    ``KSI_CACHE_DIR`` stays: each test has its own (conftest), never the user's.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("KSI_") or k == "KSI_CACHE_DIR"}
    return {**env, **extra}


def write_tasks(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def journal_lines(run_dir: Path) -> list[dict[str, Any]]:
    journal = run_dir / "journal.jsonl"
    if not journal.exists():
        return []
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def ksi(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real ``ksi`` command line in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pids_with_marker(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def wait_for_agents(marker: str, count: int, timeout: float = 30) -> None:
    """Wait until ``count`` live processes carry ``marker`` (agents started)."""
    deadline = time.monotonic() + timeout
    while len(pids_with_marker(marker)) < count:
        assert time.monotonic() < deadline, f"{count} agents with {marker} never started"
        time.sleep(0.05)


def wait_for_no_agents(marker: str, timeout: float = 10) -> list[int]:
    """Wait (up to ``timeout``) until no process carries ``marker``; return any left."""
    deadline = time.monotonic() + timeout
    while pids_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids_with_marker(marker)


def table_price(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> float:
    """What ``genai-prices`` says the tokens cost (KSI's uncached ``input_tokens``)."""
    import genai_prices  # a test extra; only the pricing tests need it

    usage = genai_prices.Usage(
        input_tokens=input_tokens + cache_read_tokens + cache_write_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
    )
    return float(genai_prices.calc_price(usage, model).total_price)

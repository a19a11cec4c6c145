"""Costs of agents that report tokens only: priced from the ``genai-prices`` table.

The agent here is a plugin that reports what it prints (``TOKENS=...``,
``COST=...``), as a CLI's parser would; ``tests/test_real_cli_gemini_cli.py``
and ``tests/test_real_cli_codex.py`` do the same with the real CLIs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import genai_prices
import pytest

import ksi
from tests.run_helpers import env_without_ksi_settings, journal_lines, table_price, write_tasks
from tests.run_helpers import ksi as ksi_cli

AGENT = f"{Path(__file__).parent / 'fixtures' / 'pricing' / 'token_agent.py'}:TokenAgent"
TABLE = f"genai-prices {genai_prices.__version__}"
MODEL = "gpt-4o-mini"


def tasks(path: Path, n: int = 1) -> Path:
    return write_tasks(
        path / "tasks.jsonl",
        [
            {"task_id": f"t{i}", "prompt": "Do nothing.", "eval": {"command": "true"}}
            for i in range(1, n + 1)
        ],
    )


def run(tmp_path: Path, printed: str, **options: Any) -> Any:
    return ksi.run(
        tasks(tmp_path, options.pop("n", 1)),
        agent=AGENT,
        agent_options={"cmd": f"echo {printed}"},
        run_dir=tmp_path / "run",
        **options,
    )


def test_tokens_without_a_cost_are_priced_and_the_record_says_estimated(tmp_path: Path) -> None:
    summary = run(tmp_path, "TOKENS=20000,3000,50000,0", model=MODEL)
    [rec] = journal_lines(tmp_path / "run")
    usage = rec["usage"]
    assert usage["cost_usd"] == pytest.approx(
        table_price(MODEL, input_tokens=20000, output_tokens=3000, cache_read_tokens=50000)
    )
    assert usage["cost_estimated"] is True and usage["price_table"] == TABLE
    assert summary.total_cost_usd == pytest.approx(usage["cost_usd"])
    assert summary.estimated_cost_usd == summary.total_cost_usd
    assert summary.price_tables == (TABLE,)
    printed = ksi_cli("report", str(tmp_path / "run")).stdout
    assert f"of it estimated from {TABLE}" in printed


def test_a_cost_the_agent_reported_always_wins(tmp_path: Path) -> None:
    summary = run(tmp_path, "TOKENS=20000,3000,0,0 COST=0.5", model=MODEL)
    [rec] = journal_lines(tmp_path / "run")
    assert rec["usage"]["cost_usd"] == 0.5
    assert rec["usage"]["cost_estimated"] is False and rec["usage"]["price_table"] == ""
    assert summary.total_cost_usd == 0.5 and summary.estimated_cost_usd is None
    assert "estimated" not in ksi_cli("report", str(tmp_path / "run")).stdout


@pytest.mark.parametrize(
    ("model", "printed"),
    [
        ("mock-model", "TOKENS=20000,3000,0,0"),  # a model the table does not know
        (None, "TOKENS=20000,3000,0,0"),  # no --model: which model ran is unknown
        (MODEL, "nothing"),  # no tokens
    ],
)
def test_nothing_is_estimated_without_a_known_model_or_tokens(
    tmp_path: Path, model: str | None, printed: str
) -> None:
    summary = run(tmp_path, printed, model=model)
    [rec] = journal_lines(tmp_path / "run")
    assert rec["usage"]["cost_usd"] is None and rec["usage"]["cost_estimated"] is False
    assert summary.total_cost_usd is None


def test_max_cost_stops_a_run_of_an_agent_that_reports_tokens_only(tmp_path: Path) -> None:
    # About $0.0045 an attempt at gpt-4o-mini's price: the first passes $0.001.
    summary = run(
        tmp_path, "TOKENS=20000,2500,0,0", model=MODEL, n=3, concurrency=1, max_cost_usd=0.001
    )
    assert len(journal_lines(tmp_path / "run")) == 1
    assert not summary.run_complete and "max_cost" in summary.stopped_reason


def test_without_the_price_table_the_cost_stays_unknown(tmp_path: Path) -> None:
    # As if genai-prices were not installed (KSI's core does not need it).
    blocked = "import sys; sys.modules['genai_prices'] = None; from ksi.cli import main; main()"
    result = ksi_cli_python(
        blocked,
        "run", str(tasks(tmp_path)), "--agent", AGENT, "--model", MODEL,
        "--agent-option", "cmd=echo TOKENS=20000,3000,0,0", "--run-dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [rec] = journal_lines(tmp_path / "run")
    assert rec["usage"]["input_tokens"] == 20000 and rec["usage"]["cost_usd"] is None


def ksi_cli_python(code: str, *args: str) -> Any:
    """``ksi`` in a subprocess that first runs ``code`` (``sys.argv`` holds ``args``)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env_without_ksi_settings(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_old_records_without_the_new_fields_still_read(tmp_path: Path) -> None:
    run(tmp_path, "TOKENS=20000,3000,0,0", model=MODEL)
    journal = tmp_path / "run" / "journal.jsonl"
    old = []
    for line in journal.read_text().splitlines():
        rec = json.loads(line)
        for key in ("cost_estimated", "price_table"):
            del rec["usage"][key]
        old.append(json.dumps(rec))
    journal.write_text("\n".join(old) + "\n")
    result = ksi_cli("report", str(tmp_path / "run"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["summary"]["total_cost_usd"] == pytest.approx(
        table_price(MODEL, input_tokens=20000, output_tokens=3000)
    )

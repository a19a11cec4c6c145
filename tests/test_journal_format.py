"""Journals written before records were typed still read, and records still write the same JSON."""

from __future__ import annotations

import json
from pathlib import Path

from ksi.models import EvalResult, Usage
from ksi.reporting.summary import summarize
from ksi.rundir.journal import read_records
from ksi.serialization import dumps_line

#: A record exactly as KSI wrote it when ``eval`` and ``usage`` were dicts.
SCORED_LINE = (
    '{"task_id":"hello","attempt":1,"status":"scored","score":1.0,"agent":"command","evaluato'
    'r":"command","environment":"local","try_number":0,"model":null,"agent_status":"completed'
    '","agent_exit_code":0,"agent_timed_out":false,"eval":{"status":"scored","native_score":1'
    '.0,"resolved":true,"exit_code":0,"stdout_tail":"","stderr_tail":"","eval_workdir":"/runs'
    '/demo/attempts/hello/1/eval/repo","duration_sec":0.0031475650000629685,"notes":[],"detai'
    'ls":{"command":"grep -q hi hello.txt","timeout_sec":30.0,"stdout_log":"/runs/demo/attemp'
    'ts/hello/1/eval/eval.stdout.log","stderr_log":"/runs/demo/attempts/hello/1/eval/eval.std'
    'err.log","output_truncated":false,"stragglers_killed":0,"score_source":"exit_code"}},"ti'
    'mings":{"seed":0.030591697999966527,"agent":0.07014054100000067,"capture":0.001175156000'
    '044808,"eval":0.0042126269999016586,"total":0.10677880000002915},"usage":{"input_tokens"'
    ':0,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":null,"turns'
    '":null},"final_message":"msg\\n","skipped_files":[],"log_truncated":false,"error":"","att'
    'empt_dir":"attempts/hello/1","started_at":"2026-01-02T03:04:05.832+00:00","finished_at":'
    '"2026-01-02T03:04:05.939+00:00","retryable":false,"regraded_at":""}'
)
#: An ``error`` record of that time: no eval, and an empty usage dict.
ERROR_LINE = (
    '{"task_id":"broken","attempt":1,"status":"error","score":null,"agent":"command",'
    '"evaluator":"command","environment":"sandbox","try_number":0,"model":null,'
    '"agent_status":"completed","agent_exit_code":null,"agent_timed_out":false,"eval":null,'
    '"timings":{"seed":0.01,"agent":0.0,"capture":0.0,"eval":0.0,"total":0.02},"usage":{},'
    '"final_message":"","skipped_files":[],"log_truncated":false,'
    '"error":"EnvironmentFailure: bwrap missing","attempt_dir":"attempts/broken/1",'
    '"started_at":"2026-01-02T03:04:05.000+00:00","finished_at":"2026-01-02T03:04:05.020+00:00",'
    '"retryable":true,"regraded_at":""}'
)


def test_an_old_journal_reads_as_typed_records(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text(SCORED_LINE + "\n" + ERROR_LINE + "\n")
    scored, error = read_records(journal)
    assert isinstance(scored.eval, EvalResult)
    assert scored.eval.status == "scored" and scored.eval.native_score == 1.0
    assert scored.eval.details["score_source"] == "exit_code"
    assert scored.usage == Usage()
    assert error.eval is None and error.usage == Usage() and error.retryable
    summary = summarize(
        [scored, error],
        run_id="r",
        run_dir=str(tmp_path),
        task_ids=["hello", "broken"],
        attempts_per_task=1,
        solved_threshold=1.0,
    )
    assert summary.solved_tasks == 1 and summary.error_attempts == 1
    assert summary.total_cost_usd is None


def test_a_record_is_journalled_as_the_same_json_as_before(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text(SCORED_LINE + "\n")
    (record,) = read_records(journal)
    written = dumps_line(record)
    # Fields added since that line was written (error_kind, skipped_counts, repo_changed,
    # generation with the notes it got, rounds, whether the cost is an estimate and from
    # which price table) are the only difference.
    old = json.loads(SCORED_LINE)
    assert json.loads(written) == {
        **old,
        "usage": {**old["usage"], "cost_estimated": False, "price_table": ""},
        "error_kind": "",
        "skipped_counts": {},
        "repo_changed": None,
        "generation": 1,
        "knowledge": None,
        "rounds": [],
    }
    old_eval = SCORED_LINE[SCORED_LINE.index('"eval":') : SCORED_LINE.index(',"timings"')]
    assert old_eval in written, "the eval dict keeps resolved, key order and all"

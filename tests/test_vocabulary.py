"""The words records and options use: the enums are the source, journals keep the words,
and the docs list exactly the words there are."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ksi.attempt.execute import AGENT_INFRA_STATUSES
from ksi.eval.command import CommandEvaluator
from ksi.models import AgentStatus, EvalResult, EvalStatus, TaskSpec
from ksi.records import AttemptRecord, AttemptStatus, ErrorKind
from ksi.rundir.journal import journal_warnings, read_records
from ksi.serialization import dumps_line
from ksi.view.verdict import verdict

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _line(**fields: object) -> str:
    base: dict[str, object] = {
        "task_id": "t",
        "attempt": 1,
        "status": "scored",
        "score": 1.0,
        "agent": "command",
        "evaluator": "command",
        "environment": "local",
    }
    return json.dumps({**base, **fields}, separators=(",", ":"))


def _roundtrip(tmp_path: Path, lines: list[str]) -> list[AttemptRecord]:
    journal = tmp_path / "journal.jsonl"
    journal.write_text("".join(f"{line}\n" for line in lines))
    return read_records(journal)


@pytest.mark.parametrize("status", [s.value for s in AttemptStatus])
@pytest.mark.parametrize("kind", [k.value for k in ErrorKind])
def test_every_status_and_error_kind_is_read_and_written_as_the_same_word(
    tmp_path: Path, status: str, kind: str
) -> None:
    (record,) = _roundtrip(tmp_path, [_line(status=status, error_kind=kind)])
    assert record.status is AttemptStatus(status) and record.error_kind is ErrorKind(kind)
    written = json.loads(dumps_line(record))
    assert (written["status"], written["error_kind"]) == (status, kind)


def test_a_plugins_own_agent_and_eval_words_are_kept_as_written(tmp_path: Path) -> None:
    eval_dict = EvalResult("no_reward", None).as_dict()
    line = _line(status="unscored", score=None, agent_status="gave_up", eval=eval_dict)
    (record,) = _roundtrip(tmp_path, [line])
    assert record.agent_status == "gave_up" and record.eval is not None
    assert record.eval.status == "no_reward"
    written = json.loads(dumps_line(record))
    assert (written["agent_status"], written["eval"]["status"]) == ("gave_up", "no_reward")


def test_a_status_this_ksi_does_not_know_is_a_damaged_line_never_a_guess(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text(_line(attempt=1) + "\n" + _line(attempt=2, status="cancelled") + "\n")
    assert [r.attempt for r in read_records(journal)] == [1]
    (warning,) = journal_warnings(journal)
    assert "line 2" in warning


def test_records_built_from_words_hold_the_members() -> None:
    record = AttemptRecord(
        task_id="t",
        attempt=1,
        status="agent_error",
        score=None,
        agent="a",
        evaluator="e",
        environment="local",
        error_kind="worker_lost",
    )
    assert record.status is AttemptStatus.AGENT_ERROR and record.status.is_error
    assert record.error_kind is ErrorKind.WORKER_LOST
    with pytest.raises(ValueError, match="cancelled"):
        AttemptRecord(
            task_id="t", attempt=1, status="cancelled", score=None, agent="a", evaluator="e",
            environment="local",
        )  # fmt: skip


def test_the_original_evaluate_dict_prints_plain_words(tmp_path: Path) -> None:
    task = TaskSpec(id="t", metadata={"eval_command": "true"})
    out = CommandEvaluator().evaluate(
        task=task, model_output="", runtime_meta={"host_workspace_repo_dir": str(tmp_path)}
    )
    assert "'status': 'evaluated'" in repr(out)
    assert "'isolation': 'none'" in repr(out["details"])


@pytest.mark.parametrize("status", [s for s in EvalStatus if s is not EvalStatus.SCORED])
def test_every_unscored_eval_status_of_ksi_is_told_in_words(status: EvalStatus) -> None:
    record = AttemptRecord(
        task_id="t",
        attempt=1,
        status=AttemptStatus.UNSCORED,
        score=None,
        agent="a",
        evaluator="command",
        environment="local",
        eval=EvalResult(status.value, None),
    )
    (why, *_) = verdict(record).reasons
    assert "eval status" not in why and status.value not in why


# -- the docs list exactly the words there are -------------------------------------------


def _table_words(text: str, heading: str) -> list[str]:
    """The first-column words of the first table under ``heading`` (its body rows)."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start + 2 :]:  # after the header and the |---| line
        if not line.startswith("|"):
            break
        table.append(re.match(r"\| `([a-z_]+)` \|", line))
    return [m.group(1) for m in table if m]


def test_running_md_lists_every_attempt_status_and_error_kind() -> None:
    text = (DOCS / "running.md").read_text()
    assert _table_words(text, "### Statuses") == [s.value for s in AttemptStatus]
    (row,) = [line for line in text.splitlines() if line.startswith("| `error_kind` |")]
    named = set(re.findall(r"`([a-z_]+)`", row)) - {"error_kind", "error"}
    assert named == {k.value for k in ErrorKind if k}
    (agent_error,) = [line for line in text.splitlines() if line.startswith("| `agent_error` |")]
    not_graded = agent_error.split("the attempt is not graded")[0]
    assert set(re.findall(r"`([a-z_]+)`", not_graded)) - {"agent_error", "agent_status"} == set(
        AGENT_INFRA_STATUSES
    )


def test_evaluators_md_lists_every_unscored_status_of_ksi() -> None:
    text = (DOCS / "evaluators.md").read_text()
    words = _table_words(text, "### Unscored attempts")
    assert sorted(words) == sorted(s.value for s in EvalStatus if s is not EvalStatus.SCORED)


def test_agents_md_names_every_agent_status_and_no_other() -> None:
    text = (DOCS / "agents.md").read_text()
    section = text.split("* **Status** of the attempt", 1)[1].split("\n## ", 1)[0]
    table = re.findall(r"^\s*\| `([a-z_]+)` \|", section, re.M)
    assert set(table) <= {s.value for s in AgentStatus}
    named = set(re.findall(r"`([a-z_]+)`", section))
    assert {s.value for s in AgentStatus} <= named

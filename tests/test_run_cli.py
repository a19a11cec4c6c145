"""``ksi run``/``report``/``regrade``/``check`` as a user types them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.run_helpers import journal_lines, ksi, write_tasks

ROOT = Path(__file__).resolve().parent.parent


def test_demo_oracle_solves_every_bundled_example(tmp_path: Path) -> None:
    result = ksi(
        "run",
        str(ROOT / "examples" / "tasks.jsonl"),
        "--agent",
        "oracle",
        "--run-dir",
        str(tmp_path / "demo"),
    )
    assert result.returncode == 0, result.stderr
    n = len((ROOT / "examples" / "tasks.jsonl").read_text().strip().splitlines())
    assert f"solved: {n}/{n}" in result.stdout
    nop = ksi(
        "run",
        str(ROOT / "examples" / "tasks.jsonl"),
        "--agent",
        "nop",
        "--run-dir",
        str(tmp_path / "nop"),
    )
    assert f"solved: 0/{n}" in nop.stdout


def test_invalid_tasks_file_exits_2_and_creates_no_run(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "a", "prompt": "p", "eval": {"timeout_sec": "fast"}}\n')
    result = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert "tasks.jsonl:line 1" in result.stderr and "timeout_sec" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_unknown_agent_suggests_the_closest(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "a", "prompt": "p"}])
    result = ksi("run", str(tasks), "--agent", "oracel", "--run-dir", str(tmp_path / "r"))
    assert result.returncode == 2
    assert "did you mean 'oracle'" in result.stderr


def test_unknown_agent_option_lists_valid_ones(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "a", "prompt": "p"}])
    result = ksi(
        "run",
        str(tasks),
        "--agent",
        "command",
        "--agent-option",
        "cmdd=true",
        "--run-dir",
        str(tmp_path / "r"),
    )
    assert result.returncode == 2
    assert "cmdd" in result.stderr and "cmd" in result.stderr


def test_executor_options_reach_the_executor_and_a_wrong_one_exits_2(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "a", "prompt": "p"}])
    result = ksi(
        "run",
        str(tasks),
        "--agent",
        "nop",
        "--executor-option",
        "adress=auto",
        "--run-dir",
        str(tmp_path / "r"),
    )
    assert result.returncode == 2
    assert "--executor-option" in result.stderr and "adress" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "r").exists()


def test_oracle_without_solution_fails_before_the_run(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "nosol", "prompt": "p"}])
    result = ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(tmp_path / "r"))
    assert result.returncode == 2
    assert "nosol" in result.stderr and "solution" in result.stderr
    assert not (tmp_path / "r").exists()


def test_wipe_flag_accepts_spec_spellings_and_rejects_others(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "a", "prompt": "p"}])
    ok = ksi(
        "run",
        str(tasks),
        "--agent",
        "nop",
        "--wipe-workspace-per-task",
        "no",
        "--run-dir",
        str(tmp_path / "r"),
    )
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "r" / "attempts" / "a" / "1" / "workspace" / "repo").is_dir()
    bad = ksi(
        "run",
        str(tasks),
        "--agent",
        "nop",
        "--wipe-workspace-per-task",
        "maybe",
        "--run-dir",
        str(tmp_path / "r2"),
    )
    assert bad.returncode == 2 and "--wipe-workspace-per-task" in bad.stderr


def test_report_reprints_the_summary_from_the_journal(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {"task_id": "a", "prompt": "p", "eval": {"command": "true"}},
            {"task_id": "b", "prompt": "p", "eval": {"command": "false"}},
        ],
    )
    run = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(tmp_path / "r"))
    assert run.returncode == 0
    report = ksi("report", str(tmp_path / "r"))
    assert report.returncode == 0
    assert "solved: 1/2" in report.stdout
    as_json = json.loads(ksi("report", str(tmp_path / "r"), "--json").stdout)
    assert as_json["summary"]["solved_tasks"] == 1
    assert len(as_json["attempts"]) == 2
    missing = ksi("report", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "not a KSI run directory" in missing.stderr


def test_regrade_grades_captured_repos_again(tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {"task_id": "a", "prompt": "p", "eval": {"command": f"test -f {flag} && test -f x"}},
        ],
    )
    run = ksi(
        "run",
        str(tasks),
        "--agent",
        "command",
        "--agent-option",
        "cmd=touch repo/x",
        "--run-dir",
        str(tmp_path / "r"),
    )
    assert "solved: 0/1" in run.stdout
    flag.touch()
    regrade = ksi("regrade", str(tmp_path / "r"))
    assert regrade.returncode == 0, regrade.stderr
    assert "solved: 1/1" in regrade.stdout
    records = journal_lines(tmp_path / "r")
    assert len(records) == 2 and records[-1]["regraded_at"]
    assert "solved: 1/1" in ksi("report", str(tmp_path / "r")).stdout


def test_regrade_names_the_attempts_whose_task_left_the_tasks_file(tmp_path: Path) -> None:
    """Fewer attempts regraded than the run has is said, with the tasks it concerns."""
    ids = ["keep", "gone-1", "gone-2"]
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": t, "prompt": "p"} for t in ids])
    run = ksi(
        "run", str(tasks), "--agent", "nop", "--attempts", "2", "--run-dir", str(tmp_path / "r")
    )
    assert run.returncode == 0, run.stderr
    write_tasks(tasks, [{"task_id": "keep", "prompt": "p"}])
    regrade = ksi("regrade", str(tmp_path / "r"))
    assert regrade.returncode == 0, regrade.stderr
    regraded = [r["task_id"] for r in journal_lines(tmp_path / "r") if r.get("regraded_at")]
    assert regraded == ["keep", "keep"]
    assert "4 attempt(s) of 2 task(s) not regraded" in regrade.stderr
    assert "gone-1, gone-2" in regrade.stderr and str(tasks) in regrade.stderr


def test_check_lists_broken_tasks(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {
                "task_id": "good",
                "prompt": "p",
                "eval": {"command": "test -f done"},
                "solution": {"command": "touch done"},
            },
            {
                "task_id": "unsolvable",
                "prompt": "p",
                "eval": {"command": "test -f done"},
                "solution": {"command": "touch other"},
            },
            {
                "task_id": "free",
                "prompt": "p",
                "eval": {"command": "true"},
                "solution": {"command": "true"},
            },
        ],
    )
    result = ksi("check", str(tasks), "--run-dir", str(tmp_path / "check"))
    assert result.returncode == 1
    assert "BROKEN unsolvable: unsolvable by its own solution" in result.stdout
    assert "BROKEN free: passes with no work" in result.stdout
    assert "good" not in result.stdout.split("BROKEN")[-1].split("\n")[0]
    assert "1/3 tasks OK, 2 broken" in result.stdout


def test_report_json_honours_the_threshold(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        [
            {
                "task_id": "half",
                "prompt": "p",
                "eval": {"command": "echo '{\"score\": 0.5}' > score.json"},
            },
        ],
    )
    assert (
        ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(tmp_path / "r")).returncode == 0
    )
    strict = json.loads(ksi("report", str(tmp_path / "r"), "--json").stdout)
    lenient = json.loads(
        ksi("report", str(tmp_path / "r"), "--json", "--solved-threshold", "0.5").stdout
    )
    assert strict["summary"]["solved_tasks"] == 0
    assert lenient["summary"]["solved_tasks"] == 1


AGENT_FILE = """
from typing import ClassVar

import attrs

from ksi.interfaces import AgentOutcome, Invocation


@attrs.define
class WriteAnswer:
    name: ClassVar[str] = "write-answer"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "writes the answer it is given"
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()
    answer: str = "42"

    def check_tasks(self, tasks):
        return []

    def setup(self, ctx):
        pass

    def invocation(self, ctx):
        return Invocation(argv=("sh", "-c", f"echo {self.answer} > repo/answer.txt"))

    def outcome(self, ctx, result):
        return AgentOutcome()
"""

EVAL_FILE = """
from pathlib import Path
from typing import ClassVar

from ksi.models import EvalResult


class Grader:
    name: ClassVar[str] = "answer-grader"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "1.0 when answer.txt says 42"
    grades_in: ClassVar[str] = "host"

    def grade(self, task, workdir, *, env=None, log_dir=None):
        text = (Path(workdir) / "answer.txt").read_text().strip()
        return EvalResult(status="scored", native_score=1.0 if text == "42" else 0.0)
"""


def test_unpackaged_agent_and_evaluator_by_file_reference(tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text(AGENT_FILE)
    (tmp_path / "my_eval.py").write_text(EVAL_FILE)
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "q", "prompt": "answer"}])
    args = [
        "run",
        str(tasks),
        "--agent",
        "./my_agent.py:WriteAnswer",
        "--evaluator",
        "./my_eval.py:Grader",
    ]
    good = ksi(*args, "--run-dir", str(tmp_path / "good"), cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "solved: 1/1" in good.stdout
    wrong = ksi(
        *args, "--agent-option", "answer=41", "--run-dir", str(tmp_path / "bad"), cwd=tmp_path
    )
    assert "solved: 0/1" in wrong.stdout
    missing = ksi(
        "run", str(tasks), "--agent", "./nope.py:X", "--run-dir", str(tmp_path / "x"), cwd=tmp_path
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_agent_env_that_is_not_set_fails_before_the_run(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", [{"task_id": "a", "prompt": "p"}])
    result = ksi(
        "run",
        str(tasks),
        "--agent",
        "nop",
        "--agent-env",
        "KSI_TEST_SURELY_UNSET",
        "--run-dir",
        str(tmp_path / "r"),
        env={"KSI_TEST_SURELY_UNSET": ""},
    )
    assert result.returncode == 0, "set (even empty) is passed on"
    unset = ksi(
        "run",
        str(tasks),
        "--agent",
        "nop",
        "--agent-env",
        "KSI_TEST_NOT_THERE_X",
        "--run-dir",
        str(tmp_path / "r2"),
    )
    assert unset.returncode == 2
    assert "--agent-env KSI_TEST_NOT_THERE_X" in unset.stderr
    assert not (tmp_path / "r2").exists()

"""The attempt lifecycle on real files and processes, through ``ksi.run`` and ``ksi run``."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest

import ksi
from ksi.errors import UserInputError
from ksi.hookspecs import hookimpl
from ksi.interfaces import AgentContext, AgentOutcome, ExecResult, Invocation, Usage
from ksi.plugins import register_plugin
from ksi.records import AttemptRecord, RunInfo, RunSummary
from tests.run_helpers import journal_lines, pids_with_marker, write_tasks

HELLO_TASK = {
    "task_id": "hello",
    "prompt": "Create hello.txt containing hi.",
    "files": {"README.md": "start\n", "test_hello.sh": "grep -q hi hello.txt\n"},
    "eval": {"command": "sh test_hello.sh", "timeout_sec": 30},
    "solution": {"command": "echo hi > hello.txt"},
}


def run_cmd_agent(tmp_path: Path, records: list[dict[str, Any]], cmd: str, **kw: Any) -> Any:
    tasks = write_tasks(tmp_path / "tasks.jsonl", records)
    return ksi.run(
        tasks,
        agent="command",
        agent_options={"cmd": cmd},
        run_dir=tmp_path / "run",
        **kw,
    )


def test_attempt_directory_keeps_everything(tmp_path: Path) -> None:
    summary = run_cmd_agent(
        tmp_path, [HELLO_TASK], "cat > got_stdin.txt; echo hi > repo/hello.txt; echo done"
    )
    assert summary.solved_tasks == 1
    attempt = tmp_path / "run" / "attempts" / "hello" / "1"
    prompt = (attempt / "prompt.md").read_text()
    assert prompt.startswith("Create hello.txt containing hi.")
    assert "repo/" in prompt
    assert (attempt / "agent.stdout.log").read_text().strip() == "done"
    assert (attempt / "captured" / "repo" / "hello.txt").read_text() == "hi\n"
    assert (attempt / "captured" / "repo" / "README.md").read_text() == "start\n"
    assert "+hi" in (attempt / "diff.patch").read_text()
    assert not (attempt / "workspace").exists(), "the live workspace is wiped by default"
    record = json.loads((attempt / "record.json").read_text())
    assert record["status"] == "scored" and record["score"] == 1.0
    assert record["agent_exit_code"] == 0 and record["agent_timed_out"] is False
    assert set(record["timings"]) >= {"seed", "agent", "capture", "eval", "total"}
    assert record["eval"]["exit_code"] == 0
    assert journal_lines(tmp_path / "run") == [record]


def test_prompt_reaches_agent_on_stdin_env_and_file(tmp_path: Path) -> None:
    cmd = (
        'cat > repo/stdin.txt; printf %s "$KSI_PROMPT" > repo/env.txt; '
        'cp "$KSI_PROMPT_FILE" repo/file.txt; '
        'echo "$KSI_TASK_ID $KSI_ATTEMPT" > repo/ids.txt; '
        'test "$KSI_REPO" = "$KSI_WORKSPACE/repo" && test "$PWD" = "$KSI_WORKSPACE" '
        "&& touch repo/paths_ok"
    )
    run_cmd_agent(tmp_path, [HELLO_TASK], cmd)
    repo = tmp_path / "run" / "attempts" / "hello" / "1" / "captured" / "repo"
    prompt = (tmp_path / "run" / "attempts" / "hello" / "1" / "prompt.md").read_text()
    assert (repo / "stdin.txt").read_text() == prompt
    assert (repo / "env.txt").read_text() == prompt
    assert (repo / "file.txt").read_text() == prompt
    assert (repo / "ids.txt").read_text().split() == ["hello", "1"]
    assert (repo / "paths_ok").exists()


def test_agent_timeout_kills_double_forked_children_and_still_grades(tmp_path: Path) -> None:
    marker = f"ksi-marker-{uuid.uuid4().hex}"
    cmd = (
        f"(setsid sh -c 'sleep 1000; echo {marker}' &) ; "
        f"sh -c 'sleep 1000 # {marker}' & echo hi > repo/hello.txt; sleep 1000"
    )
    summary = run_cmd_agent(tmp_path, [HELLO_TASK], cmd, timeout_sec=1.0)
    rec = summary.records[0]
    assert rec.agent_timed_out is True
    assert rec.agent_status == "timeout"
    assert rec.score == 1.0, "work done before the timeout is graded"
    assert pids_with_marker(marker) == []


def test_wipe_false_grades_live_workspace_and_keeps_it(tmp_path: Path) -> None:
    task = dict(HELLO_TASK, eval={"command": "pwd > where.txt; sh test_hello.sh"})
    summary = run_cmd_agent(tmp_path, [task], "echo hi > repo/hello.txt", wipe_workspace=False)
    live = tmp_path / "run" / "attempts" / "hello" / "1" / "workspace" / "repo"
    assert summary.records[0].score == 1.0
    assert (live / "where.txt").read_text().strip() == str(live)
    assert summary.records[0].eval.eval_workdir == str(live)


def test_edited_test_file_is_restored_before_grading(tmp_path: Path) -> None:
    summary = run_cmd_agent(tmp_path, [HELLO_TASK], "echo 'exit 0' > repo/test_hello.sh")
    assert summary.records[0].score == 0.0, "the agent's edit of a test file is not graded"


def test_agent_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTHER_PROVIDER_API_KEY", "sk-secret-1")
    monkeypatch.setenv("PASSED_ON_PURPOSE", "visible")
    run_cmd_agent(tmp_path, [HELLO_TASK], "env > repo/env.txt", agent_env=["PASSED_ON_PURPOSE"])
    env_txt = (tmp_path / "run/attempts/hello/1/captured/repo/env.txt").read_text()
    assert "sk-secret-1" not in env_txt
    assert "PASSED_ON_PURPOSE=visible" in env_txt


def test_attempts_really_run_in_parallel(tmp_path: Path) -> None:
    rendezvous = tmp_path / "rv"
    rendezvous.mkdir()
    cmd = (
        f'touch {rendezvous}/"$KSI_TASK_ID"; i=0; '
        f'while [ "$(ls {rendezvous} | wc -l)" -lt 2 ]; do '
        "i=$((i+1)); [ $i -gt 200 ] && exit 1; sleep 0.05; done; echo hi > repo/hello.txt"
    )
    tasks = [dict(HELLO_TASK, task_id="a"), dict(HELLO_TASK, task_id="b")]
    summary = run_cmd_agent(tmp_path, tasks, cmd, concurrency=2)
    assert summary.solved_tasks == 2, "each agent waited for the other: both ran at once"


def test_pass_at_k_from_attempts(tmp_path: Path) -> None:
    # Even attempts solve the task: 2 of 4 succeed.
    cmd = "if [ $((KSI_ATTEMPT % 2)) -eq 0 ]; then echo hi > repo/hello.txt; fi"
    summary = run_cmd_agent(tmp_path, [HELLO_TASK], cmd, attempts=4)
    assert summary.n_attempts == 4
    assert summary.tasks[0].successes == 2
    assert summary.pass_at_k["pass@1"] == pytest.approx(0.5)
    assert summary.pass_at_k["pass@2"] == pytest.approx(1 - 1 / 6)
    assert summary.pass_at_k["pass@4"] == pytest.approx(1.0)


def test_retries_rerun_unscored_attempts(tmp_path: Path) -> None:
    flag = tmp_path / "second-time"
    task = dict(
        HELLO_TASK,
        eval={
            "command": f"if [ -f {flag} ]; then exit 0; fi; touch {flag}; sleep 30",
            "timeout_sec": 1,
        },
    )
    summary = run_cmd_agent(tmp_path, [task], "true", retries=2)
    lines = journal_lines(tmp_path / "run")
    assert [(r["status"], r["try_number"]) for r in lines] == [("unscored", 0), ("scored", 1)]
    assert lines[0]["eval"]["status"] == "timeout"
    assert summary.n_attempts == 1 and summary.tasks[0].best_score == 1.0
    assert (tmp_path / "run" / "attempts" / "hello" / "1-retry1" / "record.json").exists()


class _RateLimitedOnce:
    """Reports a rate limit on the first try of task ``limited``; otherwise does the work."""

    name: ClassVar[str] = "rate-limited-once"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "test agent"
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()

    def check_tasks(self, tasks: Any) -> list[str]:
        return []

    def missing_credentials(self, env: Any) -> list[str]:
        return []

    def setup(self, ctx: AgentContext) -> None:
        pass

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        return Invocation(argv=("sh", "-c", "echo hi > repo/hello.txt"))

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        if ctx.task.id == "limited" and ctx.attempt_dir.name == "1":
            return AgentOutcome(status="rate_limited", error="429 Too Many Requests")
        return AgentOutcome()


def test_a_rate_limited_try_is_retried_after_a_pause_that_holds_no_slot(tmp_path: Path) -> None:
    """With one slot, the other task runs while the rate-limited one waits out its pause."""
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=t) for t in ("limited", "other")]
    )
    summary = ksi.run(
        tasks, agent=_RateLimitedOnce(), run_dir=tmp_path / "run", concurrency=1, retries=1
    )
    lines = journal_lines(tmp_path / "run")
    order = [(r["task_id"], r["try_number"], r["status"]) for r in lines]
    assert order == [
        ("limited", 0, "agent_error"),
        ("other", 0, "scored"),
        ("limited", 1, "scored"),
    ]
    first, retry = lines[0], lines[2]
    paused = dt.datetime.fromisoformat(retry["started_at"]) - dt.datetime.fromisoformat(
        first["finished_at"]
    )
    assert paused.total_seconds() >= 1.0, "backoff: at least half of the 2 s base pause"
    assert summary.solved_tasks == 2


def test_unscored_task_without_eval_is_counted_apart(tmp_path: Path) -> None:
    task = {"task_id": "manual", "prompt": "anything"}
    summary = run_cmd_agent(tmp_path, [task], "true", retries=3)
    assert summary.unscored_attempts == 1
    assert summary.tasks[0].best_score is None and not summary.tasks[0].solved
    assert len(journal_lines(tmp_path / "run")) == 1, "no_eval is final: never retried"


class _CostlyAgent:
    """An in-process agent that reports $1 per attempt (as a real CLI agent would)."""

    name: ClassVar[str] = "costly"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "test agent"
    required_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()

    def check_tasks(self, tasks: Any) -> list[str]:
        return []

    def setup(self, ctx: AgentContext) -> None:
        pass

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        return Invocation(argv=("sh", "-c", "echo hi > repo/hello.txt"))

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        return AgentOutcome(usage=Usage(input_tokens=100, output_tokens=10, cost_usd=1.0))


def test_max_cost_stops_launching_attempts(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(6)]
    )
    summary = ksi.run(
        tasks, agent=_CostlyAgent(), run_dir=tmp_path / "run", concurrency=1, max_cost_usd=2.5
    )
    assert summary.n_attempts == 3
    assert summary.total_cost_usd == pytest.approx(3.0)
    assert summary.cost_per_solved_task == pytest.approx(1.0)
    assert summary.input_tokens == 300
    assert "max_cost" in summary.stopped_reason
    assert summary.run_complete is False


class _KeyAgent(_CostlyAgent):
    """An in-process agent whose key is bad until ``fixed``: it reports auth_error."""

    name: ClassVar[str] = "keyed"

    def __init__(self, fixed: bool = False) -> None:
        self.fixed = fixed

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        if self.fixed:
            return AgentOutcome()
        return AgentOutcome(status="auth_error", error="401 invalid x-api-key")


def test_an_auth_error_stops_launching_and_a_resume_runs_it_again(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(4)]
    )
    run_dir = tmp_path / "run"
    summary = ksi.run(tasks, agent=_KeyAgent(), run_dir=run_dir, concurrency=1)
    assert summary.n_attempts == 1
    assert summary.stopped_reason.startswith("auth_error: agent 'keyed' could not authenticate")
    assert summary.run_complete is False
    # The key fixed: the resume runs the failed attempt again, and the three never started.
    again = ksi.run(tasks, agent=_KeyAgent(fixed=True), run_dir=run_dir, concurrency=1)
    assert again.solved_tasks == 4 and again.run_complete is True


def test_without_fail_fast_every_attempt_runs(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(3)]
    )
    summary = ksi.run(
        tasks, agent=_KeyAgent(), run_dir=tmp_path / "run", concurrency=1, fail_fast_auth=False
    )
    assert summary.n_attempts == 3 and summary.error_attempts == 3
    assert summary.stopped_reason == ""


class _UnreachableAgent(_CostlyAgent):
    """An in-process agent whose endpoint refuses connections, except for ``reachable`` tasks."""

    name: ClassVar[str] = "unreachable"

    def __init__(self, reachable: tuple[str, ...] = (), error: str = "") -> None:
        self.reachable = reachable
        self.error = error or "could not connect to http://127.0.0.1:9: connect ECONNREFUSED"

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        if ctx.task.id in self.reachable:
            return AgentOutcome()
        return AgentOutcome(status="connection_error", error=self.error)


def test_connection_errors_in_a_row_stop_the_run_and_a_resume_runs_them_again(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(5)]
    )
    run_dir = tmp_path / "run"
    summary = ksi.run(tasks, agent=_UnreachableAgent(), run_dir=run_dir, concurrency=1)
    assert summary.n_attempts == 3 and summary.error_attempts == 3
    assert summary.stopped_reason.startswith(
        "connection_error: agent 'unreachable' could not connect in 3 attempts in a row "
        "(the connection was refused)"
    )
    assert summary.run_complete is False
    everyone = tuple(f"t{i}" for i in range(5))
    again = ksi.run(tasks, agent=_UnreachableAgent(everyone), run_dir=run_dir, concurrency=1)
    assert again.solved_tasks == 5 and again.run_complete is True


def test_connection_errors_after_an_attempt_got_through_do_not_stop_the_run(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(5)]
    )
    agent = _UnreachableAgent(reachable=("t0",))
    summary = ksi.run(tasks, agent=agent, run_dir=tmp_path / "run", concurrency=1)
    assert summary.n_attempts == 5 and summary.error_attempts == 4
    assert summary.stopped_reason == ""


class _FlakyDnsAgent(_UnreachableAgent):
    """Refused on even tasks, a name that does not resolve on odd ones."""

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        if int(ctx.task.id[1:]) % 2:
            return AgentOutcome(status="connection_error", error="getaddrinfo ENOTFOUND gw.invalid")
        return super().outcome(ctx, result)


def test_connection_errors_of_different_kinds_are_not_the_same_error_in_a_row(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(5)]
    )
    summary = ksi.run(tasks, agent=_FlakyDnsAgent(), run_dir=tmp_path / "run", concurrency=1)
    assert summary.n_attempts == 5 and summary.stopped_reason == ""


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    @hookimpl
    def ksi_run_started(self, run: RunInfo) -> None:
        self.calls.append(("started", run.task_ids))

    @hookimpl
    def ksi_attempt_finished(self, run: RunInfo, record: AttemptRecord) -> None:
        with self.lock:
            journal = (run.run_dir / "journal.jsonl").read_text()
            # The record is durable before observers hear of it.
            assert f'"task_id":"{record.task_id}"' in journal
            self.calls.append(("attempt", record.task_id))

    @hookimpl
    def ksi_run_finished(self, run: RunInfo, summary: RunSummary) -> None:
        self.calls.append(("finished", summary.solved_tasks))


def _observed_run(tmp_path: Path) -> list[tuple[str, Any]]:
    recorder = _Recorder()
    unregister = register_plugin(recorder, name="recorder")
    try:
        run_cmd_agent(
            tmp_path,
            [HELLO_TASK, dict(HELLO_TASK, task_id="other")],
            "echo hi > repo/hello.txt",
        )
    finally:
        unregister()
    return recorder.calls


def test_hook_ksi_run_started(tmp_path: Path) -> None:
    assert _observed_run(tmp_path)[0] == ("started", ("hello", "other"))


def test_hook_ksi_attempt_finished(tmp_path: Path) -> None:
    calls = _observed_run(tmp_path)
    assert sorted(c[1] for c in calls if c[0] == "attempt") == ["hello", "other"]


def test_hook_ksi_run_finished(tmp_path: Path) -> None:
    assert _observed_run(tmp_path)[-1] == ("finished", 2)


class _BrokenObserver:
    @hookimpl
    def ksi_attempt_finished(self, run: RunInfo, record: AttemptRecord) -> None:
        raise RuntimeError("observer bug")


def test_failing_observer_never_loses_an_attempt(tmp_path: Path) -> None:
    unregister = register_plugin(_BrokenObserver(), name="broken-observer")
    try:
        summary = run_cmd_agent(tmp_path, [HELLO_TASK], "echo hi > repo/hello.txt")
    finally:
        unregister()
    assert summary.solved_tasks == 1
    assert len(journal_lines(tmp_path / "run")) == 1


def test_output_json_report(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    run_cmd_agent(tmp_path, [HELLO_TASK], "echo hi > repo/hello.txt", output_json=str(out))
    report = json.loads(out.read_text())
    assert report["run_complete"] is True
    assert report["summary"]["solved_tasks"] == 1
    assert report["versions"]["ksi"] == ksi.__version__
    assert report["versions"]["python"]
    assert report["config"]["agent"] == "command"
    (attempt,) = report["attempts"]
    assert attempt["task_id"] == "hello" and attempt["score"] == 1.0
    assert attempt["eval"]["status"] == "scored"


def test_max_cost_holds_across_a_resume(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(6)]
    )
    opts: dict[str, Any] = {
        "agent": _CostlyAgent(),
        "run_dir": tmp_path / "run",
        "concurrency": 1,
        "max_cost_usd": 2.5,
    }
    ksi.run(tasks, **opts)
    again = ksi.run(tasks, **opts)
    assert again.n_attempts == 3, "a run already at its budget launches nothing on resume"
    assert "max_cost" in again.stopped_reason


def test_regrade_neither_doubles_spend_nor_reopens_retries(tmp_path: Path) -> None:
    from ksi.runs.regrade import regrade_run

    flag = tmp_path / "flag"
    task = dict(HELLO_TASK, eval={"command": f"test -f {flag} || sleep 5", "timeout_sec": 1})
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    first = ksi.run(tasks, agent=_CostlyAgent(), run_dir=tmp_path / "run")
    assert first.unscored_attempts == 1 and first.total_cost_usd == pytest.approx(1.0)
    flag.touch()
    regraded = regrade_run(tmp_path / "run")
    assert regraded.tasks[0].best_score == 1.0
    assert regraded.total_cost_usd == pytest.approx(1.0)
    assert regraded.input_tokens == 100
    again = ksi.run(tasks, agent=_CostlyAgent(), run_dir=tmp_path / "run", retries=1)
    assert len(journal_lines(tmp_path / "run")) == 2, "a regraded, scored attempt is not retried"
    assert again.total_cost_usd == pytest.approx(1.0)


def test_budget_reached_by_the_last_attempt_leaves_the_run_complete(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [dict(HELLO_TASK, task_id=f"t{i}") for i in range(2)]
    )
    opts: dict[str, Any] = {
        "agent": _CostlyAgent(),
        "run_dir": tmp_path / "run",
        "concurrency": 1,
        "max_cost_usd": 2.0,
    }
    summary = ksi.run(tasks, **opts)
    assert summary.n_attempts == 2 and summary.solved_tasks == 2
    assert summary.run_complete is True, "every attempt ran: nothing was left unlaunched"
    assert summary.stopped_reason == ""
    again = ksi.run(tasks, **opts)
    assert again.run_complete is True and again.stopped_reason == ""


class _NamelessAgent:
    """An agent object with no ``name``: a Python API user's quick class."""

    def setup(self, ctx: AgentContext) -> None:
        pass

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        return Invocation(argv=("sh", "-c", "echo hi > repo/hello.txt"))

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        return AgentOutcome()


def test_api_resumes_with_a_new_instance_of_the_same_agent(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [HELLO_TASK])
    first = ksi.run(tasks, agent=_NamelessAgent(), run_dir=tmp_path / "run")
    again = ksi.run(tasks, agent=_NamelessAgent(), run_dir=tmp_path / "run")
    assert first.solved_tasks == again.solved_tasks == 1
    assert len(journal_lines(tmp_path / "run")) == 1


def test_api_refuses_options_for_a_ready_agent_instance(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [HELLO_TASK])
    with pytest.raises(UserInputError, match="takes no options"):
        ksi.run(tasks, agent=_CostlyAgent(), agent_options={"x": "1"}, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists(), "nothing runs with options it would ignore"


def test_api_rejects_out_of_range_options_before_running(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [HELLO_TASK])
    with pytest.raises(UserInputError) as info:
        ksi.run(
            tasks,
            agent="nop",
            attempts=0,
            concurrency=0,
            wipe_workspace="false",
            run_dir=tmp_path / "run",
        )
    message = str(info.value)
    assert "attempts: expected an integer >= 1, got 0" in message
    assert "concurrency: expected an integer >= 1" in message
    assert "wipe_workspace: expected True or False, got 'false'" in message
    assert not (tmp_path / "run").exists()


class _CountingProgress:
    """A progress display that remembers the most attempts it was told were running."""

    def __init__(self) -> None:
        self.running = self.most_running = self.finished = 0

    def start(self, total: int, already_done: int, *args: Any, **kwargs: Any) -> None:
        pass

    def attempt_started(self) -> None:
        self.running += 1
        self.most_running = max(self.most_running, self.running)

    def attempt_finished(self, record: AttemptRecord, solved: bool) -> None:
        self.running -= 1
        self.finished += 1

    def close(self) -> None:
        pass


def test_progress_never_shows_more_running_attempts_than_the_concurrency(
    tmp_path: Path,
) -> None:
    """The next attempt is launched before the finished one is journalled, but the
    progress hears of the launch after the finish: 'running' never exceeds --concurrency."""
    progress = _CountingProgress()
    summary = run_cmd_agent(
        tmp_path,
        [dict(HELLO_TASK, task_id=f"t{i}") for i in range(8)],
        "echo hi > repo/hello.txt",
        concurrency=2,
        progress=progress,
    )
    assert summary.solved_tasks == 8
    assert progress.finished == 8 and progress.running == 0
    assert progress.most_running == 2


class _TimingProgress(_CountingProgress):
    """Remembers when it heard of each finished attempt."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[tuple[str, float]] = []

    def attempt_finished(self, record: AttemptRecord, solved: bool) -> None:
        super().attempt_finished(record, solved)
        self.heard.append((record.finished_at, time.time()))


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_the_progress_hears_of_an_attempt_when_it_ends_not_when_the_next_one_does(
    tmp_path: Path, executor: str
) -> None:
    """Records are synced in the background, and the progress (and the observers) hear of
    each one once it is synced: a moment after the attempt ends, not an attempt later."""
    progress = _TimingProgress()
    summary = run_cmd_agent(
        tmp_path,
        [dict(HELLO_TASK, task_id=f"t{i}") for i in range(3)],
        "sleep 1.5; echo hi > repo/hello.txt",
        progress=progress,
        executor=executor,
    )
    assert summary.solved_tasks == 3 and progress.finished == 3
    for finished_at, heard_at in progress.heard:
        late = heard_at - dt.datetime.fromisoformat(finished_at).timestamp()
        assert late < 1.0, f"the progress heard of an attempt {late:.2f} s after it ended"

"""The ``command`` evaluator against the spec's scoring contract, with real shell processes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ksi.errors import OptionsError, UserInputError
from ksi.eval.command import CommandEvaluator
from ksi.interfaces import Evaluator
from ksi.models import EvalResult, TaskSpec
from ksi.options import create_component
from ksi.plugins import registry

COMPAT_KEYS = {
    "status",
    "native_score",
    "resolved",
    "exit_code",
    "stdout_tail",
    "stderr_tail",
    "eval_workdir",
}


def make_task(
    command: str,
    *,
    timeout: float | None = None,
    repo_path: Path | str = "",
    task_id: str = "t1",
) -> TaskSpec:
    metadata: dict[str, Any] = {
        "task_source": "custom",
        "repo_path": str(repo_path),
        "eval_command": command,
    }
    if timeout is not None:
        metadata["eval_timeout_sec"] = timeout
    return TaskSpec(id=task_id, repo="", prompt="do it", metadata=metadata)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "repo"
    d.mkdir()
    return d


def grade(command: str, workdir: Path, **kwargs: Any) -> EvalResult:
    timeout = kwargs.pop("timeout", None)
    return CommandEvaluator(**kwargs).grade(make_task(command, timeout=timeout), workdir)


# -- exit codes ---------------------------------------------------------------


def test_exit_zero_scores_one(work: Path) -> None:
    r = grade("echo all good; echo warn >&2", work)
    assert (r.status, r.native_score, r.exit_code, r.resolved) == ("scored", 1.0, 0, True)
    assert r.stdout_tail == "all good\n"
    assert r.stderr_tail == "warn\n"
    assert r.eval_workdir == str(work)
    assert r.duration_sec > 0


@pytest.mark.parametrize("code", [1, 2, 255])
def test_nonzero_exit_scores_zero(work: Path, code: int) -> None:
    r = grade(f"echo failing >&2; exit {code}", work)
    assert (r.status, r.native_score, r.exit_code, r.resolved) == ("scored", 0.0, code, False)
    assert "failing" in r.stderr_tail


def test_exit_127_scores_zero_with_a_note_that_the_command_may_not_exist(work: Path) -> None:
    r = grade("ksi-no-such-command-xyz", work)
    assert (r.status, r.native_score, r.exit_code) == ("scored", 0.0, 127)
    assert any("127" in n and "could not find the command" in n for n in r.notes)


def test_command_runs_in_workdir_with_named_host_vars_and_ksi_variables(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 11 item 2: the eval command imports the agent's code, so it gets the
    # scrubbed environment plus only the host variables named (--eval-env).
    monkeypatch.setenv("KSI_TEST_HOST_VAR", "from-the-host")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-not-for-the-eval")
    r = grade(
        'pwd -P; echo "$KSI_TASK_ID"; echo "$KSI_EVAL_WORKDIR"; echo "$KSI_TEST_HOST_VAR"; '
        'echo "[$GITHUB_TOKEN]"; echo "$PATH"',
        work,
        pass_env=("KSI_TEST_HOST_VAR",),
    )
    assert r.stdout_tail.splitlines() == [
        str(work.resolve()),
        "t1",
        str(work),
        "from-the-host",
        "[]",
        os.environ["PATH"],
    ]
    assert r.details["env_passed"] == ["KSI_TEST_HOST_VAR"]
    assert r.details["isolation"] == "none"


def test_shell_option_is_used(work: Path) -> None:
    bash = Path("/bin/bash")
    if not bash.exists():
        pytest.skip("no /bin/bash")
    # `[[ ]]` is bash syntax; /bin/sh (dash) would fail on it.
    r = grade('[[ -n "$BASH_VERSION" ]]', work, shell=str(bash))
    assert r.native_score == 1.0


# -- score.json -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "exit_code", "expected"),
    [
        ('{"score": 0.5}', 0, 0.5),
        ('{"score": 0.5}', 1, 0.5),
        ('{"score": 1}', 3, 1.0),
        ('{"score": 0}', 0, 0.0),
        ('{"score": 0.25, "details": "3 of 4 tests"}', 0, 0.25),
    ],
)
def test_score_json_written_by_the_command_overrides_exit_code(
    work: Path, body: str, exit_code: int, expected: float
) -> None:
    r = grade(f"echo {shlex.quote(body)} > score.json; exit {exit_code}", work)
    assert (r.status, r.native_score, r.exit_code) == ("scored", expected, exit_code)
    assert r.details["score_source"] == "score.json"
    assert r.resolved is (expected == 1.0)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("not json", "invalid JSON at line 1"),
        ("[0.5]", "got a JSON array"),
        ("0.5", "got a JSON number"),
        ("{}", 'no "score" key'),
        ('{"score": true}', "got a JSON boolean"),
        ('{"score": "0.5"}', "got a JSON string"),
        ('{"score": null}', "got a JSON null"),
        ('{"score": 1.5}', "between 0 and 1"),
        ('{"score": -0.1}', "between 0 and 1"),
        ('{"score": NaN}', "between 0 and 1"),
        ('{"score": Infinity}', "between 0 and 1"),
    ],
)
@pytest.mark.parametrize("exit_code", [0, 1])
def test_bad_score_json_is_ignored_and_noted(
    work: Path, body: str, why: str, exit_code: int
) -> None:
    r = grade(f"printf '%s' {shlex.quote(body)} > score.json; exit {exit_code}", work)
    assert r.status == "scored"
    assert r.native_score == (1.0 if exit_code == 0 else 0.0)
    assert r.details["score_source"] == "exit_code"
    notes = [n for n in r.notes if n.startswith("score.json ignored")]
    assert len(notes) == 1 and why in notes[0], r.notes


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('{"score": ' + "1" * 400 + "}", "between 0 and 1"),  # float() overflows
        ('{"score": ' + "1" * 5000 + "}", "more than 4300 digits"),  # int parse limit
        ("[" * 60000, "nested too deeply"),  # RecursionError in the decoder
    ],
)
def test_score_json_the_decoder_chokes_on_is_ignored_and_noted(
    work: Path, body: str, why: str
) -> None:
    (work.parent / "body").write_text(body)
    r = grade(f"cat {shlex.quote(str(work.parent / 'body'))} > score.json; exit 1", work)
    assert (r.status, r.native_score, r.details["score_source"]) == ("scored", 0.0, "exit_code")
    notes = [n for n in r.notes if n.startswith("score.json ignored")]
    assert len(notes) == 1 and why in notes[0], r.notes


def test_score_json_that_is_not_utf8_or_a_directory_is_noted(work: Path) -> None:
    r = grade(r"printf '\377\376' > score.json", work)
    assert r.native_score == 1.0 and any("not UTF-8" in n for n in r.notes)
    r = grade("mkdir score.json; exit 1", work)
    assert r.native_score == 0.0 and any("not a regular file" in n for n in r.notes)


def test_stale_score_json_is_deleted_before_the_command_runs(work: Path) -> None:
    (work / "score.json").write_text('{"score": 0.5}')
    # The command reports whether it can see a score.json; it must not.
    r = grade("if [ -e score.json ]; then echo SAW-IT; exit 1; fi; echo clean", work)
    assert r.stdout_tail == "clean\n"
    assert (r.native_score, r.details["score_source"]) == (1.0, "exit_code")
    assert any("stale score.json" in n for n in r.notes)
    assert not (work / "score.json").exists()


def test_stale_score_json_cannot_rescue_a_failing_command(work: Path) -> None:
    (work / "score.json").write_text('{"score": 1.0}')
    r = grade("exit 1", work)
    assert r.native_score == 0.0


@pytest.mark.parametrize("kind", ["directory", "symlink"])
def test_stale_score_json_of_any_kind_is_removed(work: Path, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"score": 1.0}')
    if kind == "directory":
        (work / "score.json").mkdir()
        (work / "score.json" / "inner").write_text("x")
    else:
        (work / "score.json").symlink_to(target)
    r = grade("test ! -e score.json && test ! -L score.json", work)
    assert r.native_score == 1.0
    assert target.read_text() == '{"score": 1.0}'  # a symlink's target is left alone


# -- unscored cases -----------------------------------------------------------------


def _live_cmdlines_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def _sleeper(marker: str, started_file: str) -> str:
    """A shell snippet for a Python process that records it started, then sleeps 1000s."""
    code = f"import time; open({started_file!r}, 'w').close(); time.sleep(1000)"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} {marker}"


def test_process_scan_sees_a_live_marked_process(tmp_path: Path) -> None:
    """The check the kill tests rely on does find a live process (it can fail)."""
    marker = f"ksi-marker-{uuid.uuid4().hex}"
    started = tmp_path / "started"
    proc = subprocess.Popen(
        ["/bin/sh", "-c", f"exec {_sleeper(marker, str(started))}"], cwd=tmp_path
    )
    try:
        while not started.exists():
            assert proc.poll() is None
            time.sleep(0.01)
        assert _live_cmdlines_with(marker) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert _live_cmdlines_with(marker) == []


def test_timeout_is_unscored_and_kills_children_even_setsid_ones(work: Path) -> None:
    plain, detached = (f"ksi-marker-{uuid.uuid4().hex}" for _ in range(2))
    command = (
        f"{_sleeper(plain, 'plain.started')} & "
        f"setsid {_sleeper(detached, 'detached.started')} & "
        "while [ ! -e plain.started ] || [ ! -e detached.started ]; do sleep 0.05; done; "
        'echo "{\\"score\\": 1}" > score.json; sleep 1000'
    )
    r = grade(command, work, timeout=3.0)
    assert (r.status, r.native_score, r.exit_code, r.resolved) == ("timeout", None, None, False)
    assert (work / "plain.started").exists() and (work / "detached.started").exists()
    assert _live_cmdlines_with(plain) == []
    assert _live_cmdlines_with(detached) == []
    assert any("did not finish within 3s" in n for n in r.notes)


def test_background_child_of_a_finished_command_is_killed(work: Path) -> None:
    marker = f"ksi-marker-{uuid.uuid4().hex}"
    command = (
        f"{_sleeper(marker, 'bg.started')} & "
        "while [ ! -e bg.started ]; do sleep 0.05; done; echo done"
    )
    r = grade(command, work, timeout=60.0)
    assert (r.status, r.native_score) == ("scored", 1.0)
    assert _live_cmdlines_with(marker) == []


def test_timeout_option_overrides_the_task_timeout(work: Path) -> None:
    r = CommandEvaluator(timeout_sec=1.0).grade(make_task("sleep 30", timeout=600.0), work)
    assert (r.status, r.details["timeout_sec"]) == ("timeout", 1.0)


def test_default_timeout_is_300_seconds(work: Path) -> None:
    r = grade("true", work)
    assert r.details["timeout_sec"] == 300.0


@pytest.mark.parametrize("missing", ["absent", "a-file"])
def test_missing_workspace_is_unscored(tmp_path: Path, missing: str) -> None:
    workdir = tmp_path / missing
    if missing == "a-file":
        workdir.write_text("not a directory")
    r = grade("true", workdir)
    assert (r.status, r.native_score, r.exit_code) == ("missing_workspace", None, None)
    assert r.eval_workdir == str(workdir)


def test_spawn_failure_is_unscored(work: Path) -> None:
    r = grade("true", work, shell="/nonexistent/ksi-shell")
    assert (r.status, r.native_score, r.exit_code) == ("spawn_failed", None, None)
    assert any("/nonexistent/ksi-shell" in n for n in r.notes)


@pytest.mark.parametrize("command", ["", "   "])
def test_no_eval_command_is_unscored(work: Path, command: str) -> None:
    r = grade(command, work)
    assert (r.status, r.native_score) == ("no_eval", None)


def test_task_without_eval_command_key_is_unscored(work: Path) -> None:
    r = CommandEvaluator().grade(TaskSpec(id="bare"), work)
    assert (r.status, r.native_score) == ("no_eval", None)


@pytest.mark.parametrize("bad", ["fast", 0, -5, True, float("nan")])
def test_bad_task_timeout_is_a_user_error_naming_the_task(bad: Any) -> None:
    # Refused when the task is built, so no evaluator ever grades it: the constructor alone
    # sits in the raises block (a grade() call after it could never run).
    with pytest.raises(UserInputError, match=r"task 'slowpoke'.*eval_timeout_sec"):
        TaskSpec(id="slowpoke", metadata={"eval_command": "true", "eval_timeout_sec": bad})


# -- logs and tails ---------------------------------------------------------------------


def test_logs_hold_full_output_and_tails_the_end(work: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "eval"
    task = make_task("seq 1 5000; seq 1 3 >&2")
    r = CommandEvaluator(tail_bytes=100).grade(task, work, log_dir=logs)
    full = (logs / "eval.stdout.log").read_text()
    assert full.splitlines() == [str(i) for i in range(1, 5001)]
    assert (logs / "eval.stderr.log").read_text() == "1\n2\n3\n"
    assert len(r.stdout_tail.encode()) == 100 and r.stdout_tail.endswith("4999\n5000\n")
    assert r.details["stdout_log"] == str(logs / "eval.stdout.log")


def test_logs_are_capped_and_the_cut_is_noted(work: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    r = CommandEvaluator(log_cap_bytes=1000).grade(make_task("seq 1 5000"), work, log_dir=logs)
    assert r.native_score == 1.0
    text = (logs / "eval.stdout.log").read_text()
    assert text.startswith("1\n2\n") and "truncated at 1000 bytes" in text
    assert len(text) < 1100
    assert any("cut at 1000 bytes" in n for n in r.notes)


# -- registration and options ------------------------------------------------------------


def test_registered_as_the_command_evaluator() -> None:
    reg = registry("evaluator").get("COMMAND")
    assert reg.obj is CommandEvaluator and reg.plugin == "ksi.eval.command"
    assert isinstance(CommandEvaluator(), Evaluator)
    assert CommandEvaluator.grades_in == "host"


def test_options_from_the_command_line(work: Path) -> None:
    ev = create_component(
        CommandEvaluator,
        {"tail_bytes": "3", "timeout_sec": "20", "keep_workdir": "yes"},
        kind="evaluator",
        option_flag="--evaluator-option",
    )
    assert (ev.tail_bytes, ev.timeout_sec, ev.keep_workdir) == (3, 20.0, True)
    assert ev.grade(make_task("echo hello"), work).stdout_tail == "lo\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout_sec": "0"}, "timeout_sec"),
        ({"tail_bytes": "-1"}, "tail_bytes"),
        ({"shel": "/bin/bash"}, "no option 'shel'"),
    ],
)
def test_bad_options_are_reported(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        create_component(
            CommandEvaluator, options, kind="evaluator", option_flag="--evaluator-option"
        )


# -- the original KSI's evaluate() ---------------------------------------------------------


def test_evaluate_grades_the_given_workspace_in_place(work: Path) -> None:
    task = make_task("echo ran > out.txt; echo '{\"score\": 0.75}' > score.json")
    out = CommandEvaluator().evaluate(
        task=task, model_output="", runtime_meta={"host_workspace_repo_dir": str(work)}
    )
    assert set(out) >= COMPAT_KEYS
    assert out["status"] == "evaluated" and out["native_score"] == 0.75
    assert out["resolved"] is False and out["exit_code"] == 0
    assert out["eval_workdir"] == str(work)
    assert (work / "out.txt").read_text() == "ran\n"
    json.dumps(out)  # the dict is plain JSON


def test_evaluate_with_missing_workspace_is_unscored(tmp_path: Path) -> None:
    out = CommandEvaluator().evaluate(
        task=make_task("true"),
        model_output="",
        runtime_meta={"host_workspace_repo_dir": str(tmp_path / "gone")},
    )
    assert (out["status"], out["native_score"], out["resolved"]) == (
        "no_workspace",
        None,
        False,
    )


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    d = tmp_path / "seed"
    d.mkdir()
    (d / "solution.py").write_text("print('seed')\n")
    (d / "score.json").write_text('{"score": 0.5}')
    return d


def _snapshot(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


SEED_COMMAND = (
    "test ! -e score.json && grep -q seed solution.py && "
    "echo changed > solution.py && touch new.txt && pwd -P"
)


def test_evaluate_without_workspace_grades_a_fresh_copy_of_the_seed(seed: Path) -> None:
    before = _snapshot(seed)
    out = CommandEvaluator().evaluate(
        task=make_task(SEED_COMMAND, repo_path=seed), model_output="", runtime_meta={}
    )
    assert set(out) >= COMPAT_KEYS
    assert (out["status"], out["native_score"], out["resolved"]) == ("evaluated", 1.0, True)
    ran_in = Path(out["eval_workdir"])
    assert out["stdout_tail"].strip() == str(ran_in.resolve())
    assert ran_in.resolve() != seed.resolve() and seed.resolve() not in ran_in.resolve().parents
    assert _snapshot(seed) == before  # the seed is never touched
    assert not ran_in.exists() and out["details"]["eval_workdir_removed"] is True


def test_evaluate_keep_workdir_keeps_the_graded_copy(seed: Path) -> None:
    out = CommandEvaluator(keep_workdir=True).evaluate(
        task=make_task(SEED_COMMAND, repo_path=seed), model_output=""
    )
    ran_in = Path(out["eval_workdir"])
    try:
        assert out["native_score"] == 1.0 and out["details"]["eval_workdir_removed"] is False
        assert (ran_in / "new.txt").exists()
        assert (ran_in / "solution.py").read_text() == "changed\n"
        assert (seed / "solution.py").read_text() == "print('seed')\n"
    finally:
        import shutil

        shutil.rmtree(ran_in.parent, ignore_errors=True)


def test_evaluate_with_a_missing_seed_is_unscored(tmp_path: Path) -> None:
    out = CommandEvaluator().evaluate(
        task=make_task("true", repo_path=tmp_path / "no-such-seed"), model_output=""
    )
    assert (out["status"], out["native_score"]) == ("no_workspace", None)
    assert any("no-such-seed" in n for n in out["notes"])


# -- isolation=sandbox (issue 11 item 2) ------------------------------------------


@pytest.mark.sandbox
def test_sandboxed_grade_keeps_the_scoring_contract(work: Path) -> None:
    sandboxed = CommandEvaluator(isolation="sandbox")
    assert sandboxed.grade(make_task("true"), work).native_score == 1.0
    r = sandboxed.grade(make_task("exit 3"), work)
    assert (r.status, r.native_score, r.exit_code) == ("scored", 0.0, 3)
    (work / "score.json").write_text('{"score": 1}')  # stale: deleted before the command
    r = sandboxed.grade(
        make_task("test ! -e score.json && echo '{\"score\": 0.25}' > score.json"), work
    )
    assert (r.native_score, r.details["score_source"]) == (0.25, "score.json")
    assert r.details["isolation"] == "sandbox"
    marker = f"ksi-marker-{uuid.uuid4().hex}"
    r = sandboxed.grade(
        make_task(f"{_sleeper(marker, 'bg.started')} & sleep 1000", timeout=2.0), work
    )
    assert (r.status, r.native_score) == ("timeout", None)
    assert _live_cmdlines_with(marker) == []


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A writable directory outside /tmp (the sandbox's /tmp is a private tmpfs)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=".ksi-test-outside-", dir=Path(__file__).parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.sandbox
def test_sandboxed_grade_cannot_write_outside_reach_the_network_or_read_home(
    work: Path, tmp_path: Path, host_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    outside = host_dir / "outside.txt"
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
        probe = (
            f"echo x > {outside} && echo WROTE; "
            f"cat {home}/.ssh/id_ed25519 && echo READ_KEY; "
            f'{sys.executable} -c "{connect}" && echo CONNECTED; '
            'echo "HOME=$HOME"; ls -A "$HOME" | wc -l; echo ok > inside.txt'
        )
        sandboxed = CommandEvaluator(isolation="sandbox").grade(make_task(probe), work)
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
        assert sandboxed.stdout_tail.splitlines() == ["HOME=/tmp/home", "0"]
        assert not outside.exists()
        assert (work / "inside.txt").read_text() == "ok\n"
        # The same command without isolation does all three: the test can tell.
        plain = CommandEvaluator(isolation="none").grade(make_task(probe), work)
        assert {"WROTE", "READ_KEY", "CONNECTED"} <= set(plain.stdout_tail.splitlines())
        assert outside.exists()

"""Issue 11 items 2 and 3: what the agent's code can reach when KSI grades it, and on local.

The attack of item 2, reproduced: an agent in the ``sandbox`` environment
writes a ``calc.py`` that the task's eval command imports on the host. When
imported it prints a planted secret from the environment, writes a file
outside the eval directory, and connects to a listener on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ksi.agents.builtin import NopAgent
from ksi.agents.claude_code import ClaudeCodeAgent
from ksi.attempt.safety import credential_warning
from ksi.environments.local import LocalEnvironment
from ksi.environments.sandbox import SandboxEnvironment
from tests.run_helpers import journal_lines, ksi, write_tasks

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]

CHECK = """\
import json
import calc

assert calc.add(2, 3) == 5
json.dump({"score": 0.75}, open("score.json", "w"))
"""

PAYLOAD = """\
import os, socket

def add(a, b):
    return a + b

print("SECRET=" + str(os.environ.get("GITHUB_TOKEN")))
try:
    with open({outside!r}, "w") as f:
        f.write("written by the agent's code")
    print("WRITE=ok")
except OSError as exc:
    print("WRITE=failed", exc.errno)
try:
    socket.create_connection(("127.0.0.1", {port}), 2).close()
    print("CONNECT=ok")
except OSError as exc:
    print("CONNECT=failed", exc.errno)
try:
    open({peek!r}).read()
    print("PEEK=read")
except OSError as exc:
    print("PEEK=failed", exc.errno)
"""


def _outside_private_mounts() -> Path:
    """A writable host directory that a sandbox shows read-only, not hidden.

    Not under /tmp, /var/tmp or a home directory: the sandbox mounts its own empty
    tmpfs there, so a write would land in the tmpfs and prove nothing. The test
    suite's own directory is used unless the checkout itself lives under one of
    them (a CI clone in /tmp), then /srv or /opt (the tests run as root there).
    """
    private = [Path("/tmp"), Path("/var/tmp"), Path("/home"), Path("/root")]
    private += [Path(os.environ["HOME"])] if os.environ.get("HOME") else []
    for candidate in (Path(__file__).parent, Path("/srv"), Path("/opt")):
        real = candidate.resolve()
        hidden = any(real == p.resolve() or p.resolve() in real.parents for p in private)
        if not hidden and os.access(real, os.W_OK):
            return real
    pytest.skip("no writable directory outside /tmp, /var/tmp and the home directories")


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A writable directory outside /tmp and homes (a sandbox's private mounts)."""
    path = Path(tempfile.mkdtemp(prefix=".ksi-test-outside-", dir=_outside_private_mounts()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.3)
        yield server


def _connected(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


def _attack(tmp_path: Path, outside: Path, port: int, secret: str, *extra: str) -> tuple[Path, str]:
    """Run the hostile agent in the sandbox environment; return (run dir, eval stdout)."""
    # Outside /tmp, as runs/ usually is (a sandbox's /tmp is its own tmpfs anyway).
    run_dir = outside.parent / "runs" / "run"
    # The run's own files (journal, other attempts' workspaces) are out of the grade's sight.
    code = PAYLOAD.format(outside=str(outside), port=port, peek=str(run_dir / "run.json"))
    b64 = base64.b64encode(code.encode()).decode()
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "task_id": "calc",
                "prompt": "write calc.py",
                "files": {"check.py": CHECK},
                "eval": {"command": "python3 check.py", "timeout_sec": 60},
            }
        ],
    )
    res = ksi(
        "run", str(tasks), "--agent", "command",
        "--agent-option", f"cmd=echo {b64} | base64 -d > repo/calc.py",
        "--environment", "sandbox", "--run-dir", str(run_dir), *extra,
        env={"GITHUB_TOKEN": secret, "ANTHROPIC_API_KEY": secret + "-anthropic"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert secret not in res.stdout + res.stderr or "--eval-env" in extra
    stdout = (run_dir / "attempts").rglob("eval.stdout.log")
    return run_dir, next(stdout).read_text()


def _files_holding(run_dir: Path, text: str) -> list[str]:
    return sorted(
        str(p.relative_to(run_dir))
        for p in run_dir.rglob("*")
        if p.is_file() and text.encode() in p.read_bytes()
    )


def test_host_grade_of_an_isolated_agent_gets_no_secret_no_write_no_network(
    tmp_path: Path, host_dir: Path, listener: socket.socket
) -> None:
    secret = f"ghp_planted_{uuid.uuid4().hex}"
    outside = host_dir / "pwned.txt"
    run_dir, out = _attack(tmp_path, outside, listener.getsockname()[1], secret)
    assert "SECRET=None" in out  # the agent's code ran, and found nothing
    assert "WRITE=failed" in out and not outside.exists()
    assert "CONNECT=failed" in out and not _connected(listener)
    assert "PEEK=failed" in out  # the run directory is hidden but for the eval's own copy
    assert _files_holding(run_dir, secret) == []  # eval logs, record.json, journal, run.json
    [record] = journal_lines(run_dir)
    assert (record["status"], record["score"]) == ("scored", 0.75)
    assert record["eval"]["details"]["isolation"] == "sandbox"
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert (config["eval_isolation"], config["eval_env"]) == ("auto", [])


def test_eval_env_passes_exactly_the_named_variable(
    tmp_path: Path, host_dir: Path, listener: socket.socket
) -> None:
    secret = f"ghp_planted_{uuid.uuid4().hex}"
    outside = host_dir / "pwned.txt"
    port = listener.getsockname()[1]
    run_dir, out = _attack(tmp_path, outside, port, secret, "--eval-env", "GITHUB_TOKEN")
    assert f"SECRET={secret}" in out
    assert "WRITE=failed" in out and "CONNECT=failed" in out  # still isolated
    assert _files_holding(run_dir, secret + "-anthropic") == []
    [record] = journal_lines(run_dir)
    assert record["eval"]["details"]["env_passed"] == ["GITHUB_TOKEN"]
    assert json.loads((run_dir / "run.json").read_text())["config"]["eval_env"] == ["GITHUB_TOKEN"]


def test_eval_isolation_none_grades_as_a_plain_host_process(
    tmp_path: Path, host_dir: Path, listener: socket.socket
) -> None:
    """The documented unsafe opt-out: writes and connections reach the host again."""
    secret = f"ghp_planted_{uuid.uuid4().hex}"
    outside = host_dir / "pwned.txt"
    port = listener.getsockname()[1]
    run_dir, out = _attack(tmp_path, outside, port, secret, "--eval-isolation", "none")
    assert "WRITE=ok" in out and outside.read_text() == "written by the agent's code"
    assert "CONNECT=ok" in out and _connected(listener)
    assert "PEEK=read" in out
    assert "SECRET=None" in out and _files_holding(run_dir, secret) == []  # still scrubbed
    [record] = journal_lines(run_dir)
    assert (record["score"], record["eval"]["details"]["isolation"]) == (0.75, "none")


def test_missing_bubblewrap_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p", "eval": {"command": "true"}}]
    )
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    run_dir = tmp_path / "run"
    res = ksi(
        "run", str(tasks), "--agent", "nop", "--eval-isolation", "sandbox",
        "--run-dir", str(run_dir), env={"PATH": str(empty_path)},
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "'bwrap' was not found on PATH" in res.stderr
    assert "install bubblewrap" in res.stderr and "--eval-isolation none" in res.stderr
    assert not run_dir.exists()


def test_regrade_and_grade_take_eval_env(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"task_id": "t", "prompt": "p", "eval": {"command": 'test -n "$KSI_TEST_GRADE_VAR"'}}],
    )
    env = {"KSI_TEST_GRADE_VAR": "set"}
    run_dir = tmp_path / "run"
    res = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(run_dir), env=env)
    assert res.returncode == 0, res.stderr
    assert journal_lines(run_dir)[-1]["score"] == 0.0  # not passed: not seen
    res = ksi("regrade", str(run_dir), "--eval-env", "KSI_TEST_GRADE_VAR", env=env)
    assert res.returncode == 0, res.stderr
    assert journal_lines(run_dir)[-1]["score"] == 1.0
    workspace = tmp_path / "ws"
    workspace.mkdir()
    common = ("grade", "--tasks-path", str(tasks), "--task-id", "t", "--workspace", str(workspace))
    assert ksi(*common, env=env).returncode == 0  # scored (0.0)
    res = ksi(*common, "--eval-env", "KSI_TEST_GRADE_VAR", "--json", env=env)
    assert json.loads(res.stdout)["native_score"] == 1.0


# -- item 3: local is not isolated ----------------------------------------------


def _local_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p"}])
    run_dir = tmp_path / f"run-{uuid.uuid4().hex[:6]}"
    res = ksi("run", str(tasks), "--run-dir", str(run_dir), *args, env=env)
    assert res.returncode == 0, res.stderr
    return res.stderr


def test_local_warns_when_an_agent_with_credentials_runs_there(tmp_path: Path) -> None:
    stderr = _local_run(
        tmp_path,
        "--agent", "command", "--agent-option", "cmd=true", "--agent-env", "KSI_TEST_TOKEN",
        env={"KSI_TEST_TOKEN": "tok-value-not-printed"},
    )  # fmt: skip
    assert "warning: environment 'local' does not isolate agent 'command'" in stderr
    assert "KSI_TEST_TOKEN" in stderr and "/proc/$PPID/environ" in stderr
    assert "tok-value-not-printed" not in stderr


def test_no_warning_without_credentials_or_off_local(tmp_path: Path) -> None:
    assert "warning" not in _local_run(tmp_path, "--agent", "nop")
    assert "warning" not in _local_run(tmp_path, "--agent", "command", "--agent-option", "cmd=true")
    sandboxed = _local_run(
        tmp_path,
        "--agent", "command", "--agent-option", "cmd=true", "--agent-env", "KSI_TEST_TOKEN",
        "--environment", "sandbox", env={"KSI_TEST_TOKEN": "x"},
    )  # fmt: skip
    assert "warning" not in sandboxed


def test_the_warning_names_the_declared_credentials_set_on_the_host() -> None:
    claude = ClaudeCodeAgent()
    host = {"ANTHROPIC_API_KEY": "k", "AWS_SECRET_ACCESS_KEY": "a", "PATH": "/bin"}
    warning = credential_warning(
        LocalEnvironment(), claude, model=None, agent_env=[], host_env=host
    )
    assert warning is not None and "the ANTHROPIC_API_KEY it is given" in warning
    assert "AWS_SECRET_ACCESS_KEY" not in warning  # not Claude Code's without Bedrock
    none = credential_warning(LocalEnvironment(), claude, model=None, agent_env=[], host_env={})
    assert none is None
    nop = credential_warning(
        LocalEnvironment(), NopAgent(), model=None, agent_env=[], host_env=host
    )
    assert nop is None
    off_local = credential_warning(
        SandboxEnvironment(), claude, model=None, agent_env=[], host_env=host
    )
    assert off_local is None


def test_what_the_warning_says_is_true_an_agent_on_local_reads_ksis_environment(
    tmp_path: Path,
) -> None:
    """The documented limit, shown: the scrub cannot hide KSI's own environment on local."""
    secret = f"ghp_planted_{uuid.uuid4().hex}"
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p"}])
    run_dir = tmp_path / "run"
    res = ksi(
        "run", str(tasks), "--agent", "command", "--wipe-workspace-per-task", "false",
        "--agent-option",
        'cmd=echo "scrubbed:[$GITHUB_TOKEN]" > repo/leak.txt; '
        "tr '\\000' '\\n' < /proc/$PPID/environ | grep ^GITHUB_TOKEN= >> repo/leak.txt",
        "--run-dir", str(run_dir), env={"GITHUB_TOKEN": secret},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    leak = next(run_dir.rglob("leak.txt")).read_text().splitlines()
    assert leak == ["scrubbed:[]", f"GITHUB_TOKEN={secret}"]

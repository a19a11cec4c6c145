"""End-to-end runs of real agent CLIs through ``ksi run``, against the mock model server.

The CLIs come from ``.ci/install-agent-clis.sh`` (pinned in
``ksi/agents/tested_versions.py``) in ``$KSI_AGENT_CLIS_DIR/bin`` (default
``/opt/ksi-agent-clis/bin``). A test whose CLI is missing skips with the
reason, unless ``KSI_REQUIRE_AGENT_CLIS=1`` (set by ``.ci/run``) makes it fail.

:func:`ksi_run_with_mock` runs ``ksi run`` under ``mockmodel.launch``: the mock
starts next to the run and ``{mock_url}`` in the arguments and environment
becomes its URL. With ``netns=True`` (the default where ``unshare -n`` works,
i.e. as root) both share a fresh network namespace holding only loopback, so
the test also proves nothing the CLI does leaves the machine.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from mockmodel import EXHAUSTED, MockUsage, Request, Served, Step
from mockmodel.launch import LaunchLog, LaunchSpec

from ksi.agents.tested_versions import tested_cli

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
CLIS_DIR = Path(os.environ.get("KSI_AGENT_CLIS_DIR", "/opt/ksi-agent-clis"))

#: A one-file task: the agent must create hello.txt holding "hello".
HELLO_TASK = {
    "task_id": "hello",
    "prompt": "Create a file hello.txt in the repository containing the single line: hello",
    "files": {"README.md": "A repository that needs a hello.txt.\n"},
    "eval": {"command": 'test "$(cat hello.txt)" = hello', "timeout_sec": 30},
}
#: The shell command the mock's tool call runs (the agent's cwd is the workspace, repo/ inside).
WRITE_HELLO = "printf 'hello\\n' > repo/hello.txt"
#: The same, printing the file after: an output the trajectory must show.
WRITE_AND_SHOW_HELLO = WRITE_HELLO + " && cat repo/hello.txt"


def cli_bin_dir(agent: str) -> Path:
    """The directory holding ``agent``'s real CLI; skip (or fail in CI) when it is missing."""
    entry = tested_cli(agent)
    assert entry is not None, f"{agent} is not in ksi/agents/tested_versions.py"
    if (CLIS_DIR / "bin" / entry.binary).exists():
        return CLIS_DIR / "bin"
    found = shutil.which(entry.binary)
    if found:
        return Path(found).parent
    reason = (
        f"the real {entry.binary} CLI ({entry.package} {entry.version}) is not installed: "
        f"run .ci/install-agent-clis.sh {agent}"
    )
    if os.environ.get("KSI_REQUIRE_AGENT_CLIS") == "1":
        pytest.fail(reason + " (KSI_REQUIRE_AGENT_CLIS=1)")
    pytest.skip(reason)


def free_port() -> int:
    """A port free on 127.0.0.1 now (for a mock that must keep its URL across runs)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def netns_available() -> bool:
    """Whether ``unshare -n`` can make a network namespace here (root, util-linux)."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return probe.returncode == 0


@attrs.frozen
class MockRun:
    """One finished ``ksi run`` and what the mock saw."""

    proc: subprocess.CompletedProcess[str]
    run_dir: Path
    log: LaunchLog

    @property
    def records(self) -> list[dict[str, Any]]:
        journal = self.run_dir / "journal.jsonl"
        if not journal.exists():
            return []
        return [json.loads(x) for x in journal.read_text().splitlines() if x.strip()]

    @property
    def record(self) -> dict[str, Any]:
        """The journal record of the run's only attempt."""
        recs = self.records
        assert len(recs) == 1, f"expected one attempt record, got {len(recs)}: {self.describe()}"
        return recs[0]

    @property
    def served(self) -> tuple[Served, ...]:
        return self.log.served

    @property
    def requests(self) -> tuple[Request, ...]:
        return self.log.requests

    def served_requests(self) -> list[Request]:
        """The requests that were model calls (not token counts or other side calls)."""
        return [s.request for s in self.served]

    def served_usage(self) -> MockUsage:
        total = MockUsage()
        for s in self.served:
            usage = getattr(s.step, "usage", None)
            if usage is not None:
                total = total + usage
        return total

    def attempt_file(self, name: str) -> Path:
        return self.run_dir / self.record["attempt_dir"] / name

    def attempt_log(self, name: str) -> str:
        """A log of the attempt as text; a stream that printed nothing leaves no file, which
        reads as empty (the capture contract in docs/capture.md)."""
        path = self.attempt_file(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def trajectory(self) -> dict[str, Any]:
        """The attempt's ``trajectory.json`` (ATIF) as written."""
        path = self.attempt_file("trajectory.json")
        assert path.is_file(), f"no trajectory.json: {self.describe()}"
        doc: dict[str, Any] = json.loads(path.read_text())
        return doc

    def describe(self) -> str:
        """Everything worth seeing when an assertion fails."""
        parts = [f"exit {self.proc.returncode}", "stdout:", self.proc.stdout[-3000:]]
        parts += ["stderr:", self.proc.stderr[-3000:]]
        for rec in self.records:
            parts.append(json.dumps({k: rec.get(k) for k in ("status", "agent_status", "error")}))
            adir = self.run_dir / rec["attempt_dir"]
            for log in ("agent.stdout.log", "agent.stderr.log"):
                if (adir / log).exists():
                    parts += [f"{log}:", (adir / log).read_text(errors="replace")[-3000:]]
        parts.append(
            f"mock served {len(self.served)} calls: {[type(s.step).__name__ for s in self.served]}"
        )
        return "\n".join(parts)


def _atif_tokens(metrics: Mapping[str, Any], prefix: str = "") -> tuple[int, int, int, int]:
    """(uncached input, output, cache read, cache write) from ATIF metrics (KSI's meaning)."""
    written = (metrics.get("extra") or {}).get("cache_write_tokens", 0)
    cached = metrics.get(f"{prefix}cached_tokens", 0)
    return (
        metrics.get(f"{prefix}prompt_tokens", 0) - cached - written,
        metrics.get(f"{prefix}completion_tokens", 0),
        cached,
        written,
    )


def check_trajectory(
    run: MockRun,
    harbor: Any,
    *,
    call: tuple[str, Mapping[str, Any]] | None,
    output: str,
) -> dict[str, Any]:
    """The attempt's trajectory, checked against what the mock scripted and what KSI journalled.

    Harbor's validator accepts it; step 1 is the prompt; the scripted tool ``call``
    (name, arguments) is an agent step's call, with ``output`` in the result that
    answers it (``call=None``: in a result of any step, for a CLI without tool
    calls); the steps' usage adds up to the record's, and so do the final metrics.
    """
    harbor.check(run.attempt_file("trajectory.json"))
    doc = run.trajectory()
    steps = doc["steps"]
    assert steps[0]["source"] == "user" and "hello.txt" in steps[0]["message"]
    results = [r for s in steps for r in (s.get("observation") or {}).get("results", [])]
    if call is not None:
        name, arguments = call
        calls = [c for s in steps for c in s.get("tool_calls", [])]
        found = [c for c in calls if c["function_name"] == name and c["arguments"] == arguments]
        assert found, f"no {name}{arguments} among {calls}"
        results = [r for r in results if r.get("source_call_id") == found[0]["tool_call_id"]]
    assert any(output in r.get("content", "") for r in results), (output, results)
    usage = run.record["usage"]
    want = (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["cache_read_tokens"],
        usage["cache_write_tokens"],
    )
    per_step = [_atif_tokens(s["metrics"]) for s in steps if "metrics" in s]
    assert per_step, "no step carries usage"
    assert tuple(map(sum, zip(*per_step, strict=True))) == want
    assert _atif_tokens(doc["final_metrics"], "total_") == want
    assert doc["final_metrics"].get("total_cost_usd") == usage["cost_usd"]
    return doc


def ksi_run_with_mock(
    tmp_path: Path,
    *,
    agent: str,
    script: Sequence[Step],
    cli: str | None = None,
    env: Mapping[str, str],
    then: Step = EXHAUSTED,
    agent_options: Sequence[str] = (),
    args: Sequence[str] = (),
    environment: str = "local",
    model: str | None = None,
    tasks: Sequence[Mapping[str, Any]] = (HELLO_TASK,),
    netns: bool | None = None,
    port: int = 0,
    timeout: float = 240,
    ksi: Sequence[str] = (),
) -> MockRun:
    """``ksi run`` of ``tasks`` with the real CLI of ``agent`` and a mock serving ``script``.

    ``env`` holds the key variables the user would export (``{mock_url}`` allowed);
    ``agent_options`` get ``base_url={mock_url}`` unless they name a base_url (or
    ``endpoints``, for agents that reach the model another way, ``acp``). ``cli``
    names the agent whose real CLI the run needs when it is not the task agent (the
    ``agent`` distiller's): the task agent then gets no base_url. Calls
    with the same ``tmp_path`` resume the same run; give them one ``port`` (see
    :func:`free_port`) so the base_url, a key option of the run, stays the same.
    ``ksi`` replaces the command that starts KSI (``python -m ksi``), e.g. to run
    it as another user; the mock still runs as the caller.
    """
    bin_dir = cli_bin_dir(cli or agent)
    if netns is None:
        netns = netns_available()
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    run_dir = tmp_path / "run"
    spec_file, log_file = tmp_path / "mock-script.pickle", tmp_path / "mock-log.pickle"
    spec_file.write_bytes(pickle.dumps(LaunchSpec(tuple(script), then, port)))
    options = list(agent_options)
    if cli in (None, agent) and not any(o.startswith(("base_url=", "endpoints=")) for o in options):
        options.append("base_url={mock_url}")
    command = [*(ksi or (sys.executable, "-m", "ksi")), "run", str(tasks_file), "--agent", agent]
    command += ["--run-dir", str(run_dir), "--environment", environment]
    for o in options:
        command += ["--agent-option", o]
    if model:
        command += ["--model", model]
    command += list(args)
    launcher = [sys.executable, "-m", "mockmodel.launch", str(spec_file), str(log_file), "--"]
    full = (["unshare", "-n"] if netns else []) + launcher + command
    base_env = {
        k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))
    }
    run_env = {
        **base_env,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        **env,
    }
    proc = subprocess.run(
        full, env=run_env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path
    )
    assert log_file.exists(), f"the mock launcher left no log: {proc.stderr[-3000:]}"
    log: LaunchLog = pickle.loads(log_file.read_bytes())
    if netns:
        assert log.interfaces == ("lo",), f"not an isolated namespace: {log.interfaces}"
    return MockRun(proc, run_dir, log)

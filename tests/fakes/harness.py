"""Run a real KSI agent plugin against a fake CLI, the way the runner does.

The fake directory goes first on PATH; the agent's environment is built by
:func:`ksi.attempt.envscrub.scrubbed_env` from a synthetic host
environment; the process runs through the real ``local`` environment; the
outcome is read back by the agent. ``FAKE_SCENARIO``/``FAKE_RECORD`` reach
the fake as ``--agent-env`` passthrough variables would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs

from ksi.attempt.envscrub import agent_optional_env, scrubbed_env
from ksi.environments.local import LocalEnvironment
from ksi.interfaces import AgentContext, AgentOutcome, AttemptContext, Invocation
from ksi.models import TaskSpec

FAKES = Path(__file__).resolve().parent


@attrs.frozen
class Run:
    outcome: AgentOutcome
    invocation: Invocation
    #: What the fake recorded: argv, stdin, cwd, env (+ per-CLI extras); {} if it never ran.
    record: dict[str, Any]
    ctx: AgentContext


def run_agent(
    agent: Any,
    tmp_path: Path,
    *,
    scenario: str = "success",
    prompt: str = "Make repo/hello.py print hi.",
    model: str | None = None,
    host_env: dict[str, str] | None = None,
    timeout: float | None = 60,
    isolated: bool = False,
) -> Run:
    workspace = tmp_path / "ws"
    (workspace / "repo").mkdir(parents=True, exist_ok=True)
    attempt_dir = tmp_path / "attempt"
    attempt_dir.mkdir(exist_ok=True)
    record_path = tmp_path / "record.json"
    record_path.unlink(missing_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    task = TaskSpec(id="t1", prompt=prompt)
    ctx = AgentContext(
        task=task,
        prompt=prompt,
        attempt=1,
        attempt_dir=attempt_dir,
        workspace_path=str(workspace),
        repo_path=str(workspace / "repo"),
        host_workspace=workspace,
        model=model,
        isolated=isolated,
    )
    host = {
        "PATH": f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "FAKE_SCENARIO": scenario,
        "FAKE_RECORD": str(record_path),
        **(host_env or {}),
    }
    base_env = scrubbed_env(
        required=agent.required_env,
        optional=agent_optional_env(agent, model, host),
        passthrough=["FAKE_SCENARIO", "FAKE_RECORD"],
        host_env=host,
    )
    agent.setup(ctx)
    invocation = agent.invocation(ctx)
    assert invocation is not None
    handle = LocalEnvironment().start(
        AttemptContext(
            run_id="r1",
            task=task,
            attempt=1,
            attempt_dir=attempt_dir,
            host_workspace=workspace,
            base_env=base_env,
        )
    )
    try:
        result = handle.exec(
            invocation,
            timeout=timeout,
            stdout_path=attempt_dir / "agent.stdout.log",
            stderr_path=attempt_dir / "agent.stderr.log",
            log_cap_bytes=10 * 1024 * 1024,
        )
    finally:
        handle.stop()
    outcome = agent.outcome(ctx, result)
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    return Run(outcome, invocation, record, ctx)


def make(cls: Any, **options: str) -> Any:
    """Instantiate an agent class the way ``--agent-option`` does."""
    from ksi.options import create_component

    return create_component(cls, options, kind="agent", option_flag="--agent-option")

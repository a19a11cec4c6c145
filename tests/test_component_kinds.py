"""The component kinds (``ksi.kinds``), and components that leave their optional members out.

A component need not subclass its kind's base class in ``ksi.interfaces``:
one that has only a name and the required methods runs with the base class's
defaults, as one that subclasses it does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ksi
from ksi import hookspecs
from ksi.errors import UserInputError
from ksi.interfaces import AgentContext, AgentOutcome, ExecResult, Invocation
from ksi.kinds import AGENT, KINDS
from ksi.models import EvalResult, TaskSpec
from ksi.plugins import registry
from tests.run_helpers import journal_lines, write_tasks

ROOT = Path(__file__).resolve().parent.parent

HELLO_TASK = {
    "task_id": "hello",
    "prompt": "Create hello.txt containing hi.",
    "files": {"README.md": "start\n"},
    "solution": {"command": "echo hi > hello.txt"},
}


class BareAgent:
    """A name and the three required methods: no env lists, no checks, no ``base_url``."""

    name = "bare-agent"

    def setup(self, ctx: AgentContext) -> None:
        pass

    def invocation(self, ctx: AgentContext) -> Invocation | None:
        return Invocation(argv=("sh", "-c", "echo hi > repo/hello.txt"))

    def outcome(self, ctx: AgentContext, result: ExecResult | None) -> AgentOutcome:
        return AgentOutcome()


class BareGrader:
    """A name and ``grade``: no ``grades_in``, no ``for_host_grading``, no description."""

    name = "bare-grader"

    def grade(self, task: TaskSpec, workdir: Path, **_: Any) -> EvalResult:
        answer = Path(workdir) / "hello.txt"
        said = answer.read_text().strip() if answer.is_file() else ""
        return EvalResult(status="scored", native_score=1.0 if said == "hi" else 0.0)


def test_components_without_optional_members_run_with_the_defaults(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [HELLO_TASK])
    summary = ksi.run(tasks, agent=BareAgent(), evaluator=BareGrader(), run_dir=tmp_path / "run")
    assert summary.solved_tasks == 1
    [record] = journal_lines(tmp_path / "run")
    assert (record["agent"], record["evaluator"]) == ("bare-agent", "bare-grader")


def test_eval_env_is_refused_for_an_evaluator_that_takes_no_host_variables(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [HELLO_TASK])
    with pytest.raises(UserInputError, match="evaluator 'bare-grader' does not take host"):
        ksi.run(
            tasks,
            agent=BareAgent(),
            evaluator=BareGrader(),
            eval_env=["HOME"],
            run_dir=tmp_path / "run",
        )
    assert not (tmp_path / "run").exists(), "refused before the run directory is made"


def test_a_component_missing_a_required_method_is_refused_naming_the_protocol(
    tmp_path: Path,
) -> None:
    class NoOutcome(BareAgent):
        outcome = None  # type: ignore[assignment]

    tasks = write_tasks(tmp_path / "tasks.jsonl", [HELLO_TASK])
    with pytest.raises(UserInputError, match=r"lacks outcome; see ksi.interfaces.Agent"):
        ksi.run(tasks, agent=NoOutcome(), run_dir=tmp_path / "run")


def test_every_registration_hook_is_one_component_kind() -> None:
    hooks = {n for n in vars(hookspecs) if n.startswith("ksi_register_")}
    assert sorted(k.hook_name for k in KINDS) == sorted(hooks - {"ksi_register_commands"})
    assert registry(AGENT) is registry("agent"), "a kind and its name are one registry"


def test_docs_table_of_kinds_is_what_ksi_kinds_says() -> None:
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    for kind in KINDS:
        required = ", ".join(f"`{m}()`" for m in kind.required_methods())
        optional = ", ".join(
            f"`{name}()`" if callable(default) else f"`{name} = {default!r}`"
            for name, default in kind.optional_members.items()
        )
        row = (
            f"| {kind.name} | `{kind.hook_name}` | `{kind.protocol_name}`: {required} | "
            f"`{kind.base_name}`: {optional} | `{kind.option_flag}` |"
        )
        assert row in text, f"docs/plugins.md lacks, or has another row for, {kind.name}:\n{row}"

"""The ``polyglot`` evaluator: the exercise's own tests decide, as in Aider's benchmark.

It is KSI's ``command`` evaluator (same host process, scrubbed environment,
sandbox isolation, ``--eval-in environment`` through the language's image)
with the benchmark's rules around it:

1. the graded copy is rebuilt as Aider's benchmark has it: the exercise from
   the checkout (tests, build files) with only the agent's solution files in
   it (:mod:`ksi_polyglot.graded_tree`), and the tests the exercise skips
   turned on (JavaScript ``xtest``, Java ``@Disabled``), as Aider does;
2. JavaScript on the host: a ``node_modules`` for the exercise's
   ``package.json`` is installed once per set of dependencies (under
   ``npm_dir``) and linked in, as Aider's ``npm-test.sh`` links its own;
3. the language's test command runs (:mod:`ksi_polyglot.languages`): exit 0
   passes (1.0), anything else fails (0.0). Tests that run past the timeout
   fail too (0.0), as in Aider's benchmark, where a hanging solution is a
   wrong one. A ``score.json`` is ignored: the tests' exit status alone
   counts. A missing toolchain is unscored (``no_toolchain``).

``tries=2`` is Aider's second try: when the first try fails, the agent gets
the test output and another go in the same workspace (see
:meth:`PolyglotEvaluator.feedback`; KSI's runner drives the rounds).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs

from ksi.eval.command import CommandEvaluator
from ksi.interfaces import EnvironmentHandle
from ksi.models import EvalResult, EvalStatus, TaskSpec
from ksi_polyglot.graded_tree import rebuild
from ksi_polyglot.languages import LANGUAGES, NO_TOOLCHAIN_EXIT
from ksi_polyglot.npm import NpmError, default_npm_dir, node_modules_for

#: The most test output a second-try prompt carries (its end is kept).
FEEDBACK_MAX_CHARS = 20_000


def _tries(_inst: object, _attribute: attrs.Attribute[Any], value: int) -> None:
    if not 1 <= value <= 10:
        raise ValueError(
            f"tries must be between 1 and 10 (Aider's benchmark uses 2), got {value!r}"
        )


def clean_output(text: str, workdir: Path, exercise: str) -> str:
    """Test output as the agent is shown it: no timings, the exercise's name for its path."""
    text = re.sub(r"\bin \d+\.\d+s\b", "", text)
    return text.replace(str(workdir), exercise)


@attrs.frozen
class PolyglotEvaluator(CommandEvaluator):
    """Runs the exercise's tests (restored, skips turned on); exit 0 passes."""

    name: ClassVar[str] = "polyglot"
    aliases: ClassVar[tuple[str, ...]] = ("aider-polyglot",)
    description: ClassVar[str] = (
        "Aider's polyglot rules: restore the exercise's tests, run the language's test "
        "command (pytest, npm test, go test, cargo test, cmake/make/ctest, gradle test); "
        "pass 1.0, fail or hang 0.0; tries=2 for Aider's second try"
    )
    grades_in: ClassVar[Literal["host", "environment"]] = "host"

    #: Aider's ``--tries``: 2 lets the agent try again after seeing the failing tests' output.
    tries: int = attrs.field(default=1, converter=int, validator=_tries)
    #: Where JavaScript exercises' node_modules are installed on the host (one per set of
    #: dependencies); default ``$KSI_POLYGLOT_NPM_DIR`` or ``/var/tmp/ksi-polyglot-npm``.
    npm_dir: str = ""
    #: As in Aider's benchmark, the tests' exit status alone counts: a score.json (which
    #: the solution's own code could write while the tests import it) is ignored.
    score_json: bool = False

    @property
    def rounds(self) -> int:
        """How many times the agent works on one attempt (KSI's runner reads this)."""
        return self.tries

    def grade(
        self,
        task: TaskSpec,
        workdir: Path,
        *,
        env: EnvironmentHandle | None = None,
        log_dir: Path | None = None,
    ) -> EvalResult:
        poly: dict[str, Any] = task.metadata.get("polyglot") or {}
        language = LANGUAGES.get(str(poly.get("language")))
        if language is None:
            return EvalResult(
                "no_eval",
                None,
                notes=(f"task {task.id!r} is not a polyglot exercise (no metadata['polyglot'])",),
            )
        workdir = Path(workdir)
        exercise_dir = Path(str(poly.get("exercise_dir", "")))
        if not (exercise_dir / ".meta" / "config.json").is_file():
            return EvalResult(
                "eval_error",
                None,
                eval_workdir=str(workdir),
                notes=(f"the exercise {str(exercise_dir)!r} is gone from the checkout; unscored",),
            )
        tree = rebuild(
            workdir,
            exercise_dir,
            poly.get("solution_files") or (),
            poly.get("test_files") or (),
            language.unskip,
        )
        if env is None and language.name == "javascript":
            try:
                self._link_node_modules(exercise_dir, workdir)
            except NpmError as exc:
                return EvalResult(
                    "no_toolchain",
                    None,
                    eval_workdir=str(workdir),
                    notes=(f"javascript tests need node_modules: {exc}",),
                )
        result = super().grade(task, workdir, env=env, log_dir=log_dir)
        notes = list(result.notes)
        if tree.left_out_count:
            more = tree.left_out_count - len(tree.left_out)
            notes.append(
                "not graded (only the solution files come from the agent, as in Aider's "
                f"benchmark): {', '.join(tree.left_out)}" + (f" and {more} more" if more else "")
            )
        details = {
            **result.details,
            "language": language.name,
            "from_agent": list(tree.from_agent),
            "left_out": list(tree.left_out),
        }
        if result.exit_code == NO_TOOLCHAIN_EXIT:
            return attrs.evolve(
                result,
                status="no_toolchain",
                native_score=None,
                notes=(*notes, result.stdout_tail.strip()[-300:]),
                details=details,
            )
        if result.status == EvalStatus.TIMEOUT:
            # Aider counts tests that time out as failed: a hanging solution is a wrong one.
            return attrs.evolve(
                result,
                status="tests_timed_out",
                native_score=0.0,
                notes=tuple(notes),
                details=details,
            )
        return attrs.evolve(result, notes=tuple(notes), details=details)

    def _link_node_modules(self, exercise_dir: Path, workdir: Path) -> None:
        """``workdir/node_modules`` -> the shared install for the exercise's package.json
        (the checkout's: what the agent wrote is never installed)."""
        target = node_modules_for(
            exercise_dir / "package.json", Path(self.npm_dir or default_npm_dir())
        )
        (workdir / "node_modules").symlink_to(target, target_is_directory=True)

    def feedback(self, task: TaskSpec, result: EvalResult) -> str | None:
        """The prompt of the next try: the failing test output, then what to do (Aider's)."""
        if result.native_score is None or result.native_score >= 1.0:
            return None
        poly: dict[str, Any] = task.metadata.get("polyglot") or {}
        log = result.details.get("stdout_log")
        try:
            output = Path(str(log)).read_text(encoding="utf-8", errors="replace") if log else ""
        except OSError:
            output = ""
        output = output or result.stdout_tail
        output = clean_output(output, Path(result.eval_workdir), str(poly.get("exercise", "")))
        if len(output) > FEEDBACK_MAX_CHARS:
            output = "[... earlier output cut ...]\n" + output[-FEEDBACK_MAX_CHARS:]
        files = " ".join(poly.get("solution_files") or ())
        return (
            f"{output.rstrip()}\n\n####\n\n"
            "The tests failed; their output is above.\n"
            "The tests are correct: do not change them.\n"
            f"Fix the code in {files} so that they pass.\n"
        )

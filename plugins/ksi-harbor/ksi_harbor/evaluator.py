"""The ``harbor`` evaluator: run the task's ``tests/test.sh`` in the attempt's container.

After the agent finishes and before the environment is torn down, as Harbor's
verifier does:

1. ``/tests`` and ``/logs/verifier`` are emptied, so nothing the agent left
   there (a planted reward, a fake test) counts;
2. the task's ``tests/`` (which the agent never saw) is copied to ``/tests``;
3. ``bash /tests/test.sh`` runs in the task's working directory with
   ``[verifier].env``, under ``[verifier].timeout_sec``;
4. ``/logs/verifier`` is copied out to the attempt's eval log directory and
   the reward is read from it.

Scoring:

* ``reward.txt``: one number in [0, 1] is the score;
* ``reward.json``: a flat JSON object of numbers (Harbor's multi-reward form).
  The score is the ``"reward"`` key when present, else the only key, else the
  mean of all values; every key is kept in ``details["rewards"]``;
* both files: ``reward.txt`` wins (as in Harbor), ``reward.json`` is still kept;
* no reward file: unscored, status ``no_reward``; a reward that is not a number
  in [0, 1]: unscored, status ``bad_reward``; verifier timeout: unscored,
  status ``timeout``. The exit code of ``test.sh`` is recorded but does not
  decide the score: the reward file does, as in Harbor.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs

from ksi.interfaces import EnvironmentHandle, ExecResult, Invocation
from ksi.models import EvalResult, TaskSpec

TESTS_IN_ENV = "/tests"
VERIFIER_LOGS_IN_ENV = "/logs/verifier"
LOG_CAP_BYTES = 8 * 1024 * 1024
TAIL_CHARS = 4000


class RewardError(ValueError):
    """A reward file exists but does not hold a usable reward."""


def _as_reward(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RewardError(f"{where}: expected a number, got {value!r}")
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise RewardError(f"{where}: {number!r} is outside [0, 1]")
    return number


def read_reward_txt(path: Path) -> float:
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    try:
        value = float(text)
    except ValueError:
        raise RewardError(f"reward.txt: expected one number, got {text[:80]!r}") from None
    return _as_reward(value, "reward.txt")


def read_reward_json(path: Path) -> tuple[float, dict[str, float], str]:
    """(score, every reward, which key or rule gave the score)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise RewardError(f"reward.json: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise RewardError(
            f'reward.json: expected a non-empty object such as {{"reward": 1.0}}, got {data!r}'
        )
    rewards = {str(k): _as_reward(v, f"reward.json: {k!r}") for k, v in data.items()}
    if "reward" in rewards:
        return rewards["reward"], rewards, "reward"
    if len(rewards) == 1:
        key = next(iter(rewards))
        return rewards[key], rewards, key
    return sum(rewards.values()) / len(rewards), rewards, "mean"


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-TAIL_CHARS:].decode("utf-8", errors="replace")


@attrs.define
class HarborEvaluator:
    """Runs a Harbor task's tests/test.sh inside the attempt's environment and reads its reward."""

    name: ClassVar[str] = "harbor"
    aliases: ClassVar[tuple[str, ...]] = ("harbor-verifier",)
    description: ClassVar[str] = (
        "Harbor verifier: copies tests/ to /tests, runs bash /tests/test.sh in the container, "
        "scores /logs/verifier/reward.txt or reward.json"
    )
    grades_in: ClassVar[Literal["host", "environment"]] = "environment"

    #: Override every task's [verifier].timeout_sec (seconds).
    timeout_sec: float | None = None

    def grade(
        self,
        task: TaskSpec,
        workdir: Path,
        *,
        env: EnvironmentHandle | None = None,
        log_dir: Path | None = None,
    ) -> EvalResult:
        harbor = task.metadata.get("harbor") or {}
        tests_dir = Path(str(harbor.get("tests_dir", "")))
        if env is None:
            return EvalResult(
                status="no_environment",
                native_score=None,
                notes=(
                    "the harbor evaluator grades inside the attempt's environment; none was given",
                ),
            )
        if not harbor or not (tests_dir / "test.sh").is_file():
            return EvalResult(
                status="no_tests",
                native_score=None,
                notes=(f"task {task.id!r} has no Harbor tests/test.sh (is it a harbor task?)",),
            )
        cleanup: Path | None = None
        if log_dir is None:
            log_dir = cleanup = Path(tempfile.mkdtemp(prefix="ksi-harbor-eval-"))
        try:
            return self._grade(task, tests_dir, env, log_dir, harbor)
        finally:
            if cleanup is not None:
                shutil.rmtree(cleanup, ignore_errors=True)

    def _grade(
        self,
        task: TaskSpec,
        tests_dir: Path,
        env: EnvironmentHandle,
        log_dir: Path,
        harbor: dict[str, Any],
    ) -> EvalResult:
        log_dir.mkdir(parents=True, exist_ok=True)
        workdir = task.runtime.workdir or "."
        timeout = self.timeout_sec or task.eval.timeout_sec

        # 1. Nothing the agent left in /tests or /logs/verifier may count.
        prep = env.exec(
            Invocation(
                argv=(
                    "sh",
                    "-c",
                    f"rm -rf {TESTS_IN_ENV} {VERIFIER_LOGS_IN_ENV} && "
                    f"mkdir -p {VERIFIER_LOGS_IN_ENV} && chmod 777 {VERIFIER_LOGS_IN_ENV}",
                ),
                cwd=".",
            ),
            timeout=60.0,
            stdout_path=log_dir / "prepare-stdout.txt",
            stderr_path=log_dir / "prepare-stderr.txt",
            log_cap_bytes=LOG_CAP_BYTES,
        )
        if prep.exit_code != 0:
            return self._failed(
                "verifier_error",
                prep,
                log_dir,
                f"could not reset {TESTS_IN_ENV} and {VERIFIER_LOGS_IN_ENV} in the environment "
                f"(exit {prep.exit_code}{', ' + prep.spawn_error if prep.spawn_error else ''})",
            )

        # 2. Put the tests in place only now: the agent never saw them.
        env.copy_in(tests_dir, TESTS_IN_ENV)

        # 3. Run the verifier.
        stdout_path = log_dir / "test-stdout.txt"
        stderr_path = log_dir / "test-stderr.txt"
        result = env.exec(
            Invocation(
                argv=("bash", f"{TESTS_IN_ENV}/test.sh"),
                env=dict(harbor.get("verifier_env") or {}),
                cwd=str(workdir),
            ),
            timeout=timeout,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            log_cap_bytes=LOG_CAP_BYTES,
        )

        # 4. Bring the verifier's logs home, then score.
        verifier_dir = log_dir / "verifier"
        if verifier_dir.exists():
            shutil.rmtree(verifier_dir)
        copied = env.copy_out(VERIFIER_LOGS_IN_ENV, verifier_dir)
        base: dict[str, Any] = {
            "exit_code": result.exit_code,
            "stdout_tail": _tail(stdout_path),
            "stderr_tail": _tail(stderr_path),
            "eval_workdir": str(workdir),
            "duration_sec": result.duration_sec,
        }
        details: dict[str, Any] = {"verifier_logs": str(verifier_dir) if copied else None}
        if result.spawn_error:
            return EvalResult(
                status="spawn_error",
                native_score=None,
                notes=(f"bash {TESTS_IN_ENV}/test.sh could not start: {result.spawn_error}",),
                details=details,
                **base,
            )
        if result.timed_out:
            return EvalResult(
                status="timeout",
                native_score=None,
                notes=(f"tests/test.sh did not finish within {timeout:g}s",),
                details=details,
                **base,
            )
        txt = verifier_dir / "reward.txt"
        js = verifier_dir / "reward.json"
        notes: list[str] = []
        score: float | None = None
        try:
            if txt.is_file():
                score = read_reward_txt(txt)
                details["score_from"] = "reward.txt"
                if js.is_file():
                    notes.append(
                        "both reward.txt and reward.json exist; reward.txt gives the score"
                    )
                    try:
                        details["rewards"] = read_reward_json(js)[1]
                    except RewardError as exc:
                        notes.append(f"ignored: {exc}")
            elif js.is_file():
                score, details["rewards"], source = read_reward_json(js)
                details["score_from"] = f"reward.json:{source}"
        except RewardError as exc:
            return EvalResult(
                status="bad_reward", native_score=None, notes=(str(exc),), details=details, **base
            )
        if score is None:
            return EvalResult(
                status="no_reward",
                native_score=None,
                notes=(
                    f"tests/test.sh (exit {result.exit_code}) wrote neither "
                    f"{VERIFIER_LOGS_IN_ENV}/reward.txt nor reward.json",
                ),
                details=details,
                **base,
            )
        return EvalResult(
            status="scored", native_score=score, notes=tuple(notes), details=details, **base
        )

    @staticmethod
    def _failed(status: str, result: ExecResult, log_dir: Path, note: str) -> EvalResult:
        return EvalResult(
            status=status,
            native_score=None,
            exit_code=result.exit_code,
            stdout_tail=_tail(log_dir / "prepare-stdout.txt"),
            stderr_tail=_tail(log_dir / "prepare-stderr.txt"),
            duration_sec=result.duration_sec,
            notes=(note,),
        )

"""The ``harbor`` evaluator: run the task's ``tests/test.sh`` in the attempt's container.

After the agent finishes and before the environment is torn down, as Harbor's
verifier does:

1. every process the agent left running in the container is halted
   (:mod:`ksi_harbor.halt`), so nothing of the agent runs while grading;
2. ``/tests`` and ``/logs/verifier`` are emptied, so nothing the agent left
   there (a planted reward, a fake test) counts;
3. the task's ``tests/`` (which the agent never saw) is copied to ``/tests``;
4. ``bash /tests/test.sh`` runs in the task's working directory with
   ``[verifier].env``, under ``[verifier].timeout_sec``;
5. whatever test.sh (or code it ran) left running is halted the same way;
6. ``/logs/verifier`` is copied out to the attempt's eval log directory, every
   symlink, fifo or device in the copy is deleted (test.sh runs the agent's
   code, which may leave a link to a host path there), and the reward is read
   from it without following any link.

Scoring:

* ``reward.txt``: one number in [0, 1] is the score;
* ``reward.json``: a flat JSON object of numbers (Harbor's multi-reward form).
  The score is the ``"reward"`` key when present, else the only key, else the
  mean of all values; every key is kept in ``details["rewards"]``;
* both files: ``reward.txt`` wins (as in Harbor), ``reward.json`` is still kept;
* no reward file (or one that is not a regular file): unscored, status
  ``no_reward``; a reward that is not a number in [0, 1], or a file too large
  or too deeply nested to be one: unscored, status ``bad_reward``; verifier
  timeout: unscored, status ``timeout``. The exit code of ``test.sh`` is recorded but does not
  decide the score: the reward file does, as in Harbor.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs

from ksi.fstree import drop_links, open_file_inside, remove_tree
from ksi.interfaces import EnvironmentHandle, ExecResult, Invocation
from ksi.models import EvalResult, TaskSpec
from ksi.nesting import json_depth_problem
from ksi_harbor.halt import HALT_SCRIPT, NOT_A_CONTAINER, own_pid_namespace

TESTS_IN_ENV = "/tests"
VERIFIER_LOGS_IN_ENV = "/logs/verifier"
LOG_CAP_BYTES = 8 * 1024 * 1024
TAIL_CHARS = 4000
#: A reward file larger than this is not a reward (one number, or a small object of them).
MAX_REWARD_BYTES = 64 * 1024
#: How many paths dropped from the copied verifier logs a note names.
MAX_DROPPED_LISTED = 10


class RewardError(ValueError):
    """A reward file exists but does not hold a usable reward."""


def _as_reward(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RewardError(f"{where}: expected a number, got {value!r}")
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise RewardError(f"{where}: {number!r} is outside [0, 1]")
    return number


def reward_text(verifier_dir: Path, name: str) -> str | None:
    """The reward file ``name`` as test.sh left it; ``None`` when there is no regular file.

    Opened below ``verifier_dir`` without following any link, so a link the
    agent's code made (to a host path, once copied out) is no reward.
    """
    try:
        fd = open_file_inside(verifier_dir, name)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_REWARD_BYTES + 1)
    if len(data) > MAX_REWARD_BYTES:
        raise RewardError(f"{name}: over {MAX_REWARD_BYTES} bytes, too large to be a reward")
    return data.decode("utf-8", errors="replace")


def read_reward_txt(text: str) -> float:
    """The score in reward.txt's ``text``: one number in [0, 1]."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        raise RewardError(f"reward.txt: expected one number, got {text[:80]!r}") from None
    return _as_reward(value, "reward.txt")


def read_reward_json(text: str) -> tuple[float, dict[str, float], str]:
    """(score, every reward, which key or rule gave the score) from reward.json's ``text``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RewardError(f"reward.json: not valid JSON: {exc}") from None
    except RecursionError:
        deep = json_depth_problem(text)
        raise RewardError(f"reward.json: {deep.field}: {deep.message}") from None
    if not isinstance(data, dict) or not data:
        raise RewardError(
            f'reward.json: expected a non-empty object such as {{"reward": 1.0}}, got {data!r:.80}'
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
        halts: list[str] = []

        # 1. Nothing of the agent may run while it is graded.
        failed = self._halt(env, log_dir, "halt-before", "the agent left running", halts)
        if failed is not None:
            return failed

        # 2. Nothing the agent left in /tests or /logs/verifier may count.
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
                log_dir / "prepare",
                f"could not reset {TESTS_IN_ENV} and {VERIFIER_LOGS_IN_ENV} in the environment "
                f"(exit {prep.exit_code}{', ' + prep.spawn_error if prep.spawn_error else ''})",
            )

        # 3. Put the tests in place only now: the agent never saw them.
        env.copy_in(tests_dir, TESTS_IN_ENV)

        # 4. Run the verifier.
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

        # 5. Whatever test.sh (or the agent's code it ran) left running stops before the read.
        failed = self._halt(env, log_dir, "halt-after", "tests/test.sh left running", halts)
        if failed is not None:
            return failed

        # 6. Bring the verifier's logs home, keep only plain files and directories, then score.
        verifier_dir = log_dir / "verifier"
        remove_tree(verifier_dir)
        copied = env.copy_out(VERIFIER_LOGS_IN_ENV, verifier_dir)
        notes: list[str] = []
        if copied:
            notes += _keep_plain_files(verifier_dir)
        base: dict[str, Any] = {
            "exit_code": result.exit_code,
            "stdout_tail": _tail(stdout_path),
            "stderr_tail": _tail(stderr_path),
            "eval_workdir": str(workdir),
            "duration_sec": result.duration_sec,
        }
        details: dict[str, Any] = {
            "verifier_logs": str(verifier_dir) if verifier_dir.is_dir() else None
        }
        if result.spawn_error:
            return EvalResult(
                status="spawn_error",
                native_score=None,
                notes=(
                    f"bash {TESTS_IN_ENV}/test.sh could not start: {result.spawn_error}",
                    *notes,
                    *halts,
                ),
                details=details,
                **base,
            )
        if result.timed_out:
            return EvalResult(
                status="timeout",
                native_score=None,
                notes=(f"tests/test.sh did not finish within {timeout:g}s", *notes, *halts),
                details=details,
                **base,
            )
        score: float | None = None
        try:
            txt = reward_text(verifier_dir, "reward.txt")
            js = reward_text(verifier_dir, "reward.json")
            if txt is not None:
                score = read_reward_txt(txt)
                details["score_from"] = "reward.txt"
                if js is not None:
                    notes.insert(
                        0, "both reward.txt and reward.json exist; reward.txt gives the score"
                    )
                    try:
                        details["rewards"] = read_reward_json(js)[1]
                    except RewardError as exc:
                        notes.append(f"ignored: {exc}")
            elif js is not None:
                score, details["rewards"], source = read_reward_json(js)
                details["score_from"] = f"reward.json:{source}"
        except RewardError as exc:
            return EvalResult(
                status="bad_reward",
                native_score=None,
                notes=(str(exc), *notes, *halts),
                details=details,
                **base,
            )
        if score is None:
            return EvalResult(
                status="no_reward",
                native_score=None,
                notes=(
                    f"tests/test.sh (exit {result.exit_code}) wrote neither "
                    f"{VERIFIER_LOGS_IN_ENV}/reward.txt nor reward.json as a regular file",
                    *notes,
                    *halts,
                ),
                details=details,
                **base,
            )
        return EvalResult(
            status="scored",
            native_score=score,
            notes=(*notes, *halts),
            details=details,
            **base,
        )

    def _halt(
        self, env: EnvironmentHandle, log_dir: Path, stem: str, what: str, halts: list[str]
    ) -> EvalResult | None:
        """Halt every process ``what`` (:mod:`ksi_harbor.halt`); an unscored result if it fails.

        A note for ``halts`` says how many were halted, or that the
        environment is no container of its own, where nothing can be halted.
        """
        res = env.exec(
            Invocation(argv=("sh", "-c", HALT_SCRIPT, "ksi-halt", own_pid_namespace()), cwd="."),
            timeout=60.0,
            stdout_path=log_dir / f"{stem}-stdout.txt",
            stderr_path=log_dir / f"{stem}-stderr.txt",
            log_cap_bytes=LOG_CAP_BYTES,
        )
        if res.exit_code == NOT_A_CONTAINER:
            note = (
                f"processes {what} were not halted: the environment has no process "
                "namespace of its own (not a container), so they may still run"
            )
            if note not in halts:
                halts.append(note)
            return None
        count = _tail(log_dir / f"{stem}-stdout.txt").strip()
        if res.exit_code != 0 or not count.isdigit():
            return self._failed(
                "verifier_error",
                res,
                log_dir / stem,
                f"could not halt the processes {what} (exit {res.exit_code}"
                f"{', ' + res.spawn_error if res.spawn_error else ''}); not graded while they "
                "might still run",
            )
        if int(count):
            halts.append(f"halted {count} process(es) {what}")
        return None

    @staticmethod
    def _failed(status: str, result: ExecResult, logs: Path, note: str) -> EvalResult:
        """Unscored: a step before the verifier failed (``logs``: its log files' stem)."""
        return EvalResult(
            status=status,
            native_score=None,
            exit_code=result.exit_code,
            stdout_tail=_tail(logs.with_name(logs.name + "-stdout.txt")),
            stderr_tail=_tail(logs.with_name(logs.name + "-stderr.txt")),
            duration_sec=result.duration_sec,
            notes=(note,),
        )


def _keep_plain_files(verifier_dir: Path) -> list[str]:
    """Delete every link, fifo or device test.sh's run left in the copied logs; notes saying so.

    test.sh runs the agent's code, which may have made ``reward.txt`` (or
    ``/logs/verifier`` itself) a link: in the container it named a container
    path, copied out it names a host path. No reader of the attempt's logs
    may follow it, so it does not stay.
    """
    if verifier_dir.is_symlink() or not verifier_dir.is_dir():
        verifier_dir.unlink()
        return [f"{VERIFIER_LOGS_IN_ENV} was not a directory (a link?); it was not read"]
    dropped = drop_links(verifier_dir)
    if not dropped:
        return []
    shown = ", ".join(dropped[:MAX_DROPPED_LISTED])
    more = len(dropped) - MAX_DROPPED_LISTED
    return [
        f"deleted from the copied verifier logs, as no regular file: {shown}"
        + (f" and {more} more" if more > 0 else "")
    ]

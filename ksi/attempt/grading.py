"""Grading one attempt: where its ``repo/`` is graded, and on what copy.

The evaluator decides where grading happens (``Components.grades_in``):

* ``environment``: inside the attempt's environment, through its handle,
  before it is torn down (Harbor-format tasks grade the whole container);
* ``host`` (the ``command`` evaluator): after capture, on a fresh copy of
  ``captured/repo`` that is removed once graded; or in a fresh environment
  with ``--eval-in environment``; or the live ``repo/`` when the workspace is
  kept (``--wipe-workspace-per-task false``).

Between feedback rounds the live ``repo/`` is captured under the same rules
into ``rounds/<n>/captured/repo`` and graded as the final grade would be.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import attrs

from ksi.attempt.cancel import CancelToken
from ksi.attempt.capture import capture_repo, copy_tree, remove_tree
from ksi.attempt.clock import AttemptClock
from ksi.attempt.components import Components, component_name
from ksi.attempt.job import AttemptJob
from ksi.choices import EvalIn
from ksi.fstree import discard_tree
from ksi.interfaces import AttemptContext, EnvironmentHandle
from ksi.models import EvalResult
from ksi.protected_files import ProtectRule

log = logging.getLogger(__name__)


@attrs.frozen
class Grader:
    """Grades the work of one attempt (see the module docstring)."""

    job: AttemptJob
    #: The attempt directory: grading logs go to its ``eval/`` (or ``rounds/<n>/eval``).
    dir: Path
    components: Components
    token: CancelToken
    clock: AttemptClock

    def in_environment(self, repo: Path, handle: EnvironmentHandle) -> EvalResult:
        """The final grade, for evaluators that grade inside the attempt's environment."""
        t = time.monotonic()
        self.clock.step = f"grading with evaluator {component_name(self.components.evaluator)!r}"
        result = self.components.evaluator.grade(
            self.job.task, repo, env=handle, log_dir=self.dir / "eval"
        )
        self.clock.add_time("eval", t)
        return result

    def after_capture(self, live_repo: Path, captured: Path) -> EvalResult:
        """The final grade, once the agent's environment is gone: a fresh copy of the
        captured repo on the host (or in a fresh environment with ``--eval-in
        environment``), or the live repo when the workspace is kept."""
        t = time.monotonic()
        self.clock.step = f"grading with evaluator {component_name(self.components.evaluator)!r}"
        result = self._after_capture(live_repo, captured)
        self.clock.add_time("eval", t)
        return result

    def _after_capture(self, live_repo: Path, captured: Path) -> EvalResult:
        job, evaluator = self.job, self.components.evaluator
        log_dir = self.dir / "eval"
        if job.settings.eval_in == EvalIn.ENVIRONMENT:
            return self._in_fresh_environment(captured)
        if not job.settings.wipe_workspace:
            return evaluator.grade(job.task, live_repo, log_dir=log_dir)
        workdir = self.dir / "eval" / "repo"
        remove_tree(workdir)
        workdir.parent.mkdir(parents=True, exist_ok=True)
        copy_tree(captured, workdir)
        try:
            result = evaluator.grade(job.task, workdir, log_dir=log_dir)
        finally:
            discard_tree(workdir, job.trash_dir())  # gone now, deleted in the background
        return _graded_copy_removed(result, str(workdir), str(captured))

    def _in_fresh_environment(self, captured: Path) -> EvalResult:
        """``--eval-in environment``: grade a copy of the captured repo in a new environment.

        For tasks whose tests need the image's toolchain. The agent's own
        environment is already gone, so nothing it left running can touch
        the grading; the evaluator runs its command through the new handle.
        """
        job = self.job
        workspace = self.dir / "eval" / "workspace"
        remove_tree(workspace)
        workspace.mkdir(parents=True)
        copy_tree(captured, workspace / "repo")
        ctx = AttemptContext(
            run_id=job.run_id,
            task=job.task,
            # The attempt's own number: its agent container is gone by now, and
            # concurrent attempts of one task must not share a grading container.
            attempt=job.attempt,
            attempt_dir=self.dir / "eval",
            host_workspace=workspace,
            base_env=job.eval_env,
        )
        handle = self.components.environment.start(ctx)
        try:
            self.token.track(handle)
            return self.components.evaluator.grade(
                job.task, workspace / "repo", env=handle, log_dir=self.dir / "eval"
            )
        finally:
            handle.stop()
            self.token.untrack(handle)
            remove_tree(workspace)

    def between_rounds(self, handle: EnvironmentHandle, seed: Path, number: int) -> EvalResult:
        """Grade the live ``repo/`` between rounds: captured under the capture rules into
        ``rounds/<n>/captured/repo``, then graded as the attempt's final grade would be
        (a host copy, or through the live environment when grading happens there)."""
        job, cfg, t = self.job, self.job.settings, time.monotonic()
        self.clock.step = (
            f"grading round {number} with evaluator {component_name(self.components.evaluator)!r}"
        )
        repo = Path(handle.host_workspace) / "repo"
        round_dir = self.dir / "rounds" / str(number)
        log_dir = round_dir / "eval"
        captured = round_dir / "captured" / "repo"
        try:
            capture_repo(
                repo,
                seed,
                captured,
                max_file_bytes=cfg.capture_max_file_bytes,
                protect=ProtectRule(cfg.protect).plus(job.task.eval.protect),
            )
            if self.components.grades_in == "environment":
                return self.components.evaluator.grade(job.task, repo, env=handle, log_dir=log_dir)
            env = handle if cfg.eval_in == EvalIn.ENVIRONMENT else None
            # Inside the environment's workspace when the environment runs the grade.
            work = (repo.parent / f".ksi-round-{number}" if env else log_dir) / "repo"
            remove_tree(work)
            work.parent.mkdir(parents=True, exist_ok=True)
            copy_tree(captured, work)
            try:
                return self.components.evaluator.grade(job.task, work, env=env, log_dir=log_dir)
            finally:
                remove_tree(work.parent if env else work)
        finally:
            self.clock.add_time("eval", t)


def _graded_copy_removed(result: EvalResult, workdir: str, captured: str) -> EvalResult:
    """``result`` saying that its ``eval_workdir`` is gone.

    The copy graded on the host is removed once graded; ``captured/repo``
    holds the files it was made from. Said the way ``ksi grade`` and
    ``CommandEvaluator.evaluate`` say it: ``details["eval_workdir_removed"]``.
    That is housekeeping, not a reason for the score, so it goes to the log
    (``ksi -v``), never into ``notes``, which the summary shows as reasons.
    """
    if result.eval_workdir != workdir:
        return result
    log.info("%s (a copy of %s) was removed after grading", workdir, captured)
    details = {**result.details, "eval_workdir_removed": True}
    return attrs.evolve(result, details=details)

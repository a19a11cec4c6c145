"""Turning a planned try (or a forum session) into an :class:`~ksi.attempt.job.AttemptJob`.

What every job of a session shares (run and session ids, component specs,
settings, the scrubbed environments) is built once; a job is that with its
task, numbers and the notes its generation gets. A forum session is a job
too (:class:`ForumJobs`): the forum agent, the run's environment, no grading,
its own directory under ``forum/`` and its own session id (so a worker
resolves its components apart from the attempts').
"""

from __future__ import annotations

from pathlib import Path

import attrs

from ksi.attempt.components import Components
from ksi.attempt.envscrub import agent_optional_env, scrubbed_env
from ksi.attempt.job import (
    AttemptJob,
    AttemptSettings,
    ComponentSpec,
    ForumToolsJob,
    KnowledgeToolsJob,
)
from ksi.choices import KnowledgeTools
from ksi.generations.forum import ForumSessionPlan
from ksi.generations.run_store import store_path
from ksi.generations.steps import context_for, generation_of
from ksi.interfaces import Agent
from ksi.knowledge.render import IndexedNotes
from ksi.models import TaskSpec
from ksi.rundir.config import RunConfig


@attrs.frozen
class ComponentSpecs:
    """The three attempt components as a job carries them (names or objects, with options)."""

    agent: ComponentSpec
    environment: ComponentSpec
    evaluator: ComponentSpec


@attrs.frozen
class JobTemplate:
    """What every job of this session shares; :meth:`job` fills in one try."""

    base: AttemptJob
    attempts: int
    knowledge_budget_bytes: int
    #: The notes the current generation's attempts get (None: none).
    notes: IndexedNotes | None = None

    @classmethod
    def for_session(
        cls,
        config: RunConfig,
        *,
        specs: ComponentSpecs,
        components: Components,
        run_id: str,
        session_id: str,
        run_dir: Path,
    ) -> JobTemplate:
        cfg, agent = config, components.agent
        # Scrubbed once, here: the job carries the values, never the host environment.
        agent_env = scrubbed_env(
            required=agent.required_env,
            optional=agent_optional_env(agent, cfg.model),
            passthrough=cfg.agent_env,
        )
        run_tag = {"KSI_RUN_ID": run_id}  # lets cleanup find this run's processes
        eval_env = scrubbed_env(required=(), optional=(), passthrough=cfg.eval_env)
        base = AttemptJob(
            run_id=run_id,
            session_id=session_id,
            run_dir=str(run_dir),
            task=TaskSpec(id=""),
            attempt=0,
            try_number=0,
            agent=specs.agent,
            environment=specs.environment,
            evaluator=specs.evaluator,
            settings=AttemptSettings(
                model=cfg.model,
                timeout_sec=cfg.timeout_sec,
                log_cap_bytes=cfg.log_cap_bytes,
                capture_max_file_bytes=cfg.capture_max_file_bytes,
                protect=tuple(cfg.protect),
                wipe_workspace=cfg.wipe_workspace,
                eval_in=cfg.eval_in,
                eval_isolation=components.eval_isolation,
                eval_env=tuple(cfg.eval_env),
                evidence_budget_bytes=cfg.knowledge_budget_bytes,
            ),
            agent_env={**agent_env, **run_tag},
            eval_env={**eval_env, **run_tag},
            knowledge_tools=(
                KnowledgeToolsJob(
                    store=str(store_path(run_dir, cfg.knowledge_db)),
                    exclude_tasks=tuple(cfg.holdout_task_ids or ()),
                )
                if cfg.knowledge_tools == KnowledgeTools.ON
                else None
            ),
        )
        return cls(base, cfg.attempts, cfg.knowledge_budget_bytes)

    def with_notes(self, notes: IndexedNotes | None) -> JobTemplate:
        """The template of a generation whose attempts get ``notes``."""
        return attrs.evolve(self, notes=notes)

    def job(self, task: TaskSpec, attempt: int, try_number: int) -> AttemptJob:
        # Rendered per job, not per generation up front: 10,000 tasks' notes are not kept.
        files, ref = context_for(self.notes, task, self.knowledge_budget_bytes)
        return attrs.evolve(
            self.base,
            task=task,
            attempt=attempt,
            try_number=try_number,
            generation=generation_of(attempt, self.attempts),
            context_files=files,
            knowledge=ref,
        )


#: A forum session's suffix to the run session's id: its components are its own.
FORUM_SESSION_SUFFIX = "-forum"


@attrs.frozen
class ForumJobs:
    """What every forum session of a session shares; :meth:`job` fills in one session."""

    base: AttemptJob
    root: Path

    @classmethod
    def for_session(
        cls,
        config: RunConfig,
        attempts: JobTemplate,
        *,
        agent_spec: ComponentSpec,
        agent: Agent,
        evaluator: str,
        run_dir: Path,
    ) -> ForumJobs:
        model = config.forum_model or config.model
        agent_env = scrubbed_env(
            required=agent.required_env,
            optional=agent_optional_env(agent, model),
            passthrough=config.agent_env,
        )
        base = attrs.evolve(
            attempts.base,
            session_id=forum_session_id(attempts.base.session_id),
            agent=agent_spec,
            evaluator=ComponentSpec("evaluator", evaluator),
            settings=attrs.evolve(
                attempts.base.settings,
                model=model,
                # Posts are read from the captured repo/; nothing is graded.
                wipe_workspace=True,
                eval_in="host",
                eval_isolation="none",
                protect=(),
            ),
            agent_env={**agent_env, "KSI_RUN_ID": attempts.base.run_id},
        )
        return cls(base, run_dir)

    def job(self, session: ForumSessionPlan) -> AttemptJob:
        tools = self.base.knowledge_tools
        return attrs.evolve(
            self.base,
            run_dir=str(self.root / session.run_dir),
            task=session.task,
            attempt=1,
            try_number=0,
            generation=session.generation,
            # A forum session may look up its own generation's attempts: they are over.
            knowledge_tools=None
            if tools is None
            else attrs.evolve(tools, sees_own_generation=True),
            forum_tools=ForumToolsJob(
                session.seat.participant,
                str(self.root / session.live_dir) if session.live_dir else None,
            ),
        )


def forum_session_id(session_id: str) -> str:
    """The session id forum jobs of the driver session ``session_id`` carry."""
    return session_id + FORUM_SESSION_SUFFIX

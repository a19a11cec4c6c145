"""The run settings of docs/running.md's "Forum" table.

Who compares notes between a generation's attempts and its distillation, and how
long. One field per setting, its :class:`~ksi.rundir.run_option.RunOption` in its
metadata; :class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

from typing import Any

import attrs

from ksi.rundir.run_option import FORUM, KV, MATCH, OPTION, Form, RunOption


@attrs.define(slots=False, kw_only=True)
class ForumOptions:
    """The Forum settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    # The forum (docs/generations.md): who compares notes, and how long, is part of what a
    # generation learns from, so a resume must not change any of it.
    forum_rounds: int = attrs.field(
        default=0,
        metadata={
            OPTION: RunOption(
                ("--forum-rounds",),
                "Rounds of each task's forum between a generation's attempts and its "
                "distillation: agents holding its attempts' evidence compare notes (0: no forum).",
                FORUM,
                MATCH,
                metavar="N",
                minimum=0,
                doc="Between a generation's attempts and its distillation, agents holding its "
                "attempts' evidence compare notes in each task's room, N rounds (default 0: no "
                "forum).",
            )
        },
    )
    cross_task_forum_rounds: int = attrs.field(
        default=0,
        metadata={
            OPTION: RunOption(
                ("--cross-task-forum-rounds",),
                "Rounds of the cross-task room after the tasks' forums: one participant per "
                "task posts what transfers across tasks.",
                FORUM,
                MATCH,
                metavar="N",
                minimum=0,
            )
        },
    )
    #: None: one per scored attempt, at most 4.
    forum_participants: int | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--forum-participants",),
                "Participants per task's forum (default: one per scored attempt, at most 4).",
                FORUM,
                MATCH,
                metavar="N",
                minimum=1,
            )
        },
    )
    #: None: one per task.
    cross_task_forum_participants: int | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--cross-task-forum-participants",),
                "Participants of the cross-task room (default: one per task).",
                FORUM,
                MATCH,
                metavar="N",
                minimum=1,
            )
        },
    )
    #: None: the run's agent, with its options.
    forum_agent: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--forum-agent",),
                "The agent of forum sessions (default: --agent, with its options).",
                FORUM,
                MATCH,
                metavar="NAME",
                complete="agent",
            )
        },
    )
    forum_agent_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--forum-agent-option",),
                "An option of --forum-agent (repeatable).",
                FORUM,
                MATCH,
                Form.KEY_VALUES,
                metavar=KV,
            )
        },
    )
    #: None: the run's model.
    forum_model: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--forum-model",),
                "The model of forum sessions (default: --model).",
                FORUM,
                MATCH,
                metavar="NAME",
            )
        },
    )

    @property
    def forum(self) -> bool:
        """Whether generations have a forum (per task, cross-task, or both)."""
        return self.forum_rounds > 0 or self.cross_task_forum_rounds > 0

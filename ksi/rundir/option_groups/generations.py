"""The run settings of docs/running.md's "Generations" table.

Generations, their notes and the knowledge store. One field per setting, its
:class:`~ksi.rundir.run_option.RunOption` in its metadata;
:class:`~ksi.rundir.config.RunConfig` is composed of these groups.
"""

from __future__ import annotations

from typing import Any

import attrs

from ksi.choices import KnowledgeEvalOutput, KnowledgeMode, KnowledgeTools
from ksi.knowledge.choices import DEFAULT_KNOWLEDGE_BUDGET
from ksi.limits import MAX_GENERATIONS
from ksi.rundir.run_option import FREE, GENERATIONS, GROW, KV, MATCH, OPTION, Form, RunOption


@attrs.define(slots=False, kw_only=True)
class GenerationOptions:
    """The Generations settings of a run (a part of :class:`~ksi.rundir.config.RunConfig`)."""

    # Generations (docs/generations.md): more may be added; what each one runs and learns
    # from must not change.
    generations: int = attrs.field(
        default=1,
        metadata={
            OPTION: RunOption(
                ("--generations",),
                f"Generations to run, at most {MAX_GENERATIONS}; notes distilled from each are "
                "given to the next.",
                GENERATIONS,
                GROW,
                metavar="N",
                minimum=1,
                maximum=MAX_GENERATIONS,
                doc="Run up to N generations (default 1: a plain run; at most "
                f"{MAX_GENERATIONS}). After each, notes are distilled from its scored attempts "
                "and given to the next as `KNOWLEDGE.md` beside `repo/`.",
            )
        },
    )
    strategy: str = attrs.field(
        default="retry-unsolved",
        metadata={
            OPTION: RunOption(
                ("--strategy",),
                "Which tasks a generation runs: retry-unsolved, all, or a plugin's.",
                GENERATIONS,
                MATCH,
                metavar="NAME",
                doc="Which tasks a generation runs: `retry-unsolved` (default: every task not "
                "solved yet; stops when none is left), `all`, or a plugin's.",
            )
        },
    )
    holdout_task_ids: list[str] | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--holdout-task-ids",),
                "Tasks run every generation, never learned from, reported apart (repeatable; "
                "a,b works too).",
                GENERATIONS,
                MATCH,
                Form.PATTERNS,
                metavar="ID",
                doc="Tasks run in every generation, never learned from, reported apart (they "
                "measure transfer). Repeatable; `a,b` works too.",
            )
        },
    )
    knowledge: KnowledgeMode = attrs.field(
        default=KnowledgeMode.NOTES,
        metadata={
            OPTION: RunOption(
                ("--knowledge",),
                "notes (later generations read earlier notes) or none (the control arm).",
                GENERATIONS,
                MATCH,
                choices=tuple(KnowledgeMode),
                doc="`notes` (default): later generations get earlier notes. `none`: the "
                "control arm, plain retries with no notes.",
            )
        },
    )
    distiller: str = attrs.field(
        default="evidence",
        metadata={
            OPTION: RunOption(
                ("--distiller",),
                "Who writes the notes: evidence (no model), agent, or a plugin's.",
                GENERATIONS,
                MATCH,
                metavar="NAME",
                doc="Who writes the notes: `evidence` (default, no model), `agent` "
                "(`--distiller-option agent=claude-code`), or a plugin's.",
            )
        },
    )
    distiller_options: dict[str, Any] = attrs.field(
        factory=dict,
        metadata={
            OPTION: RunOption(
                ("--distiller-option",),
                "A distiller option (repeatable), e.g. agent=claude-code.",
                GENERATIONS,
                MATCH,
                Form.KEY_VALUES,
                metavar=KV,
            )
        },
    )
    knowledge_eval_output: KnowledgeEvalOutput = attrs.field(
        default=KnowledgeEvalOutput.TAIL,
        metadata={
            OPTION: RunOption(
                ("--knowledge-eval-output",),
                "tail: failing attempts' eval output goes into the notes; none: never (eval "
                "output that would reveal hidden tests).",
                GENERATIONS,
                MATCH,
                choices=tuple(KnowledgeEvalOutput),
                doc="`tail` (default): failing attempts' eval output tails go into the notes; "
                "`none`: never (when eval output would reveal hidden tests).",
            )
        },
    )
    #: The one size budget.
    knowledge_budget_bytes: int = attrs.field(
        default=DEFAULT_KNOWLEDGE_BUDGET,
        metadata={
            OPTION: RunOption(
                ("--knowledge-budget",),
                "Most bytes of notes one attempt receives (KNOWLEDGE.md).",
                GENERATIONS,
                MATCH,
                metavar="BYTES",
                minimum=256,
                doc="The most bytes of notes one attempt receives (default 16384): the one "
                "size limit.",
            )
        },
    )
    seed_knowledge: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--seed-knowledge",),
                "Start from the notes of a bundle (ksi knowledge export).",
                GENERATIONS,
                FREE,
                Form.PATH,
                metavar="FILE",
                doc="Start from the notes of a bundle written by `ksi knowledge export` (its "
                "content must match on a resume; the file may move).",
            )
        },
    )
    seed_knowledge_sha256: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                (),
                "The seed bundle's SHA-256, recorded when the run starts (a resume must find "
                "the same one); set by the run, not given.",
                "",
                MATCH,
                recorded_from="seed_knowledge",
            )
        },
    )
    #: The store a run reads notes from and writes to: another one would split its record.
    knowledge_db: str | None = attrs.field(
        default=None,
        metadata={
            OPTION: RunOption(
                ("--knowledge-db",),
                "The knowledge store (SQLite) to share with other runs: start from what "
                "earlier runs on these tasks learnt, and add to it (default: knowledge.sqlite "
                "in the run directory).",
                GENERATIONS,
                MATCH,
                Form.PATH,
                metavar="PATH",
                doc="The knowledge store (SQLite) to share with other runs (default: "
                "`knowledge.sqlite` in the run directory): a new run starts from what earlier "
                "runs learnt about the same tasks, and every run adds its evidence and notes "
                "([knowledge.md](knowledge.md)).",
            )
        },
    )
    #: What an attempt could look up: a generation half with the tools, half without, is
    #: neither arm.
    knowledge_tools: KnowledgeTools = attrs.field(
        default=KnowledgeTools.OFF,
        metadata={
            OPTION: RunOption(
                ("--knowledge-tools",),
                "on: agents whose CLI speaks MCP (claude-code, codex, gemini-cli, opencode) "
                "may query the knowledge store, read-only, during an attempt (needs ksi[mcp]; "
                "local or sandbox environment).",
                GENERATIONS,
                MATCH,
                choices=tuple(KnowledgeTools),
                doc="`on`: agents whose CLI speaks MCP (claude-code, codex, gemini-cli, "
                "opencode) may query the knowledge store, read-only, during an attempt (`pip "
                "install 'ksi[mcp]'`; `local` or `sandbox`, refused under `docker`): "
                "[knowledge.md](knowledge.md#knowledge-tools-for-agents-mcp). `off` (default): "
                "they may not.",
            )
        },
    )

"""The run options that take one of a few words, as StrEnums.

A member is its word (``EvalIn.HOST == "host"``), so ``run.json`` and the
command line keep the words they always had. No import but :mod:`enum`: the
CLI reads these at start.
"""

from __future__ import annotations

import enum


class EvalIn(enum.StrEnum):
    """``--eval-in``: where an evaluator that grades on the host runs its grade."""

    #: On the host, in a copy of the captured ``repo/`` (the spec's contract).
    HOST = "host"
    #: In a fresh environment of the run's kind, for tests that need the image's toolchain.
    ENVIRONMENT = "environment"


class EvalIsolation(enum.StrEnum):
    """``--eval-isolation``: whether a host grade runs in a bubblewrap sandbox.

    ``auto`` is only asked for: the driver decides it into ``none`` or
    ``sandbox`` before any attempt runs (:func:`ksi.attempt.safety.decide_eval_isolation`).
    """

    #: ``sandbox`` when the agent ran isolated, else ``none``.
    AUTO = "auto"
    NONE = "none"
    SANDBOX = "sandbox"


class KnowledgeMode(enum.StrEnum):
    """``--knowledge``: whether later generations get earlier ones' notes."""

    NOTES = "notes"
    #: The control arm: no generation gets notes.
    NONE = "none"


class KnowledgeEvalOutput(enum.StrEnum):
    """``--knowledge-eval-output``: whether failing attempts' eval output tails go into notes."""

    TAIL = "tail"
    NONE = "none"


class KnowledgeTools(enum.StrEnum):
    """``--knowledge-tools``: whether an agent whose CLI speaks MCP may query the store."""

    OFF = "off"
    ON = "on"

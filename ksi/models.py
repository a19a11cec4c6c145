"""The data KSI passes between its parts and writes to disk.

Models are frozen attrs classes: no attribute is reassigned once built (not
even by the class itself), so a task or a result cannot change under a
component that holds it. Their dicts (``metadata``, ``details``) are not
copied: read them, never change them. The one converter in
:mod:`ksi.serialization` turns models into JSON and back.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ksi.compat.task_keys import same_extras, typed_part
from ksi.errors import InvalidTaskError

# Documented (and imported by plugins) as ksi.models.Problem.
from ksi.problems import Problem as Problem
from ksi.task_parts import (
    EvalSpec,
    Runtime,
    Solution,
    StartingFiles,
    TaskOrigin,
    slot_setters,
)

_PART_TYPES: tuple[tuple[str, type[Any]], ...] = (
    ("eval", EvalSpec),
    ("starting_files", StartingFiles),
    ("runtime", Runtime),
    ("origin", TaskOrigin),
    ("solution", Solution),
)


def _from_metadata(part: str) -> Any:
    """The default of a typed part left out: what the original KSI's keys in ``metadata`` say."""
    return attrs.Factory(lambda task: typed_part(task.id, task.metadata, part), takes_self=True)


#: A loader's recipe for three parts of a task: a function and its arguments, returning
#: ``(starting_files, solution, origin)``; see :meth:`TaskSpec.deferred`.
DeferredParts = tuple[Callable[..., tuple[StartingFiles, Solution | None, TaskOrigin]], Any]

#: The parts :meth:`TaskSpec.deferred` builds on first read.
_DEFERRED = frozenset({"starting_files", "solution", "origin"})


class _DeferredPartSlot:
    """Where a task built by :meth:`TaskSpec.deferred` keeps the recipe of its parts.

    A slot of its own, outside the attrs fields, so that equality, ``repr``,
    ``evolve``, ``asdict`` and pickling see only the parts (reading them
    builds them) and a task built any other way has nothing here.
    """

    __slots__ = ("_deferred_parts",)

    if not TYPE_CHECKING:  # to mypy a __getattr__ would make every misspelt name an Any

        def __getattr__(self, name: str) -> Any:
            # Python calls this only for a name that is no class attribute or set slot.
            if name not in _DEFERRED:
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
                )
            recipe = getattr(self, "_deferred_parts", None)
            if recipe is not None:  # None: another thread built them since the slot was read
                build, args = recipe
                starting_files, solution, origin = build(*args)
                # Two threads reading at once both build; the values are equal and frozen.
                _SET_STARTING_FILES(self, starting_files)
                _SET_SOLUTION(self, solution)
                _SET_ORIGIN(self, origin)
                _SET_DEFERRED(self, None)
            return object.__getattribute__(self, name)


@attrs.frozen
class TaskSpec(_DeferredPartSlot):
    """One task: what the agent is asked to do, from which starting files, graded how.

    ``id``, ``repo``, ``prompt`` and ``metadata`` are the original KSI's
    public API, in that order. The typed parts (keyword-only) are what KSI's
    own modules read:

    * ``eval``: :class:`~ksi.task_parts.EvalSpec` (command, timeout_sec);
    * ``starting_files``: :class:`~ksi.task_parts.StartingFiles` (a directory,
      or inline files written only by an explicit ``seed_into``/``materialize``);
    * ``runtime``: :class:`~ksi.task_parts.Runtime` (image or Dockerfile,
      cpus, memory, user, capabilities, network, workdir, agent timeout);
    * ``solution``: :class:`~ksi.task_parts.Solution` for the ``oracle`` agent;
    * ``origin``: :class:`~ksi.task_parts.TaskOrigin` (source name, file, location);
    * ``workspace_note``: False for tasks that do not use ``repo/`` (the
      agent's prompt then gets no note about it).

    ``metadata`` holds what a plugin owns, kept as given. A typed part left
    out is read from the original's keys in it (``task_source``,
    ``repo_path``, ``eval_command``, ``eval_timeout_sec``, the others in
    :data:`ksi.compat.task_keys.LEGACY_KEYS`), so the original's form builds
    the same task; a typed part that is given is used as given. Equality
    leaves those keys out (the typed parts say what they mean). A bad value
    raises :class:`~ksi.errors.InvalidTaskError` when the task is built.
    """

    id: str
    repo: str = ""
    prompt: str = ""
    metadata: dict[str, Any] = attrs.field(factory=dict, eq=attrs.cmp_using(eq=same_extras))
    eval: EvalSpec = attrs.field(default=_from_metadata("eval"), kw_only=True)
    starting_files: StartingFiles = attrs.field(
        default=_from_metadata("starting_files"), kw_only=True
    )
    runtime: Runtime = attrs.field(default=_from_metadata("runtime"), kw_only=True)
    solution: Solution | None = attrs.field(default=_from_metadata("solution"), kw_only=True)
    origin: TaskOrigin = attrs.field(default=_from_metadata("origin"), kw_only=True)
    workspace_note: bool = attrs.field(default=_from_metadata("workspace_note"), kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not (
            isinstance(self.eval, EvalSpec)
            and isinstance(self.starting_files, StartingFiles)
            and isinstance(self.runtime, Runtime)
            and isinstance(self.origin, TaskOrigin)
            and (self.solution is None or isinstance(self.solution, Solution))
        ):
            self._refuse_wrong_part_type()

    @classmethod
    def checked(
        cls,
        id: str,
        prompt: str,
        eval: EvalSpec,
        starting_files: StartingFiles,
        runtime: Runtime,
        solution: Solution | None,
        origin: TaskOrigin,
        workspace_note: bool,
    ) -> TaskSpec:
        """A task a loader built from parts of the right types (no ``repo``, empty ``metadata``).

        Skips the type check, as the parts' ``checked`` constructors skip theirs:
        loading 10,000 tasks spent a tenth of its time in attrs' frozen
        ``__init__``. Use only with parts built as their classes.
        """
        inst = cls._loaded(id, prompt, eval, runtime, workspace_note)
        _SET_STARTING_FILES(inst, starting_files)
        _SET_SOLUTION(inst, solution)
        _SET_ORIGIN(inst, origin)
        return inst

    @classmethod
    def deferred(
        cls,
        id: str,
        prompt: str,
        eval: EvalSpec,
        runtime: Runtime,
        workspace_note: bool,
        parts: DeferredParts,
    ) -> TaskSpec:
        """As :meth:`checked`, but ``starting_files``, ``solution`` and ``origin`` are built
        by ``parts`` (a function and its arguments) when one of them is first read.

        A loader has already checked what they are built from; building three
        objects per task it loads was a fifth of loading 10,000 tasks, for parts
        that a run reads once per attempt (and ``ksi tasks`` or a filtered run
        mostly never). The task reads, compares and pickles the same as one
        built at once. Use only with a function that builds parts of the right types.
        """
        inst = cls._loaded(id, prompt, eval, runtime, workspace_note)
        _SET_DEFERRED(inst, parts)
        return inst

    @classmethod
    def _loaded(
        cls, id: str, prompt: str, eval: EvalSpec, runtime: Runtime, workspace_note: bool
    ) -> TaskSpec:
        """A task with the slots every loaded task sets (no ``repo``, empty ``metadata``);
        :meth:`checked` and :meth:`deferred` set the parts."""
        inst = object.__new__(cls)
        _SET_ID(inst, id)
        _SET_REPO(inst, "")
        _SET_PROMPT(inst, prompt)
        _SET_METADATA(inst, {})
        _SET_EVAL(inst, eval)
        _SET_RUNTIME(inst, runtime)
        _SET_WORKSPACE_NOTE(inst, workspace_note)
        return inst

    def _refuse_wrong_part_type(self) -> None:
        for name, cls in _PART_TYPES:
            value = getattr(self, name)
            if not isinstance(value, cls) and not (name == "solution" and value is None):
                article = "an" if cls.__name__[0] in "AEIOU" else "a"
                raise InvalidTaskError(
                    f"task {self.id!r}: {name} must be {article} {cls.__name__} "
                    f"(from ksi.task_parts){' or None' if name == 'solution' else ''}, "
                    f"got {type(value).__name__}"
                )


(
    _SET_ID,
    _SET_REPO,
    _SET_PROMPT,
    _SET_METADATA,
    _SET_EVAL,
    _SET_STARTING_FILES,
    _SET_RUNTIME,
    _SET_SOLUTION,
    _SET_ORIGIN,
    _SET_WORKSPACE_NOTE,
) = slot_setters(
    TaskSpec,
    "id repo prompt metadata eval starting_files runtime solution origin workspace_note",
)
(_SET_DEFERRED,) = slot_setters(_DeferredPartSlot, "_deferred_parts")


def is_solved(score: float | None, threshold: float) -> bool:
    """THE solved predicate of KSI: a score that reached the run's ``--solved-threshold``.

    Summaries, progress, generation strategies and distillers all ask this one
    function, so "solved" means the same thing everywhere (an unscored attempt,
    ``None``, is never solved).
    """
    return score is not None and score >= threshold


def known_sum(values: Iterable[float | None]) -> float | None:
    """The sum of the values reported (costs): None when none was, since an unknown cost
    shown as $0 would read as free."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


class EvalStatus(enum.StrEnum):
    """The ``status`` words of KSI's own evaluators (docs/evaluators.md lists them).

    An evaluator plugin may use words of its own (``EvalResult.status`` is any
    string); the record's ``status`` says whether the attempt was scored.
    """

    SCORED = "scored"
    #: The eval command outlived the task's ``eval.timeout_sec``.
    TIMEOUT = "timeout"
    MISSING_WORKSPACE = "missing_workspace"
    #: The eval command's shell could not be started.
    SPAWN_FAILED = "spawn_failed"
    #: The task has no eval command (for manual inspection): retrying cannot change it.
    NO_EVAL = "no_eval"
    #: KSI could not prepare the directory to grade.
    EVAL_ERROR = "eval_error"


@attrs.frozen
class EvalResult:
    """What an evaluator concluded about one workspace.

    ``native_score`` is in [0, 1], or ``None`` when the attempt is unscored
    (timeout, missing workspace, spawn failure...): unscored attempts are
    counted apart and never pull a best score down. ``status`` says which
    (an :class:`EvalStatus`, or an evaluator plugin's own word).
    """

    status: str
    native_score: float | None
    exit_code: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    eval_workdir: str = ""
    duration_sec: float = 0.0
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = attrs.field(factory=dict)

    @property
    def scored(self) -> bool:
        return self.native_score is not None

    @property
    def resolved(self) -> bool:
        """True when the attempt earned full marks (the original KSI's meaning)."""
        return is_solved(self.native_score, 1.0)

    def as_dict(self) -> dict[str, Any]:
        """The original KSI's result dict, plus KSI's extra fields."""
        return {
            "status": str(self.status),  # the word, also when it is an EvalStatus member
            "native_score": self.native_score,
            "resolved": self.resolved,
            "exit_code": self.exit_code,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
            "eval_workdir": self.eval_workdir,
            "duration_sec": self.duration_sec,
            "notes": list(self.notes),
            "details": dict(self.details),
        }


class AgentStatus(enum.StrEnum):
    """How an agent's run ended, as the built-in agents word it (docs/agents.md).

    An agent plugin may report a word of its own (``AgentOutcome.status`` is any
    string): the runner then grades the attempt like a ``completed`` one.
    """

    COMPLETED = "completed"
    #: The task's time limit killed it (usage so far is kept).
    TIMEOUT = "timeout"
    #: Anything else that stopped it: a nonzero exit, a CLI that is not installed.
    CRASHED = "crashed"
    #: It could not be run at all (the ``command`` agent's program did not start).
    ERROR = "error"
    AUTH_ERROR = "auth_error"
    #: It could not reach its model's endpoint (connection refused, DNS, TLS), also when
    #: it was still retrying one at the task's time limit.
    CONNECTION_ERROR = "connection_error"
    #: Its own sandbox or permission layer refused every tool call it made (Codex's
    #: sandbox that cannot start, a permission mode that allows no command).
    TOOLS_REFUSED = "tools_refused"
    RATE_LIMITED = "rate_limited"
    #: The provider said it is overloaded (retried with backoff, as ``rate_limited``).
    OVERLOADED = "overloaded"
    #: A usage, credit, turn or cost limit was reached.
    BUDGET_EXCEEDED = "budget_exceeded"
    #: The conversation outgrew the model's context window (the agent's own failure).
    CONTEXT_EXCEEDED = "context_exceeded"


@attrs.frozen
class Usage:
    """Tokens and money an agent reports having spent on one attempt."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    turns: int | None = None
    #: True when KSI priced the tokens itself (whoever spent them reported no cost):
    #: ``cost_usd`` is then an estimate from :attr:`price_table` (see :mod:`ksi.pricing`).
    cost_estimated: bool = False
    #: The price table an estimated cost came from (``"genai-prices 0.2.3"``; "" : none).
    price_table: str = ""


def total_usage(usages: Sequence[Usage]) -> Usage:
    """The sum of several agent runs' usage (one attempt's rounds); a cost or turn count
    that any run left unknown stays unknown only if every run left it unknown. The sum
    is an estimate when any part of it is."""
    costs = [u.cost_usd for u in usages if u.cost_usd is not None]
    turns = [u.turns for u in usages if u.turns is not None]
    estimated = [u for u in usages if u.cost_estimated]
    return Usage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_read_tokens=sum(u.cache_read_tokens for u in usages),
        cache_write_tokens=sum(u.cache_write_tokens for u in usages),
        cost_usd=sum(costs) if costs else None,
        turns=sum(turns) if turns else None,
        cost_estimated=bool(estimated),
        price_table=next((u.price_table for u in estimated if u.price_table), ""),
    )

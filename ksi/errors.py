"""Every exception KSI raises on purpose derives from :class:`KsiError`.

Callers (the CLI above all) can then tell a user mistake, which deserves a
one-line message and exit code 2, from a bug, which deserves a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ksi.problems import Problem


class KsiError(Exception):
    """Base of every error KSI raises deliberately."""

    #: Exit code the CLI uses when this error reaches it.
    exit_code: int = 1


class UserInputError(KsiError):
    """The user gave KSI something it cannot use: a file, an option, a name.

    Exit code 2, message on stderr, no traceback.
    """

    exit_code = 2


#: What a tasks-file header says happened (one wording for every task source).
NO_TASK_LOADED = "no task was loaded"


def problems_header(subject: str, count: int, consequence: str = NO_TASK_LOADED) -> str:
    """The one header above a list of problems: ``tasks.jsonl: 3 problems; no task was loaded``."""
    return f"{subject}: {count} problem{'s' if count != 1 else ''}; {consequence}"


class ProblemsError(UserInputError, ValueError):
    """One or more located problems in a user's input, all reported together.

    Also a ``ValueError`` because the original KSI loaders raised that and
    callers catch it.
    """

    def __init__(self, problems: Sequence[Problem], *, header: str = "") -> None:
        self.problems: list[Problem] = list(problems)
        lines = [header] if header else []
        lines.extend(str(p) for p in self.problems)
        super().__init__("\n".join(lines))


class InvalidTaskError(UserInputError, ValueError):
    """A task (typed part or metadata key) holds a value KSI cannot use.

    Raised when the :class:`ksi.models.TaskSpec` is built, so a bad value stops
    a run before any attempt; also a ``ValueError``, as attrs validators raise.
    """


class TaskLoadError(ProblemsError):
    """A tasks file (or task directory) is invalid; nothing from it was loaded."""


class OptionsError(ProblemsError):
    """Options given to a component (``--agent-option`` and friends) are invalid."""


class UnknownComponentError(UserInputError, LookupError):
    """No registered component has the requested name or alias."""


class PluginError(KsiError):
    """A plugin failed to import, register, or declared a hook that does not exist."""


class DuplicateComponentError(PluginError):
    """Two plugins registered the same name for the same kind of component."""


class AgentSetupError(KsiError):
    """Attempts of a run failed for the agent's set-up, not the task: a key, an endpoint
    it cannot connect to, its own sandbox or permission layer refusing every tool call.

    Raised by ``ksi run`` after the summary, so the run exits non-zero (3) and
    says which agent, what failed, the CLI's own words and how to resume.
    """

    exit_code = 3


class AgentAuthError(AgentSetupError):
    """Attempts of a run failed to authenticate (a missing, wrong or expired key)."""


class EnvironmentFailure(KsiError):
    """An environment could not be prepared, started or cleaned up."""


class DistillationFailed(KsiError):
    """A distiller's notes cannot be used; the message says why.

    Raised by a distiller that falls back (the ``agent`` distiller, whose
    agent wrote no usable notes), and by the generation loop when even the
    evidence fallback gave none: the generation then has no notes and the run
    goes on.
    """


class RunError(UserInputError):
    """A run cannot start or resume as asked (mismatched resume, bad run dir...)."""


class KsiWarning(UserWarning):
    """Something the user must know before a run goes on (``warning: ...`` on the CLI)."""

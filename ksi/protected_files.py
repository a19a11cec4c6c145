"""Which files of ``repo/`` are the task's tests: the one rule capture, validation and docs share.

Capture protects test files so an agent cannot make a task pass by editing
its tests: a seed file the rule matches is restored if the agent edited or
deleted it, and a new file it matches is dropped (tests come from the task).
The rule is *by convention*, never by substring: ``greatest.py``,
``latest.py``, ``contest.py`` and ``attestation.py`` are the agent's work,
and graded as such. A path is a test when

* one of its directories is named ``test``, ``tests``, ``__tests__`` or
  ``spec`` (``tests/helpers.py``);
* its name is ``test_*``, ``*_test.*``, ``*.test.*``, ``*_spec.*``,
  ``*.spec.*`` or ``conftest.py``, or its stem is ``test``/``tests``
  (``tests.py``, the spec's own example eval script);

in any letter case, or when it matches one of the globs a task
(:attr:`ksi.task_parts.EvalSpec.protect`) or a run (``--protect``) adds. A
glob without ``/`` matches a file name at any depth (``*.golden``); a glob
with ``/`` matches the whole path from ``repo/`` (``data/expected/*``, where
``*`` also crosses ``/``).

A leaf module (no KSI imports), so task sources, the runner and the CLI all
ask the same question the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

import attrs

#: Directory names whose every file is a test.
TEST_DIR_NAMES = frozenset({"test", "tests", "__tests__", "spec"})
#: File-name conventions of test files (matched on the lower-cased name).
TEST_NAME_GLOBS = ("test_*", "*_test.*", "*.test.*", "*_spec.*", "*.spec.*", "conftest.py")
#: File stems that name a test script (``tests.py``, ``test.sh``).
TEST_STEMS = frozenset({"test", "tests"})


def looks_like_test(rel: str) -> bool:
    """Whether the relative path ``rel`` (``/``-separated) is a test file by convention."""
    parts = rel.lower().split("/")
    name = parts[-1]
    if any(part in TEST_DIR_NAMES for part in parts[:-1]):
        return True
    if name.split(".", 1)[0] in TEST_STEMS:
        return True
    return any(fnmatchcase(name, glob) for glob in TEST_NAME_GLOBS)


def glob_problem(glob: object) -> str:
    """Why ``glob`` cannot be a protect glob ("" when it can)."""
    if not isinstance(glob, str) or not glob.strip():
        return f"a protect glob must be a non-empty string, got {glob!r}"
    if glob.startswith("/") or ".." in glob.split("/"):
        return f"protect glob {glob!r} must be relative to repo/ (no leading / or ..)"
    return ""


def _globs(value: Iterable[str]) -> tuple[str, ...]:
    globs = tuple(value)
    for glob in globs:
        why = glob_problem(glob)
        if why:
            raise ValueError(why)
    return globs


@attrs.frozen
class ProtectRule:
    """The conventions plus ``globs`` (a task's and the run's): :meth:`protects` decides."""

    globs: tuple[str, ...] = attrs.field(default=(), converter=_globs)

    def protects(self, rel: str) -> bool:
        """Whether the file at ``rel`` (relative to repo/, ``/``-separated) is protected."""
        if looks_like_test(rel):
            return True
        name = rel.rsplit("/", 1)[-1]
        return any(fnmatchcase(rel if "/" in glob else name, glob) for glob in self.globs)

    def why(self, rel: str) -> str:
        """Which part of the rule protects ``rel`` (for messages), or ""."""
        if looks_like_test(rel):
            return "looks like a test"
        name = rel.rsplit("/", 1)[-1]
        for glob in self.globs:
            if fnmatchcase(rel if "/" in glob else name, glob):
                return f"matches the protect glob {glob!r}"
        return ""

    def plus(self, globs: Iterable[str]) -> ProtectRule:
        """This rule with more globs (a task's on top of the run's)."""
        more = tuple(g for g in globs if g not in self.globs)
        return self if not more else ProtectRule((*self.globs, *more))


#: The conventions alone.
DEFAULT_RULE = ProtectRule()

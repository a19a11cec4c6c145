"""What ``ksi plugins`` reports: each plugin loaded, and each failure, with where it came from.

A failure is recorded, never raised (a broken plugin is skipped, and KSI goes
on), unless ``KSI_STRICT_PLUGINS=1`` makes it fatal. Failures while
collecting one kind of component are kept per kind, because that kind is
collected again after an in-process plugin comes or goes.
"""

from __future__ import annotations

import dataclasses
import os

from ksi._version import __version__
from ksi.errors import DuplicateComponentError, PluginError

#: The distribution shown for a plugin registered in-process (:func:`ksi.plugins.register_plugin`).
IN_PROCESS = "(in-process)"


@dataclasses.dataclass(frozen=True)
class LoadError:
    """A plugin (or one of its components) that KSI skipped, and why."""

    plugin: str
    distribution: str
    version: str
    stage: str
    error: str
    #: The formatted traceback when an exception caused it (``ksi --debug`` shows it).
    traceback: str = dataclasses.field(default="", compare=False, repr=False)

    def __str__(self) -> str:
        origin = self.distribution + (f" {self.version}" if self.version else "")
        return f"plugin {self.plugin!r} from {origin} failed to {self.stage}: {self.error}"


@dataclasses.dataclass
class PluginInfo:
    """What ``ksi plugins`` shows about one loaded plugin."""

    name: str
    distribution: str
    version: str
    builtin: bool
    hooks: list[str] = dataclasses.field(default_factory=list)
    #: kind -> names of the components this plugin registered.
    components: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: kind -> the other plugins' components this one overrides (``custom of 'ksi.tasks.custom'``).
    overrides: dict[str, list[str]] = dataclasses.field(default_factory=dict)


def strict() -> bool:
    """``KSI_STRICT_PLUGINS=1``: every plugin failure is fatal."""
    return os.environ.get("KSI_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes", "on"}


class Failures:
    """Every plugin failure so far: while loading, then per kind of component collected."""

    def __init__(self) -> None:
        #: Failures while importing or registering plugins.
        self.load: list[LoadError] = []
        #: Failures while collecting one kind (rebuilt with it); ``"command"`` for commands.
        self._late: dict[str, list[LoadError]] = {}

    @property
    def all(self) -> list[LoadError]:
        """Loading first, then per kind in lookup order."""
        late = [e for errs in self._late.values() for e in errs]
        return [*self.load, *late]

    def during(self, kind: str) -> list[LoadError]:
        """Loading failures and those while collecting ``kind``: what a missing name may be."""
        return [*self.load, *self._late.get(kind, [])]

    def start(self, kind: str) -> None:
        """``kind`` is being collected (again): forget what went wrong the last time."""
        self._late[kind] = []

    def forget(self, plugin: str) -> None:
        """An in-process plugin was removed: its collection failures go with it."""
        for errs in self._late.values():
            errs[:] = [e for e in errs if e.plugin != plugin]

    def add(
        self,
        plugin: str,
        dist: str,
        version: str,
        stage: str,
        exc: BaseException | str,
        *,
        late: str | None = None,
    ) -> None:
        """Record a failure (``late``: while collecting that kind); raise it when strict."""
        message = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        trace = "" if isinstance(exc, str) else _format_traceback(exc)
        err = LoadError(plugin, dist, version, stage, message, trace)
        if strict():
            cause = exc if isinstance(exc, BaseException) else None
            raise PluginError(f"{err} (KSI_STRICT_PLUGINS=1 makes this fatal)") from cause
        if late is None:
            self.load.append(err)
        else:
            self._late.setdefault(late, []).append(err)

    def add_for(
        self, info: PluginInfo | None, plugin: str, stage: str, exc: BaseException, late: str
    ) -> None:
        """Record a loaded plugin's failure while collecting ``late``; a built-in's is a bug."""
        if info is not None and info.builtin and not isinstance(exc, DuplicateComponentError):
            raise exc  # a broken built-in is a bug in KSI: keep the traceback
        dist = info.distribution if info else "(registered directly)"
        self.add(plugin, dist, info.version if info else "", stage, exc, late=late)


def _format_traceback(exc: BaseException) -> str:
    import traceback  # start-up: only when a plugin fails (slow to import)

    return "".join(traceback.format_exception(exc))


def builtin_info(module_name: str, hooks: tuple[str, ...]) -> PluginInfo:
    """The row of one of KSI's own plugins: distribution ``ksi``, KSI's version."""
    return PluginInfo(module_name, "ksi", __version__, builtin=True, hooks=sorted(hooks))

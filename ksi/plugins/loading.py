"""Registering the default plugins, then every ``ksi`` entry point the environment allows.

Each entry point is guarded: one that fails to import or to register its
hooks is recorded (distribution, version, error) and skipped, never fatal,
unless ``KSI_STRICT_PLUGINS=1``. ``KSI_LOAD_PLUGINS=a,b`` loads only those
distributions or entry points (empty: none); ``KSI_DISABLE_PLUGINS=a,b``
skips these.
"""

from __future__ import annotations

import os

from ksi.entry_points import KSI_GROUP, EntryPoint, entry_points, normalize
from ksi.plugins.builtins import BUILTIN_HOOKS, LazyBuiltin
from ksi.plugins.manager import KsiPluginManager
from ksi.plugins.report import Failures, PluginInfo, builtin_info


def _env_list(var: str) -> set[str] | None:
    """The names in ``var`` (PEP 503 normalised, so ``My_Plugin`` matches ``my-plugin``)."""
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {normalize(x) for x in raw.split(",") if x.strip()}


def load_all(pm: KsiPluginManager, infos: dict[str, PluginInfo], failures: Failures) -> None:
    """Register the default plugins, then the entry points the environment allows."""
    for module_name, hooks in BUILTIN_HOOKS.items():
        # The table holds real hook names (a test checks it): no need to check them here.
        pm.register(LazyBuiltin(module_name, hooks), name=module_name)
        infos[module_name] = builtin_info(module_name, hooks)
    only = _env_list("KSI_LOAD_PLUGINS")
    blocked = _env_list("KSI_DISABLE_PLUGINS") or set()
    seen: set[str] = set()
    for ep in entry_points(KSI_GROUP):
        names = {normalize(_distribution(ep)), normalize(ep.name)}
        seen |= names
        if only is not None and not names & only:
            continue
        if names & blocked:
            continue
        _load_entry_point(pm, infos, failures, ep)
    for missing in sorted((only or set()) - seen):
        failures.add(
            missing,
            "KSI_LOAD_PLUGINS",
            "",
            "load",
            f"no installed distribution has a {KSI_GROUP!r} entry point called "
            f"{missing!r}; installed: {', '.join(sorted(seen)) or '(none)'}",
        )


def _distribution(ep: EntryPoint) -> str:
    return ep.dist or "(unknown distribution)"


def _load_entry_point(
    pm: KsiPluginManager, infos: dict[str, PluginInfo], failures: Failures, ep: EntryPoint
) -> None:
    dist = _distribution(ep)
    version = ep.version
    owner = infos.get(ep.name)
    if owner is not None:
        if owner.distribution == dist:
            return  # the same distribution found twice on sys.path
        failures.add(
            ep.name,
            dist,
            version,
            "register",
            f"the plugin name {ep.name!r} is already used by {owner.distribution} "
            f"{owner.version}; rename the entry point in one of them",
        )
        return
    try:
        obj = ep.load()
    except BaseException as exc:  # SystemExit in a plugin must not end KSI
        if isinstance(exc, KeyboardInterrupt):
            raise
        failures.add(ep.name, dist, version, "import", exc)
        return
    try:
        pm.register_checked(obj, ep.name)
    except Exception as exc:
        failures.add(ep.name, dist, version, "register hooks", exc)
        return
    infos[ep.name] = PluginInfo(ep.name, dist, version, builtin=False, hooks=pm.hooks_of(ep.name))

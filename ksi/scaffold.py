"""Generating a working plugin package to start a benchmark from (``ksi plugins new NAME``).

The package has a ``pyproject.toml`` with the ``ksi`` entry point, a task
source and an evaluator that run as they are, tests that pass (using KSI's
``ksi_plugin`` pytest fixture), an example tasks file and a README. Templates
live in ``ksi/scaffold_templates/package/`` as ``*.tmpl`` files (so no tool
mistakes them for KSI's own code); ``__module__`` in a path and the
``__NAME__``-style tokens in a file are replaced.

Made as ``plugins/ksi-NAME`` of KSI's own repository, the plugin also gets
the wheel check CI runs on every ``plugins/*/`` (``.ci/wheel-check/ksi-NAME.sh``,
:func:`write_wheel_check`).
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from ksi._version import __version__
from ksi.errors import UserInputError
from ksi.kinds import EVALUATOR, TASK_SOURCE
from ksi.plugins import get_plugins

TEMPLATES = Path(__file__).resolve().parent / "scaffold_templates" / "package"
#: The end-to-end check of an in-repo plugin's wheel (KSI's own ``.ci/wheel-check/``).
WHEEL_CHECK_TEMPLATE = TEMPLATES.parent / "wheel-check.sh.tmpl"
_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


@attrs.frozen
class PluginNames:
    """Every spelling of the plugin's name a package needs."""

    #: Component and entry-point name (``my-bench``).
    name: str
    #: Distribution name (``ksi-my-bench``).
    dist: str
    #: Import package (``ksi_my_bench``).
    module: str
    #: Class-name prefix (``MyBench``).
    cls: str

    @classmethod
    def from_name(cls, raw: str) -> PluginNames:
        name = raw.strip().lower()
        if name.startswith("ksi-"):
            name = name[4:]
        if not _NAME.match(name):
            raise UserInputError(
                f"plugin name {raw!r}: use lowercase letters, digits and single dashes, "
                "starting with a letter (e.g. my-bench)"
            )
        dist = f"ksi-{name}"
        return cls(
            name=name,
            dist=dist,
            module=dist.replace("-", "_"),
            cls="".join(part.capitalize() for part in name.split("-")),
        )


def ksi_range() -> str:
    """The KSI requirement a new plugin declares: this minor series (docs/plugins/compatibility.md).

    ``ksi>=0.1,<0.2`` for KSI 0.1.x (before 1.0 a minor release may break
    plugins), ``ksi>=1.4,<2`` for 1.4.x.
    """
    parts = [int(p) if p.isdigit() else 0 for p in __version__.split("+")[0].split(".")[:2]]
    major, minor = [*parts, 0, 0][:2]
    upper = f"0.{minor + 1}" if major == 0 else str(major + 1)
    return f"ksi>={major}.{minor},<{upper}"


def render(text: str, names: PluginNames) -> str:
    for token, value in (
        ("__DIST__", names.dist),
        ("__MODULE__", names.module),
        ("__CLASS__", names.cls),
        ("__NAME__", names.name),
        ("__KSI_RANGE__", ksi_range()),
    ):
        text = text.replace(token, value)
    return text


#: What the generated package registers under its name: its name must not be a built-in's.
SCAFFOLD_KINDS = (TASK_SOURCE, EVALUATOR)


def refuse_reserved(names: PluginNames) -> None:
    """A name KSI's own task sources or evaluators use would lose to the built-in (exit 2)."""
    state = get_plugins()
    for kind in SCAFFOLD_KINDS:
        if names.name in state.builtin_names(kind):
            raise UserInputError(
                f"plugin name {names.name!r} is the name of KSI's built-in {kind} "
                f"{names.name!r}; the package would register a {kind} by that name, which "
                "the built-in keeps: choose another name (e.g. my-bench)"
            )


def create_plugin(raw_name: str, dest: Path | None = None) -> tuple[PluginNames, Path, list[Path]]:
    """Write the package into ``dest`` (default ``plugins/ksi-NAME``); return what was written."""
    names = PluginNames.from_name(raw_name)
    refuse_reserved(names)
    target = Path(dest) if dest is not None else Path("plugins") / names.dist
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UserInputError(
            f"{target} already exists and is not empty; choose another --dir or remove it"
        )
    written: list[Path] = []
    for template in sorted(TEMPLATES.rglob("*.tmpl")):
        rel = template.relative_to(TEMPLATES).as_posix().removesuffix(".tmpl")
        out = target / rel.replace("__module__", names.module)
        text = render(template.read_text(encoding="utf-8"), names)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserInputError(
                f"--dir: cannot write the plugin into {target} ({exc.strerror or exc}: "
                f"{exc.filename}); choose a directory you can create"
            ) from exc
        written.append(out)
    return names, target, written


def write_wheel_check(names: PluginNames, target: Path) -> Path | None:
    """In KSI's repository (``target`` is ``plugins/ksi-NAME`` next to ``.ci/``), write the
    plugin's ``.ci/wheel-check/ksi-NAME.sh``; None anywhere else.

    ``.ci/run`` builds and checks every ``plugins/*/`` and fails on one without its
    check, so an in-repo plugin needs nothing else wired by hand (docs/plugins/README.md).
    """
    plugins_dir = Path(target).resolve().parent
    ci = plugins_dir.parent / ".ci"
    if plugins_dir.name != "plugins" or not (ci / "plugin-wheel-check.sh").is_file():
        return None
    check = ci / "wheel-check" / f"{Path(target).name}.sh"
    if check.exists():
        return None  # the repository's own check stays
    check.parent.mkdir(parents=True, exist_ok=True)
    check.write_text(
        render(WHEEL_CHECK_TEMPLATE.read_text(encoding="utf-8"), names), encoding="utf-8"
    )
    return check

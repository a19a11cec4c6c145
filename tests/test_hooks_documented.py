"""Every hook in ksi/hookspecs.py is documented, in docs/hooks.md too, and tested.

docs/hooks.md is generated from the hook specs; regenerate it with
``python tests/test_hooks_documented.py`` after changing ksi/hookspecs.py.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ksi import hookspecs

ROOT = Path(__file__).resolve().parent.parent
HOOKS_MD = ROOT / "docs" / "hooks.md"
TESTS = ROOT / "tests"
REGENERATE = "python tests/test_hooks_documented.py"


def hook_specs() -> list[Callable[..., Any]]:
    """The hook specs, in the order hookspecs.py declares them."""
    marker = f"{hookspecs.PROJECT_NAME}_spec"
    specs = [
        obj
        for name, obj in vars(hookspecs).items()
        if name.startswith("ksi_") and callable(obj) and hasattr(obj, marker)
    ]
    return sorted(specs, key=lambda f: f.__code__.co_firstlineno)


def _rst_to_md(text: str) -> str:
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)  # :class:`x` -> `x`
    return text.replace("``", "`")


def _doc_to_md(doc: str) -> str:
    """A hook docstring as Markdown: ``:param x:`` lines become a list."""
    out: list[str] = []
    for line in inspect.cleandoc(doc).splitlines():
        param = re.match(r":param (\w+):\s*(.*)", line)
        returns = re.match(r":returns?:\s*(.*)", line)
        if param:
            out.append(f"* `{param[1]}`: {param[2]}")
        elif returns:
            out.append(f"* returns: {returns[1]}")
        elif line.startswith("    ") and out and out[-1].startswith("* "):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return _rst_to_md("\n".join(out)).strip()


def _signature(fn: Callable[..., Any]) -> str:
    params = ", ".join(
        f"{p.name}: {p.annotation}" for p in inspect.signature(fn).parameters.values()
    )
    return f"@hookimpl\ndef {fn.__name__}({params}) -> None: ..."


def render_hooks_md() -> str:
    """docs/hooks.md as it should be for the current hookspecs.py."""
    specs = hook_specs()
    lines = [
        "# Hook reference",
        "",
        "<!-- Generated from ksi/hookspecs.py by `" + REGENERATE + "`. Do not edit:",
        "     tests/test_hooks_documented.py fails when this file is out of date. -->",
        "",
        _rst_to_md(inspect.cleandoc(hookspecs.__doc__ or "")),
        "",
        "Implement a hook with a function of the same name decorated with",
        "`ksi.hookimpl` in a module your package names in its `ksi` entry point",
        "(see [plugins.md](plugins.md)).",
        "",
        "| hook | what it is for |",
        "|---|---|",
    ]
    for fn in specs:
        summary = _rst_to_md(inspect.cleandoc(fn.__doc__ or "").splitlines()[0])
        lines.append(f"| [`{fn.__name__}`](#{fn.__name__}) | {summary} |")
    for fn in specs:
        lines += [
            "",
            f"## {fn.__name__}",
            "",
            "<!-- doctest: skip: the hook's signature, implemented in a plugin module -->",
            "```python",
            _signature(fn),
            "```",
            "",
            _doc_to_md(fn.__doc__ or ""),
        ]
    return "\n".join(lines) + "\n"


def test_hookspecs_declare_hooks() -> None:
    # Guards the tests below against passing vacuously.
    names = [fn.__name__ for fn in hook_specs()]
    assert "ksi_register_task_sources" in names
    assert "ksi_register_evaluators" in names


@pytest.mark.parametrize("fn", hook_specs(), ids=lambda fn: fn.__name__)
def test_hook_has_a_docstring_covering_its_arguments(fn: Callable[..., Any]) -> None:
    doc = inspect.getdoc(fn) or ""
    assert len(doc.splitlines()) >= 2, f"{fn.__name__} needs a docstring: when, arguments, returns"
    for param in inspect.signature(fn).parameters:
        assert f":param {param}:" in doc, f"{fn.__name__}'s docstring does not describe {param!r}"
    assert re.search(r":returns?:", doc), f"{fn.__name__}'s docstring does not say what it returns"


@pytest.mark.parametrize("fn", hook_specs(), ids=lambda fn: fn.__name__)
def test_hook_is_in_docs_hooks_md(fn: Callable[..., Any]) -> None:
    assert f"## {fn.__name__}\n" in HOOKS_MD.read_text(encoding="utf-8")


def test_docs_hooks_md_matches_hookspecs() -> None:
    assert HOOKS_MD.read_text(encoding="utf-8") == render_hooks_md(), (
        f"docs/hooks.md is out of date with ksi/hookspecs.py; run `{REGENERATE}`"
    )


@pytest.mark.parametrize("fn", hook_specs(), ids=lambda fn: fn.__name__)
def test_hook_has_a_test_named_after_it(fn: Callable[..., Any]) -> None:
    pattern = re.compile(rf"^\s*def test_hook_{fn.__name__}\b", re.MULTILINE)
    found = [
        path.relative_to(ROOT)
        for path in sorted(TESTS.rglob("test_*.py"))
        if pattern.search(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert found, f"no test under tests/ defines `def test_hook_{fn.__name__}`"


if __name__ == "__main__":
    HOOKS_MD.write_text(render_hooks_md(), encoding="utf-8")
    print(f"wrote {HOOKS_MD}", file=sys.stderr)

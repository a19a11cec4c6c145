"""Looking components up: names, aliases, "did you mean", clashes, module:attribute references."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from ksi.errors import (
    DuplicateComponentError,
    PluginError,
    UnknownComponentError,
    UserInputError,
)
from ksi.registry import Registry


class Command:
    name: ClassVar[str] = "command"
    aliases: ClassVar[tuple[str, ...]] = ("cmd", "Shell")


class Pytest:
    name: ClassVar[str] = "pytest"
    aliases: ClassVar[tuple[str, ...]] = ()


@pytest.fixture
def evaluators() -> Registry:
    reg = Registry("evaluator", describe=lambda p: f"{p!r} (dist-{p})")
    reg.add(Command, "builtin")
    reg.add(Pytest, "third")
    return reg


def test_lookup_is_case_insensitive_over_names_and_aliases(evaluators: Registry) -> None:
    for name in ("command", "COMMAND", " Command ", "cmd", "shell", "SHELL"):
        assert evaluators.get(name).obj is Command
    assert evaluators.get("PyTest").plugin == "third"
    assert evaluators.names() == ["command", "pytest"]
    assert "CMD" in evaluators
    assert len(evaluators) == 2


def test_unknown_name_lists_valid_names_and_suggests_the_closest(evaluators: Registry) -> None:
    with pytest.raises(UnknownComponentError) as caught:
        evaluators.get("comand")
    message = str(caught.value)
    assert "unknown evaluator 'comand'; did you mean 'command'?" in message
    assert "Valid evaluators: command, pytest" in message
    assert isinstance(caught.value, UserInputError)  # the CLI exits 2
    assert caught.value.exit_code == 2


def test_unknown_name_without_a_close_match_still_lists_names(evaluators: Registry) -> None:
    with pytest.raises(UnknownComponentError, match=r"'zzz'\. Valid evaluators: command, pytest"):
        evaluators.get("zzz")
    with pytest.raises(UnknownComponentError, match=r"\(none registered\)"):
        Registry("agent").get("claude")


def test_clash_names_both_plugins_and_keeps_other_names(evaluators: Registry) -> None:
    class Impostor:
        name: ClassVar[str] = "Shell"  # an alias of the built-in
        aliases: ClassVar[tuple[str, ...]] = ()

    with pytest.raises(DuplicateComponentError) as at_registration:
        evaluators.add(Impostor, "squatter")
    assert "'builtin' (dist-builtin)" in str(at_registration.value)
    assert "'squatter' (dist-squatter)" in str(at_registration.value)
    with pytest.raises(DuplicateComponentError, match=r"dist-builtin.*dist-squatter"):
        evaluators.get("SHELL")
    assert evaluators.get("command").obj is Command  # only the clashing name is lost
    assert evaluators.get("pytest").obj is Pytest


def test_registering_the_same_class_twice_is_harmless(evaluators: Registry) -> None:
    evaluators.add(Command, "builtin")
    assert evaluators.names() == ["command", "pytest"]


@pytest.mark.parametrize(
    ("attrs_", "message"),
    [
        ({}, "without a non-empty string `name`"),
        ({"name": "  "}, "without a non-empty string `name`"),
        ({"name": "a:b"}, "contains ':'"),
        ({"name": "ok", "aliases": "single"}, "expected a tuple of non-empty strings"),
    ],
)
def test_invalid_components_are_refused_naming_the_plugin(
    attrs_: dict[str, object], message: str
) -> None:
    bad = type("Bad", (), attrs_)
    with pytest.raises(PluginError, match=message) as caught:
        Registry("agent").add(bad, "sloppy-plugin")
    assert "sloppy-plugin" in str(caught.value)


# -- module:attribute and ./file.py:Attribute references (issue 6) -------------


@pytest.fixture
def user_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    pkg = tmp_path / "mygraders"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "strict.py").write_text(
        textwrap.dedent(
            """
            class Grader:
                name = "strict-grader"

            class Outer:
                class Inner:
                    pass

            def helper():
                pass
            """
        )
    )
    (pkg / "broken.py").write_text("import nonexistent_dependency_xyz\n")
    (tmp_path / "my_eval.py").write_text("class FileGrader:\n    description = 'from a file'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith(("mygraders", "ksi_user_my_eval"))]:
        del sys.modules[name]


def test_module_attribute_reference_resolves(evaluators: Registry, user_code: Path) -> None:
    reg = evaluators.get("mygraders.strict:Grader")
    assert reg.obj.__name__ == "Grader"
    assert reg.name == "strict-grader"  # its own name attribute
    assert reg.plugin == "(reference) mygraders.strict"
    assert evaluators.get("mygraders.strict:Outer.Inner").obj.__qualname__ == "Outer.Inner"


def test_file_reference_resolves_relative_to_the_working_directory(
    evaluators: Registry, user_code: Path
) -> None:
    reg = evaluators.get("./my_eval.py:FileGrader")
    assert reg.obj.description == "from a file"
    assert reg.name == "./my_eval.py:FileGrader"  # no name attribute: the reference
    # Named twice, the file is imported once (the same class comes back).
    assert evaluators.get(f"{user_code}/my_eval.py:FileGrader").obj is reg.obj


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("mygraders.nope:Grader", "no module named 'mygraders.nope' on the Python path"),
        ("nosuchpkg_xyz:Grader", "no module named 'nosuchpkg_xyz'"),
        ("mygraders.strict:Grader2", "has no attribute 'Grader2'; did you mean 'Grader'"),
        ("mygraders.strict:Outer.Missing", "has no attribute 'Outer.Missing'"),
        (
            "mygraders.broken:X",
            "importing 'mygraders.broken' failed: ModuleNotFoundError: "
            "No module named 'nonexistent_dependency_xyz'",
        ),
        ("./missing.py:Grader", "missing.py' does not exist"),
        ("./my_eval.py:Nope", "'./my_eval.py' has no attribute 'Nope'"),
        ("mygraders.strict:", "expected module:attribute or ./file.py:Attribute"),
        (":Grader", "expected module:attribute"),
    ],
)
def test_bad_references_explain_what_is_missing(
    evaluators: Registry, user_code: Path, ref: str, message: str
) -> None:
    with pytest.raises(UnknownComponentError) as caught:
        evaluators.get(ref)
    assert message in str(caught.value)
    assert repr(ref) in str(caught.value)


def test_a_file_that_raises_on_import_is_a_clear_error(
    evaluators: Registry, user_code: Path
) -> None:
    (user_code / "explodes.py").write_text("raise SystemError('boom at import')\n")
    with pytest.raises(UnknownComponentError, match=r"importing .*explodes.py.* SystemError: boom"):
        evaluators.get("explodes.py:Anything")
    assert not [m for m in sys.modules if m.startswith("ksi_user_explodes")]

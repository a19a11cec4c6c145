"""Component options from the command line: KEY=VALUE strings to a typed instance."""

from __future__ import annotations

from typing import ClassVar

import attrs
import pytest

from ksi.errors import OptionsError, UserInputError
from ksi.options import create_component, parse_bool, parse_key_values

FLAG = "--evaluator-option"


@attrs.define
class Grader:
    name: ClassVar[str] = "grader"

    command: str
    timeout_sec: float = 300.0
    retries: int = 1
    verbose: bool = False
    env_keys: tuple[str, ...] = ()
    limit: int | None = None


def make(**options: object) -> Grader:
    result: Grader = create_component(Grader, options, kind="evaluator", option_flag=FLAG)
    return result


def problems(**options: object) -> list[str]:
    with pytest.raises(OptionsError) as caught:
        make(**options)
    assert isinstance(caught.value, UserInputError)  # exit code 2 at the CLI
    return str(caught.value).splitlines()


def test_strings_are_converted_to_each_option_type() -> None:
    grader = make(
        command="pytest -q",
        timeout_sec="2.5",
        retries="3",
        verbose="yes",
        env_keys="OPENAI_API_KEY, HOME",
        limit="10",
    )
    assert grader == Grader("pytest -q", 2.5, 3, True, ("OPENAI_API_KEY", "HOME"), 10)
    assert make(command="x", limit="none").limit is None
    assert make(command="x", timeout_sec="30").timeout_sec == 30.0


@pytest.mark.parametrize(
    ("word", "value"),
    [
        *[("true", True), ("Yes", True), ("1", True), ("on", True)],
        *[("false", False), ("NO", False), ("0", False), ("off", False)],
    ],
)
def test_bool_words(word: str, value: bool) -> None:
    assert make(command="x", verbose=word).verbose is value
    assert parse_bool(word) is value


def test_unknown_option_lists_the_valid_ones() -> None:
    assert problems(command="x", timout_sec="5") == [
        f"{FLAG}: evaluator 'grader' has no option 'timout_sec'; did you mean 'timeout_sec'? "
        "valid options: command, timeout_sec, retries, verbose, env_keys, limit"
    ]


def test_missing_required_option_says_how_to_give_it() -> None:
    assert problems() == [
        f"{FLAG}: evaluator 'grader' needs option 'command' (str); give it as {FLAG} command=VALUE"
    ]


def test_every_bad_value_is_reported_at_once() -> None:
    assert problems(command="x", retries="1.5", verbose="maybe", timeout_sec="fast", bogus="1") == [
        f"{FLAG}: evaluator 'grader' has no option 'bogus'; valid options: "
        "command, timeout_sec, retries, verbose, env_keys, limit",
        f"{FLAG}: evaluator 'grader': option 'timeout_sec': expected a number, got 'fast'",
        f"{FLAG}: evaluator 'grader': option 'retries': expected a whole number, got '1.5'",
        f"{FLAG}: evaluator 'grader': option 'verbose': expected true/false "
        "(or yes/no, on/off, 1/0), got 'maybe'",
    ]


def test_a_fraction_is_not_silently_truncated_for_an_int_option() -> None:
    assert problems(command="x", retries=2.7) == [
        f"{FLAG}: evaluator 'grader': option 'retries': expected a whole number, got 2.7"
    ]


def test_validators_of_the_component_class_become_option_errors() -> None:
    @attrs.define
    class Bounded:
        name: ClassVar[str] = "bounded"
        workers: int = attrs.field(default=1, validator=attrs.validators.ge(1))

    with pytest.raises(OptionsError, match=r"--agent-option: agent 'bounded': .*workers"):
        create_component(Bounded, {"workers": "0"}, kind="agent", option_flag="--agent-option")


def test_components_that_are_not_attrs_classes() -> None:
    class Plain:
        name: ClassVar[str] = "plain"

        def __init__(self, depth: int = 1) -> None:
            self.depth = depth

    assert create_component(Plain, {}, kind="agent", option_flag="-o").depth == 1
    with pytest.raises(UserInputError, match=r"-o: agent 'plain': .*unexpected keyword"):
        create_component(Plain, {"bogus": "1"}, kind="agent", option_flag="-o")

    instance = Plain()
    assert create_component(instance, {}, kind="agent", option_flag="-o") is instance
    with pytest.raises(UserInputError, match="agent 'plain' takes no options"):
        create_component(instance, {"depth": "2"}, kind="agent", option_flag="-o")


def test_parse_key_values() -> None:
    assert parse_key_values(["a=1", "cmd=echo x=y", "empty="], FLAG) == {
        "a": "1",
        "cmd": "echo x=y",
        "empty": "",
    }
    with pytest.raises(OptionsError) as caught:
        parse_key_values(["novalue", "=x"], FLAG)
    assert str(caught.value).splitlines() == [
        f"{FLAG}: 'novalue' is not KEY=VALUE (e.g. {FLAG} cmd='echo hi')",
        f"{FLAG}: '=x' is not KEY=VALUE (e.g. {FLAG} cmd='echo hi')",
    ]

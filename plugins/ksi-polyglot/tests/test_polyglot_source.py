"""The polyglot source: a checkout in Aider's layout becomes tasks; a broken one says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import CHECKOUT, exercise, ksi_cli
from ksi_polyglot.source import PolyglotTaskSource

from ksi.errors import TaskLoadError
from ksi.jobs import seed_dir

ALL_IDS = [
    f"{lang}.{name}"
    for lang in ("cpp", "go", "java", "javascript", "python", "rust")
    for name in ("digit-sum", "word-reverse")
]


def test_a_checkout_loads_every_exercise_with_language_dot_name_ids() -> None:
    tasks = PolyglotTaskSource().load(CHECKOUT)
    assert [t.id for t in tasks] == ALL_IDS
    assert {t.metadata["polyglot"]["language"] for t in tasks} == {
        "cpp", "go", "java", "javascript", "python", "rust"
    }  # fmt: skip
    java = next(t for t in tasks if t.id == "java.digit-sum").solution
    assert java is not None and list(java.files or {}) == ["src/main/java/DigitSum.java"]


def test_language_selects_by_option_or_by_path() -> None:
    only = PolyglotTaskSource(language="python,javascript").load(CHECKOUT)
    assert [t.id for t in only] == [
        "javascript.digit-sum", "javascript.word-reverse", "python.digit-sum", "python.word-reverse"
    ]  # fmt: skip
    assert [t.id for t in PolyglotTaskSource().load(CHECKOUT / "go")] == [
        "go.digit-sum", "go.word-reverse"
    ]  # fmt: skip
    [one] = PolyglotTaskSource().load(exercise("rust", "word-reverse"))
    assert one.id == "rust.word-reverse"
    with pytest.raises(ValueError, match=r"unknown language.*'cobol'.*cpp, go, java"):
        PolyglotTaskSource(language="python,cobol")


def test_the_prompt_is_the_instructions_then_the_files_to_change() -> None:
    [task] = PolyglotTaskSource().load(exercise("cpp", "digit-sum"))
    docs = exercise("cpp", "digit-sum") / ".docs" / "instructions.md"
    assert task.prompt.startswith(docs.read_text().rstrip())
    assert "Change the files you were given (digit_sum.cpp digit_sum.h)" in task.prompt
    [py] = PolyglotTaskSource().load(exercise("python", "digit-sum"))
    # instructions.append.md follows instructions.md, as in Aider's benchmark.
    assert py.prompt.index("Add up the decimal digits") < py.prompt.index("Raise a `ValueError`")
    assert "(digit_sum.py)" in py.prompt


def test_the_agent_gets_the_exercise_with_its_tests_but_without_meta(tmp_path: Path) -> None:
    [task] = PolyglotTaskSource().load(exercise("rust", "digit-sum"))
    repo = seed_dir(task, tmp_path / "seed")
    files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file())
    assert files == [
        ".docs/instructions.md", ".gitignore", "Cargo.toml", "src/lib.rs", "tests/digit-sum.rs"
    ]  # fmt: skip
    # Cargo.toml is listed as a solution file but, as in Aider's benchmark, is not the agent's.
    assert task.metadata["polyglot"]["solution_files"] == ["src/lib.rs"]


def test_the_oracle_solution_maps_examples_onto_solution_files() -> None:
    tasks = {t.id: t for t in PolyglotTaskSource().load(CHECKOUT)}
    cpp = tasks["cpp.word-reverse"].solution
    assert cpp is not None and sorted(cpp.files or {}) == ["word_reverse.cpp", "word_reverse.h"]
    meta = exercise("cpp", "word-reverse") / ".meta"
    assert (cpp.files or {})["word_reverse.cpp"] == (meta / "example.cpp").read_text()
    js = tasks["javascript.digit-sum"].solution
    assert js is not None and list(js.files or {}) == ["digit-sum.js"]
    rust = tasks["rust.digit-sum"].solution
    assert rust is not None and list(rust.files or {}) == ["src/lib.rs"]


def _broken_checkout(root: Path) -> Path:
    for name in ("digit-sum", "word-reverse"):
        shutil.copytree(exercise("python", name), root / "python" / "exercises" / "practice" / name)
    practice = root / "python" / "exercises" / "practice"
    (practice / "digit-sum" / ".meta" / "config.json").write_text(
        json.dumps({"files": {"solution": ["digit_sum.py"], "test": "digit_sum_test.py",
                              "example": [".meta/missing.py"]}})
    )  # fmt: skip
    (practice / "word-reverse" / ".docs" / "instructions.md").unlink()
    (practice / "no-config" / ".docs").mkdir(parents=True)
    (practice / "bad-json" / ".meta").mkdir(parents=True)
    (practice / "bad-json" / ".meta" / "config.json").write_text("{nope")
    (root / "cobol" / "exercises" / "practice" / "x").mkdir(parents=True)
    return root


def test_every_problem_in_a_checkout_is_reported_at_once(tmp_path: Path) -> None:
    root = _broken_checkout(tmp_path / "checkout")
    with pytest.raises(TaskLoadError) as err:
        PolyglotTaskSource().load(root)
    lines = [str(p) for p in err.value.problems]
    practice = root / "python" / "exercises" / "practice"
    config = practice / "digit-sum" / ".meta" / "config.json"
    ds = f"{config}: task 'python.digit-sum'"
    assert f"{ds}: $.files.test: must be a list of relative paths, got 'digit_sum_test.py'" in lines
    assert any(
        line.startswith(f"{ds}: $.files.example[0]: names '.meta/missing.py'") for line in lines
    )
    docs = practice / "word-reverse" / ".docs" / "instructions.md"
    assert f"{docs}: task 'python.word-reverse': is missing: the exercise's instructions" in lines
    no_config = [line for line in lines if "task 'python.no-config'" in line]
    assert len(no_config) == 2  # no config.json, no instructions.md
    assert "is missing: every exercise needs .meta/config.json" in no_config[0]
    assert any(
        "task 'python.bad-json'" in line and "cannot be read as JSON" in line for line in lines
    )
    assert any("language 'cobol' is not one the benchmark has" in line for line in lines)
    assert len(lines) == 8, lines
    res = ksi_cli("tasks", "validate", str(root), "--task-source", "polyglot")
    assert res.returncode == 2 and "8 problems; no task was loaded" in res.stderr


def test_a_path_that_is_no_checkout_says_what_is_expected(tmp_path: Path) -> None:
    [problem] = PolyglotTaskSource().validate(tmp_path)
    assert (
        "holds no exercise: expected <language>/exercises/practice/<exercise>/" in problem.message
    )

"""The polyglot evaluator applies the benchmark's rules: original tests, skips on, exit status."""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs
import pytest
from conftest import PATH, exercise, missing_toolchain, required
from ksi_polyglot.evaluator import PolyglotEvaluator
from ksi_polyglot.source import PolyglotTaskSource

from ksi.jobs import seed_dir
from ksi.models import EvalResult, TaskSpec


@pytest.fixture(autouse=True)
def _path_with_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", PATH)


def workspace(tmp_path: Path, language: str, name: str) -> tuple[TaskSpec, Path]:
    [task] = PolyglotTaskSource().load(exercise(language, name))
    return task, seed_dir(task, tmp_path / "repo")


def grade(task: TaskSpec, repo: Path, tmp_path: Path, **options: object) -> EvalResult:
    return PolyglotEvaluator(**options).grade(task, repo, log_dir=tmp_path / "eval")  # type: ignore[arg-type]


def test_the_example_passes_and_the_stub_fails(tmp_path: Path) -> None:
    task, repo = workspace(tmp_path, "python", "word-reverse")
    failed = grade(task, repo, tmp_path)
    assert (failed.status, failed.native_score) == ("scored", 0.0)
    assert "failed" in failed.stdout_tail
    shutil.copy(
        exercise("python", "word-reverse") / ".meta" / "example.py", repo / "word_reverse.py"
    )
    passed = grade(task, repo, tmp_path)
    assert (passed.status, passed.native_score) == ("scored", 1.0)
    assert passed.details["from_agent"] == ["word_reverse.py"]
    assert passed.details["left_out"] == []


def test_edited_tests_are_put_back_and_a_planted_score_is_ignored(tmp_path: Path) -> None:
    task, repo = workspace(tmp_path, "python", "digit-sum")
    # The agent guts the tests and plants a score.json: neither counts.
    (repo / "digit_sum_test.py").write_text("def test_nothing():\n    pass\n")
    (repo / "digit_sum.py").write_text(
        "import json\njson.dump({'score': 1.0}, open('score.json', 'w'))\n"
        "def digit_sum(number):\n    return 0\n"
    )
    result = grade(task, repo, tmp_path)
    assert result.native_score == 0.0
    assert (repo / "digit_sum_test.py").read_text() == (
        exercise("python", "digit-sum") / "digit_sum_test.py"
    ).read_text()
    assert "score.json ignored: only the tests' exit status counts" in result.notes


def test_only_the_solution_files_come_from_the_agent(tmp_path: Path) -> None:
    task, repo = workspace(tmp_path, "python", "digit-sum")
    # A pytest.ini that only collects would make pytest exit 0 without running a test.
    (repo / "pytest.ini").write_text("[pytest]\naddopts = --collect-only\n")
    (repo / "helper.py").write_text("X = 1\n")
    result = grade(task, repo, tmp_path)
    assert result.native_score == 0.0
    assert not (repo / "pytest.ini").exists() and not (repo / "helper.py").exists()
    assert result.details["left_out"] == ["helper.py", "pytest.ini"]
    assert any(n.startswith("not graded (only the solution files") for n in result.notes)


def test_a_javascript_test_script_the_agent_rewrote_does_not_count(tmp_path: Path) -> None:
    task, repo = workspace(tmp_path, "javascript", "digit-sum")
    package = repo / "package.json"
    package.write_text(package.read_text().replace('"jest ./*"', '"true"'))
    result = grade(task, repo, tmp_path)
    assert result.native_score == 0.0, result.stdout_tail
    assert result.details["left_out"] == ["package.json"]
    assert '"jest ./*"' in package.read_text()


def test_tests_that_hang_fail_instead_of_going_unscored(tmp_path: Path) -> None:
    task, repo = workspace(tmp_path, "python", "digit-sum")
    (repo / "digit_sum.py").write_text("def digit_sum(number):\n    while True:\n        pass\n")
    result = grade(task, repo, tmp_path, timeout_sec=5)
    # Aider's benchmark counts a timeout as a failed test run: the solution hangs.
    assert (result.status, result.native_score) == ("tests_timed_out", 0.0)


def test_a_missing_toolchain_is_unscored_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task, repo = workspace(tmp_path, "python", "digit-sum")
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "sh").symlink_to(shutil.which("sh") or "/bin/sh")
    monkeypatch.setenv("PATH", str(bare))
    result = grade(task, repo, tmp_path)
    assert (result.status, result.native_score) == ("no_toolchain", None)
    assert any("pytest (for python3) is not installed here" in n for n in result.notes)


def test_javascript_skipped_tests_are_turned_on(tmp_path: Path) -> None:
    task, repo = workspace(tmp_path, "javascript", "word-reverse")
    # Passes the one test the exercise runs by default, not the xtest ones.
    (repo / "word-reverse.js").write_text(
        "export const reverseWords = (s) => s.split(' ').reverse().join(' ');\n"
    )
    result = grade(task, repo, tmp_path)
    assert result.native_score == 0.0, result.stdout_tail
    assert "xtest(" not in (repo / "word-reverse.spec.js").read_text()
    assert "extra whitespace" in result.stdout_tail
    assert (repo / "node_modules").is_symlink()


def test_the_second_try_prompt_carries_the_cleaned_test_output(tmp_path: Path) -> None:
    task, repo = workspace(tmp_path, "python", "digit-sum")
    result = grade(task, repo, tmp_path, tries=2)
    assert PolyglotEvaluator(tries=2).rounds == 2
    prompt = PolyglotEvaluator(tries=2).feedback(task, result)
    assert prompt is not None
    assert "FAILED digit_sum_test.py::DigitSumTest::test_zero" in prompt
    assert str(repo) not in prompt  # the graded copy's path becomes the exercise's name
    assert prompt.rstrip().endswith("Fix the code in digit_sum.py so that they pass.")
    passed = attrs.evolve(result, native_score=1.0)
    assert PolyglotEvaluator(tries=2).feedback(task, passed) is None


def test_tries_must_be_sensible() -> None:
    with pytest.raises(ValueError, match="tries must be between 1 and 10"):
        PolyglotEvaluator(tries=0)


def test_java_disabled_tests_are_turned_on(tmp_path: Path) -> None:
    missing = missing_toolchain("java")
    if missing and not required("java"):
        pytest.skip(f"java toolchain missing: {', '.join(missing)}")
    task, repo = workspace(tmp_path, "java", "digit-sum")
    # Right for the one test that is not @Disabled (zero), wrong for the disabled one.
    (repo / "src" / "main" / "java" / "DigitSum.java").write_text(
        "class DigitSum {\n    int of(long number) {\n        return 0;\n    }\n}\n"
    )
    result = grade(task, repo, tmp_path)
    assert result.native_score == 0.0, result.stdout_tail
    assert "@Disabled(" not in (repo / "src" / "test" / "java" / "DigitSumTest.java").read_text()
    assert "severalDigits" in result.stdout_tail

"""Whole runs through the installed plugin: oracle solves every exercise, nop none, two tries."""

from __future__ import annotations

from pathlib import Path

from conftest import available_languages, copy_checkout, exercise, ksi_cli, run_report


def test_oracle_solves_every_exercise_and_nop_none(tmp_path: Path) -> None:
    languages = available_languages()
    checkout = copy_checkout(tmp_path / "checkout", languages)
    expected_ids = {
        f"{lang}.{name}" for lang in languages for name in ("digit-sum", "word-reverse")
    }
    oracle = run_report(tmp_path, checkout, "oracle")
    scores = {a["task_id"]: a["score"] for a in oracle["attempts"]}
    assert scores == dict.fromkeys(expected_ids, 1.0), {
        a["task_id"]: (a["eval"] or {}).get("stdout_tail", "")[-800:]
        for a in oracle["attempts"]
        if a["score"] != 1.0
    }
    nop = run_report(tmp_path, checkout, "nop")
    assert {a["task_id"]: a["score"] for a in nop["attempts"]} == dict.fromkeys(expected_ids, 0.0)
    assert {a["status"] for a in nop["attempts"]} == {"scored"}


AGENT = (
    'if grep -q "The tests failed" "$KSI_PROMPT_FILE" && grep -q "only non-negative" '
    '"$KSI_PROMPT_FILE"; then cp "$FIX" repo/digit_sum.py; '
    "else printf 'def digit_sum(number):\\n    return sum(map(int, str(number)))\\n' "
    "> repo/digit_sum.py; fi"
)


def test_a_second_try_sees_the_failing_tests_and_can_fix_them(tmp_path: Path) -> None:
    fix = exercise("python", "digit-sum") / ".meta" / "example.py"
    cmd = AGENT.replace("$FIX", str(fix))
    one_try = run_report(
        tmp_path / "one", exercise("python", "digit-sum"), "command", "--agent-option", f"cmd={cmd}"
    )
    [attempt] = one_try["attempts"]
    assert (attempt["score"], attempt["rounds"]) == (0.0, [])
    two_tries = run_report(
        tmp_path / "two", exercise("python", "digit-sum"), "command",
        "--agent-option", f"cmd={cmd}", "--evaluator-option", "tries=2",
    )  # fmt: skip
    [attempt] = two_tries["attempts"]
    assert attempt["score"] == 1.0
    assert attempt["rounds"] == [
        {"round": 1, "score": 0.0, "eval_status": "scored", "agent_status": "completed"}
    ]


def test_build_images_refuses_an_unknown_language() -> None:
    res = ksi_cli("polyglot", "build-images", "cobol")
    assert res.returncode == 2
    assert (
        "unknown language(s) cobol; choose from cpp, go, java, javascript, python, rust"
        in res.stderr
    )

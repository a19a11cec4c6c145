"""What a new user trips over (issue 15), through the real ``ksi`` command line.

Each test is one trap as a user meets it: correct work that capture used to
drop, an agent that wrote outside repo/, failures that looked like success.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from run_helpers import env_without_ksi_settings, journal_lines, ksi, write_tasks

ADD_EVAL = "python3 -c 'from calc import add; assert add(2, 3) == 5'"
GREATEST_TESTS = "from greatest import greatest\nassert greatest([3, 9, 2]) == 9\n"


def _greatest_task(**solution: object) -> dict[str, object]:
    return {
        "task_id": "greatest",
        "prompt": "Write greatest(xs) in greatest.py.",
        "files": {"test_greatest.py": GREATEST_TESTS},
        "eval": {"command": "python3 test_greatest.py"},
        "solution": solution,
    }


def test_a_solution_named_like_greatest_py_is_graded(tmp_path: Path) -> None:
    """Issue 15's worst trap: 'test' inside a name is not a test file."""
    files = {
        "greatest.py": "def greatest(xs):\n    return max(xs)\n",
        "latest.py": "",
        "contest.py": "",
        "attestation.py": "",
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [_greatest_task(files=files)])
    result = ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    assert "solved: 1/1" in result.stdout
    assert "capture dropped" not in result.stdout
    (record,) = journal_lines(tmp_path / "run")
    assert record["score"] == 1.0 and record["skipped_files"] == []


def test_dropped_and_restored_files_are_shown_in_the_summary(tmp_path: Path) -> None:
    """A solution that edits the seed's test and adds its own: both are visible, not silent."""
    files = {
        "greatest.py": "def greatest(xs):\n    return 0\n",
        "test_greatest.py": "assert True\n",  # tampering with the task's test
        "tests/test_extra.py": "assert True\n",
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [_greatest_task(files=files)])
    validate = ksi("tasks", "validate", str(tasks))
    assert validate.returncode == 0, validate.stderr
    assert "OK: 1 task" in validate.stdout
    assert "edits the starting file 'test_greatest.py'" in validate.stderr
    assert "capture restores the starting version" in validate.stderr
    assert "writes 'tests/test_extra.py', which looks like a test" in validate.stderr

    result = ksi("run", str(tasks), "--agent", "oracle", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    assert "capture dropped or restored 2 file(s)" in result.stdout
    assert (
        "greatest/1: test_greatest.py: test file edited by the agent: seed version restored"
        in result.stdout
    )
    assert "greatest/1: tests/test_extra.py: new file that looks like a test" in result.stdout
    assert "solved: 0/1" in result.stdout  # graded against the real test

    check = ksi("check", str(tasks))
    assert check.returncode == 1
    assert "CAPTURE greatest: oracle's test_greatest.py: test file edited" in check.stdout
    assert "CAPTURE greatest: oracle's tests/test_extra.py: new file" in check.stdout


def test_protect_glob_keeps_an_eval_script_from_being_gamed(tmp_path: Path) -> None:
    """run_tests.sh is no test by name: --protect makes capture restore it."""
    task = {
        "task_id": "gamed",
        "prompt": "Make run_tests.sh pass.",
        "files": {"run_tests.sh": "exit 1\n"},
        "eval": {"command": "sh run_tests.sh"},
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    cheat = ("--agent", "command", "--agent-option", "cmd=echo 'exit 0' > repo/run_tests.sh")
    plain = ksi("run", str(tasks), *cheat, "--run-dir", str(tmp_path / "plain"))
    assert "solved: 1/1" in plain.stdout, plain.stderr
    protected = ksi(
        "run", str(tasks), *cheat, "--protect", "run_tests.sh", "--run-dir", str(tmp_path / "p")
    )
    assert protected.returncode == 0, protected.stderr
    assert "solved: 0/1" in protected.stdout
    assert "gamed/1: run_tests.sh: test file edited by the agent" in protected.stdout
    bad = ksi("run", str(tasks), *cheat, "--protect", "../x", "--run-dir", str(tmp_path / "b"))
    assert bad.returncode == 2 and "protect glob '../x'" in bad.stderr


def test_command_agent_writing_outside_repo_gets_a_warning(tmp_path: Path) -> None:
    """cmd='echo ... > calc.py' writes into the workspace, not repo/: said, not silent."""
    task = {
        "task_id": "add",
        "prompt": "Write add(a, b) in calc.py.",
        "eval": {"command": ADD_EVAL},
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    code = "def add(a, b): return a + b"
    wrong = ksi(
        "run", str(tasks), "--agent", "command", "--agent-option",
        f"cmd=echo '{code}' > calc.py", "--run-dir", str(tmp_path / "wrong"),
    )  # fmt: skip
    assert wrong.returncode == 0, wrong.stderr
    assert "warning: 1 attempt(s) changed nothing in repo/: add/1" in wrong.stdout
    assert "$KSI_REPO" in wrong.stdout
    right = ksi(
        "run", str(tasks), "--agent", "command", "--agent-option",
        f'cmd=echo "{code}" > "$KSI_REPO/calc.py"', "--run-dir", str(tmp_path / "right"),
    )  # fmt: skip
    assert "solved: 1/1" in right.stdout, right.stderr
    assert "changed nothing" not in right.stdout
    # Where the agent starts is in the help a user reads first.
    assert "$KSI_REPO" in ksi("run", "--help").stdout
    agents = ksi("agents", "--json")
    command = next(a for a in json.loads(agents.stdout)["agents"] if a["name"] == "command")
    assert "$KSI_REPO" in command["description"]


def test_failures_say_how_the_agent_ended_and_why_grading_failed(tmp_path: Path) -> None:
    task = {
        "task_id": "add",
        "prompt": "Write add(a, b) in calc.py.",
        "eval": {"command": ADD_EVAL},
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    result = ksi(
        "run", str(tasks), "--agent", "command", "--agent-option",
        "cmd=echo 'no API key' >&2; exit 3", "--run-dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "failing tasks (1):" in out
    assert "attempt 1 (scored): agent crashed, exit code 3: exited with code 3" in out
    assert "no API key" in out
    assert "grading: scored 0.00, eval exited 1: ModuleNotFoundError: No module named 'calc'" in out
    assert f"open: {tmp_path / 'run' / 'attempts' / 'add' / '1'}" in out


def test_an_evaluator_raising_on_every_attempt_does_not_look_like_success(
    tmp_path: Path,
) -> None:
    grader = tmp_path / "grader.py"
    grader.write_text(
        "class Broken:\n"
        "    name = 'broken'\n"
        "    def grade(self, task, workspace, **kw):\n"
        "        raise RuntimeError('fixture data.csv is missing')\n"
    )
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p"}])
    args = ("run", str(tasks), "--agent", "nop", "--evaluator", f"{grader}:Broken")
    result = ksi(*args, "--attempts", "2", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr  # without --fail-on-error: report, exit 0
    out = result.stdout
    assert out.count("grading: not graded: RuntimeError: fixture data.csv is missing") == 2
    assert "while grading with evaluator 'broken'" in out
    assert "run: complete, but 2 attempts ended in error" in out
    assert "run: complete\n" not in out
    strict = ksi(*args, "--attempts", "2", "--run-dir", str(tmp_path / "run"), "--fail-on-error")
    assert strict.returncode == 1
    assert "error: 2 attempt(s) ended in error (--fail-on-error)" in strict.stderr
    ok = ksi(
        "run", str(tasks), "--agent", "nop", "--fail-on-error", "--run-dir", str(tmp_path / "ok")
    )
    assert ok.returncode == 0, ok.stderr  # unscored is not an error


def test_progress_counts_solved_tasks_like_the_summary_on_resume(tmp_path: Path) -> None:
    task = {
        "task_id": "t",
        "prompt": "p",
        "eval": {"command": "true"},
        "solution": {"command": "true"},
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    run = ("run", str(tasks), "--agent", "oracle", "--run-dir", str(tmp_path / "run"))
    first = ksi(*run, "--attempts", "2")
    assert "2/2 attempts done, 1/1 tasks solved" in first.stderr
    again = ksi(*run, "--attempts", "2")  # resumes: nothing runs, the task is still solved
    assert "2/2 attempts done, 1/1 tasks solved" in again.stderr
    assert "solved: 1/1" in again.stdout


def test_check_leaves_nothing_in_tmp(tmp_path: Path) -> None:
    task = {"task_id": "t", "prompt": "p", "eval": {"command": "test -f done"}}
    task["solution"] = {"command": "touch done"}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = ksi("check", str(tasks), env={"TMPDIR": str(scratch)})
    assert result.returncode == 0, result.stderr
    assert "1/1 tasks OK" in result.stdout and "--run-dir" in result.stdout
    assert not [p for p in scratch.iterdir() if p.name.startswith("ksi-check-")]
    assert tempfile.gettempdir() != str(scratch)  # the check used its own TMPDIR


def test_records_say_the_graded_copy_was_removed(tmp_path: Path) -> None:
    task = {"task_id": "t", "prompt": "p", "eval": {"command": "true"}}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    result = ksi("-v", "run", str(tasks), "--agent", "nop", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    (record,) = journal_lines(tmp_path / "run")
    workdir = record["eval"]["eval_workdir"]
    assert not os.path.exists(workdir)
    assert record["eval"]["details"]["eval_workdir_removed"] is True
    # Housekeeping, told in the log, not among the notes the summary gives as reasons.
    assert f"{workdir} (a copy of " in result.stderr and "removed after grading" in result.stderr
    assert not any("removed after grading" in note for note in record["eval"]["notes"])


def test_a_partial_score_is_told_by_its_source_not_by_housekeeping(tmp_path: Path) -> None:
    task = {
        "task_id": "partial",
        "prompt": "p",
        "eval": {"command": "echo '{\"score\": 0.75}' > score.json"},
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    result = ksi("run", str(tasks), "--agent", "nop", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    (grading,) = [line.strip() for line in result.stdout.splitlines() if "grading:" in line]
    assert grading == "grading: scored 0.75 from score.json, eval exited 0"


def test_python_api_suggests_the_option_meant() -> None:
    import ksi as ksi_api
    from ksi.errors import UserInputError

    with pytest.raises(UserInputError, match="unknown option 'attemps'; did you mean 'attempts'"):
        ksi_api.run([], agent="nop", attemps=2)


def test_python_api_takes_one_tasks_path_and_records_it_like_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ksi.run(a, tasks_path=b)`` ran b without a word; ``ksi run a --tasks-path b`` refuses."""
    import ksi as ksi_api
    from ksi.errors import KsiError
    from ksi.models import TaskSpec

    a = write_tasks(tmp_path / "a.jsonl", [{"task_id": "a", "prompt": "p"}])
    b = write_tasks(tmp_path / "b.jsonl", [{"task_id": "b", "prompt": "p"}])
    cli = ksi(
        "run", str(a), "--tasks-path", str(b), "--agent", "nop", "--run-dir", str(tmp_path / "c")
    )
    assert (
        cli.returncode == 2
        and f"two tasks paths: {str(a)!r} and --tasks-path {str(b)!r}" in cli.stderr
    )
    with pytest.raises(
        KsiError, match=f"two tasks paths: {str(a)!r} and tasks_path= {str(b)!r}; give one"
    ):
        ksi_api.run(str(a), agent="nop", tasks_path=str(b), run_dir=tmp_path / "py")
    assert not (tmp_path / "py").exists()

    # A relative path is recorded as the CLI records it, so a resume elsewhere finds it.
    monkeypatch.chdir(tmp_path)
    ksi_api.run("a.jsonl", agent="nop", tasks_path="a.jsonl", run_dir=tmp_path / "py")
    assert json.loads((tmp_path / "py" / "run.json").read_text())["config"]["tasks_path"] == str(a)
    other = tmp_path / "elsewhere"
    other.mkdir()
    resumed = ksi(
        "run", "--resume", "--run-dir", str(tmp_path / "py"), "--attempts", "2", cwd=other
    )
    assert resumed.returncode == 0, resumed.stderr
    assert len(journal_lines(tmp_path / "py")) == 2
    # In-memory tasks naming their file: `ksi regrade` from elsewhere reloads it.
    ksi_api.run(
        [TaskSpec(id="a", prompt="p")], agent="nop", tasks_path="a.jsonl", run_dir=tmp_path / "m"
    )
    regrade = ksi("regrade", str(tmp_path / "m"), cwd=other)
    assert regrade.returncode == 0, regrade.stderr
    assert [bool(r.get("regraded_at")) for r in journal_lines(tmp_path / "m")] == [
        False,
        True,
    ]


def test_option_errors_speak_the_callers_interface_with_a_suggestion(tmp_path: Path) -> None:
    """Issue 28 #11: Python callers read their keyword, CLI users their flag; both a hint."""
    import ksi as ksi_api
    from ksi.errors import OptionsError

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "a", "prompt": "p", "eval": {"command": "true"}}\n')
    with pytest.raises(OptionsError) as caught:
        ksi_api.run(
            str(tasks),
            agent="nop",
            evaluator="command",
            evaluator_options={"timout_sec": "3"},
            run_dir=tmp_path / "py",
        )
    assert str(caught.value).startswith(
        "evaluator_options: evaluator 'command' has no option 'timout_sec'; "
        "did you mean 'timeout_sec'? valid options: "
    )
    assert "--evaluator-option" not in str(caught.value)
    with pytest.raises(OptionsError, match=r"^agent_options: agent 'command' has no option 'cmdd'; "
                       r"did you mean 'cmd'\?"):  # fmt: skip
        ksi_api.run(
            str(tasks), agent="command", agent_options={"cmdd": "x"}, run_dir=tmp_path / "py2"
        )

    proc = subprocess.run(
        [sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "nop",
         "--evaluator", "command", "--evaluator-option", "timout_sec=3",
         "--run-dir", str(tmp_path / "cli")],
        capture_output=True, text=True, timeout=120, env=env_without_ksi_settings(),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert (
        "error: --evaluator-option: evaluator 'command' has no option 'timout_sec'; "
        "did you mean 'timeout_sec'?"
    ) in proc.stderr


CSV_PLUGIN = """
import ksi


class CsvSource:
    name = "csv"
    aliases = ()
    description = "Tasks from a CSV file."
    default_evaluator = "command"
    file_suffixes = (".csv",)

    def load(self, path):
        return []

    def validate(self, path):
        return []


@ksi.hookimpl
def ksi_register_task_sources(register):
    register(CsvSource)
"""


def test_an_unsupported_tasks_file_names_the_source_that_reads_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "ksi_csv_tasks-1.0.dist-info").mkdir(parents=True)
    (site / "ksi_csv_tasks.py").write_text(CSV_PLUGIN)
    info = site / "ksi_csv_tasks-1.0.dist-info"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ksi-csv-tasks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ksi]\ncsv = ksi_csv_tasks\n")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,prompt\n")
    env = env_without_ksi_settings()
    env["PYTHONPATH"] = str(site)
    result = subprocess.run(
        [sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "nop"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "unsupported file type '.csv'" in result.stderr
    assert "give --task-source csv (plugin csv)" in result.stderr
    # Without such a plugin, the message lists what is installed instead.
    bare = ksi("run", str(tasks), "--agent", "nop", env={"KSI_LOAD_PLUGINS": ""})
    assert bare.returncode == 2
    assert "no other task source is installed" in bare.stderr


def test_a_directory_without_task_source_names_the_sources_that_read_one(tmp_path: Path) -> None:
    """Issue 28 #12: ``ksi run some/dir`` says which installed task sources read directories."""
    site = tmp_path / "site"
    info = site / "ksi_dir_tasks-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "ksi_dir_tasks.py").write_text(
        CSV_PLUGIN.replace('"csv"', '"folders"').replace(
            'file_suffixes = (".csv",)', "reads_directories = True"
        )
    )
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ksi-dir-tasks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ksi]\nfolders = ksi_dir_tasks\n")
    bench = tmp_path / "bench"
    bench.mkdir()
    only_it = ksi(
        "run", str(bench), "--agent", "nop",
        env={"PYTHONPATH": str(site), "KSI_LOAD_PLUGINS": "folders"},
    )  # fmt: skip
    assert only_it.returncode == 2, only_it.stderr
    assert (
        "is a directory; the custom source reads a .json or .jsonl tasks file; installed task "
        "sources that read a directory: give --task-source folders (plugin folders)"
    ) in only_it.stderr
    bare = ksi("run", str(bench), "--agent", "nop", env={"KSI_LOAD_PLUGINS": ""})
    assert bare.returncode == 2
    assert "a task source from a plugin may read directories, and none installed does" in (
        bare.stderr
    )


def test_tasks_list_names_the_plugin_evaluator_of_tasks_without_a_command(
    tmp_path: Path,
) -> None:
    """A source whose evaluator is not `command` grades tasks with no eval command."""
    site = tmp_path / "site"
    info = site / "ksi_graded-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "ksi_graded.py").write_text(
        "import ksi\n"
        "from ksi.models import TaskSpec\n"
        "class Src:\n"
        "    name = 'graded'\n    aliases = ()\n    description = 'd'\n"
        "    default_evaluator = 'rubric'\n"
        "    def load(self, path):\n        return [TaskSpec(id='t1', prompt='p')]\n"
        "    def validate(self, path):\n        return []\n"
        "@ksi.hookimpl\n"
        "def ksi_register_task_sources(register):\n    register(Src)\n"
    )
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ksi-graded\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ksi]\ngraded = ksi_graded\n")
    env = env_without_ksi_settings()
    env["PYTHONPATH"] = str(site)
    result = subprocess.run(
        [sys.executable, "-m", "ksi", "tasks", "list", str(tmp_path), "--task-source", "graded"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "(graded by the 'rubric' evaluator)" in result.stdout
    assert "unscored" not in result.stdout


HELP_COMMANDS = (
    [], ["run"], ["report"], ["regrade"], ["check"], ["grade"], ["agents"], ["doctor"],
    ["cleanup"], ["install"], ["uninstall"], ["plugins"], ["plugins", "new"], ["tasks"],
    ["tasks", "validate"], ["tasks", "list"],
)  # fmt: skip


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=lambda c: " ".join(c) or "ksi")
def test_help_shows_what_a_user_types(command: list[str]) -> None:
    """No {run_dir} placeholders, no <list[str]> types, no summaries cut off with '...'."""
    result = ksi(*command, "--help", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert not re.search(r"\{[A-Za-z_.]+\}", text), text
    assert "<list[" not in text, text
    usage = text.splitlines()[0]
    assert usage.startswith("Usage: ksi"), usage
    commands = text.split("Commands:\n", 1)[1] if "Commands:\n" in text else ""
    for line in commands.splitlines():
        assert not line.rstrip().endswith("..."), f"summary cut short: {line!r}"


def test_the_scaffold_pins_the_range_compatibility_md_recommends(tmp_path: Path) -> None:
    made = ksi("plugins", "new", "pinned", "--dir", str(tmp_path / "p"))
    assert made.returncode == 0, made.stderr
    pyproject = (tmp_path / "p" / "pyproject.toml").read_text()
    docs = (Path(__file__).parent.parent / "docs" / "plugins" / "compatibility.md").read_text()
    pin = re.search(r'dependencies = \["(ksi[^"]*)"\]', docs)
    assert pin is not None
    assert f'"{pin.group(1)}"' in pyproject


@pytest.mark.docker
def test_docker_without_an_image_tells_a_custom_task_user_to_pass_image(tmp_path: Path) -> None:
    """The custom format has no image field: the fix offered is --image, not task metadata."""
    from docker_support import docker_unavailable

    why = docker_unavailable()
    if why:
        pytest.skip(why)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p"}])
    result = ksi(
        "run", str(tasks), "--agent", "nop", "--environment", "docker",
        "--run-dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "no image for task 't'; pass --image IMAGE" in result.stderr
    assert "tasks of a tasks file (the custom source) cannot name an image" in result.stderr
    assert "docker_image" not in result.stderr

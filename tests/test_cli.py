"""The root ``ksi`` command: a fresh app per call, errors in one place, -v/--debug, lazy start.

Behaviour a user sees is checked through real ``ksi`` processes.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import typer
import typer.main
from test_plugins import Site, ksi_cli, site  # noqa: F401  (site is a fixture)

from ksi.cli import build_app
from ksi.cli.startup import BUILTIN_COMMANDS


def _names(app: typer.Typer) -> list[str]:
    group = typer.main.get_command(app)
    ctx = group.make_context("ksi", [], resilient_parsing=True)
    return list(group.list_commands(ctx))  # type: ignore[attr-defined]


def test_build_app_builds_a_fresh_app_each_call() -> None:
    first, second = build_app(), build_app()
    assert first is not second
    names = _names(first)
    assert names == _names(second)
    assert len(names) == len(set(names))  # called twice, still every command once
    assert names[: len(BUILTIN_COMMANDS)] == list(BUILTIN_COMMANDS)

    @first.command("only-here")
    def only_here() -> None:
        """Added to the first app only."""

    assert "only-here" not in _names(build_app())


def test_command_summaries_listed_without_import_match_the_commands() -> None:
    """`ksi --help` lists built-ins from a table; it must say what each command's help says."""
    group = typer.main.get_command(build_app())
    ctx = group.make_context("ksi", [], resilient_parsing=True)
    for name, (_, summary) in BUILTIN_COMMANDS.items():
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        first_paragraph = " ".join(inspect.cleandoc(command.help).split("\n\n")[0].split())
        assert summary == first_paragraph, name


def test_a_plugin_commands_ksi_error_is_reported_like_a_builtins(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    site.add("ksi-fake-failing-cmd", "ksi_fake_failing_cmd", ep_name="failing")
    proc = ksi_cli("mistake", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "error: --thing: 'x' is not a thing; use one of a, b\n"

    proc = ksi_cli("quota", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 3  # the error's own exit code
    assert proc.stderr == "error: the quota is used up\nerror: wait until tomorrow\n"


def test_an_unexpected_error_is_one_line_unless_debug(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    site.add("ksi-fake-failing-cmd", "ksi_fake_failing_cmd", ep_name="failing")
    proc = ksi_cli("crash", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "error: unexpected KeyError: 'missing-key'",
        "error: this is a bug in ksi or in a plugin; run again with `ksi --debug ...` to see "
        "the traceback, and report it",
    ]

    proc = ksi_cli("--debug", "crash", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Traceback (most recent call last):")
    assert 'ksi_fake_failing_cmd.py", line' in proc.stderr
    assert proc.stderr.rstrip().endswith("KeyError: 'missing-key'")


def test_verbose_reports_plugins_that_failed_and_debug_their_tracebacks(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    site.add("ksi-fake-broken", "ksi_fake_broken", version="2.3", ep_name="broken")
    site.add("ksi-fake-cmd", "ksi_fake_cmd", ep_name="hello")
    failure = "plugin 'broken' from ksi-fake-broken 2.3 failed to import: RuntimeError:"

    quiet = ksi_cli("hello", env=site.env(), cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "hello, world from a plugin\n", "")

    verbose = ksi_cli("-v", "hello", env=site.env(), cwd=tmp_path)
    assert verbose.returncode == 0
    assert verbose.stderr.startswith(f"warning: {failure}")
    assert "Traceback" not in verbose.stderr

    debug = ksi_cli("--debug", "hello", env=site.env(), cwd=tmp_path)
    assert debug.returncode == 0
    assert debug.stderr.startswith(f"warning: {failure}")
    assert "Traceback (most recent call last):" in debug.stderr
    assert 'ksi_fake_broken.py", line' in debug.stderr


def _modules_after(code: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return set(proc.stdout.split())


def test_importing_ksi_or_its_version_imports_nothing_else() -> None:
    assert {m for m in _modules_after("import ksi._version") if m.startswith("ksi")} == {
        "ksi",
        "ksi._version",
    }
    loaded = _modules_after("import ksi")
    assert {m for m in loaded if m.startswith("ksi")} == {"ksi", "ksi._version"}
    assert not loaded & {"typer", "pluggy", "attrs", "attr", "cattrs", "rich"}


#: The packages that run attempts, and the built-in components: none is needed to print help.
RUNNER_AND_COMPONENTS = (
    "ksi.agents",
    "ksi.environments",
    "ksi.attempt",
    "ksi.runs",
    "ksi.rundir",
    "ksi.generations",
    "ksi.jobs",
)


def test_ksi_help_imports_no_builtin_command_or_plugin_module() -> None:
    loaded = _modules_after(
        "from ksi.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    commands = {f"ksi.cli.{module}" for module, _ in BUILTIN_COMMANDS.values()}
    assert not loaded & commands
    assert not {m for m in loaded if m.startswith(RUNNER_AND_COMPONENTS)}
    assert "rich" not in loaded


#: What only some runs need: typer's pydantic converter (KSI converts plain command-line
#: values itself), the knowledge tools, the ACP client's event loop, a docker probe's sockets.
ONLY_SOME_RUNS_NEED = ("pydantic", "ksi.knowledge.tools", "asyncio", "argparse", "socket")


def test_a_command_run_imports_nothing_only_other_runs_need(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text(
        '{"task_id": "t", "prompt": "p", "files": {"a.txt": "a"}, "eval": {"command": "true"}}\n'
    )
    code = (
        f"import os\nfrom ksi.cli import main\nos.chdir({str(tmp_path)!r})\ntry:\n"
        "    main(['run', 'tasks.jsonl', '--agent', 'command', '--agent-option', 'cmd=true',"
        " '--attempts', '1', '--max-cost', '2.5', '--run-dir', 'run'])\n"
        "except SystemExit:\n    pass"
    )
    loaded = _modules_after(code)
    assert (tmp_path / "run" / "journal.jsonl").read_text().count("\n") == 1
    assert "ksi.runs.driver" in loaded
    assert not {
        m for m in loaded if m.split(".")[0] in ONLY_SOME_RUNS_NEED or m in ONLY_SOME_RUNS_NEED
    }


def test_a_wrong_value_is_still_refused_in_typers_words(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"task_id": "t", "prompt": "p"}\n')
    for value, words in [("x", "valid integer"), ("0", "greater than or equal to 1")]:
        args = ["run", "tasks.jsonl", "--agent", "nop", "--attempts", value]
        proc = ksi_cli(*args, env=dict(os.environ), cwd=tmp_path)
        assert proc.returncode == 2
        assert "Invalid value for '--attempts'" in proc.stderr and words in proc.stderr


# -- options an environment declares for `ksi run` ---------------------------------


def test_an_environment_adds_its_own_flags_to_ksi_run(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    site.add("ksi-fake-env", "ksi_fake_env", ep_name="flavoured")
    help_text = ksi_cli("run", "--help", env=site.env(COLUMNS="200"), cwd=tmp_path)
    assert help_text.returncode == 0, help_text.stderr
    lines = help_text.stdout.splitlines()
    (flavour,) = [line for line in lines if line.strip().startswith("--flavour")]
    assert "Which flavour (flavoured environment)." in flavour
    # docker's flags keep their help; a flag declared twice keeps its first declaration.
    (image,) = [line for line in lines if line.strip().startswith("--image")]
    assert "Docker image for the run." in image

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"task_id": "t", "prompt": "p", "files": {"a.txt": "a"}, '
        '"eval": {"command": "grep -q mint FLAVOUR"}}\n'
    )
    args = ["run", str(tasks), "--agent", "nop", "--environment", "flavoured"]
    proc = ksi_cli(*args, "--flavour", "mint", "--run-dir", "r1", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "solved: 1/1" in proc.stdout
    config = json.loads((tmp_path / "r1" / "run.json").read_text())["config"]
    assert config["environment_options"] == {"flavour": "mint"}

    # On a resume the flag counts as given, like --environment-option: the same value
    # resumes, another is refused naming the option.
    resume = ["run", "--run-dir", "r1", "--resume", "--flavour"]
    proc = ksi_cli(*resume, "mint", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = ksi_cli(*resume, "lime", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 2
    assert "environment_options: the run has {'flavour': 'mint'}" in proc.stderr
    assert "this command has {'flavour': 'lime'}" in proc.stderr


def test_docker_flags_still_reach_the_environment_options(tmp_path: Path) -> None:
    """--cpus is docker's; given to an environment without that option, the error names it."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "t", "prompt": "p", "files": {"a.txt": "a"}}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "ksi", "run", str(tasks), "--agent", "nop", "--cpus", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "cpus" in proc.stderr


def test_a_task_source_takes_options_and_adds_its_own_flags(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    site.add("ksi-fake-source", "ksi_fake_source", ep_name="prefixed")
    help_text = ksi_cli("run", "--help", env=site.env(COLUMNS="200"), cwd=tmp_path)
    (prefix,) = [
        line for line in help_text.stdout.splitlines() if line.strip().startswith("--prefix")
    ]
    assert "Prefix of every task id (prefixed source)." in prefix

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "t", "prompt": "p"}\n')
    listed = ksi_cli(
        "tasks", "list", str(tasks), "--task-source", "prefixed",
        "--task-source-option", "prefix=opt", "--json", env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert [row["task_id"] for row in json.loads(listed.stdout)] == ["opt-t"]

    args = ["run", str(tasks), "--agent", "nop", "--task-source", "prefixed", "--run-dir", "r1"]
    proc = ksi_cli(*args, "--prefix", "flag", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r1" / "attempts" / "flag-t").is_dir()
    config = json.loads((tmp_path / "r1" / "run.json").read_text())["config"]
    assert config["task_source_options"] == {"prefix": "flag"}
    # A resume with another value is another experiment: refused, naming the option.
    resume = ["run", "--run-dir", "r1", "--resume", "--prefix", "other"]
    proc = ksi_cli(*resume, env=site.env(), cwd=tmp_path)
    assert proc.returncode == 2
    assert "task_source_options: the run has {'prefix': 'flag'}" in proc.stderr

    bad = ksi_cli(*args[:-1], "r2", "--task-source-option", "prefx=x", env=site.env(), cwd=tmp_path)
    assert bad.returncode == 2 and "prefx" in bad.stderr and "prefix" in bad.stderr


def test_regrade_loads_the_tasks_with_the_runs_task_source_options(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A run whose task ids come from a source option regrades every attempt (not none)."""
    site.add("ksi-fake-source", "ksi_fake_source", ep_name="prefixed")
    tasks = tmp_path / "tasks.jsonl"
    flag = tmp_path / "flag"
    tasks.write_text(
        json.dumps({"task_id": "t", "prompt": "p", "eval": {"command": f"test -f {flag}"}}) + "\n"
    )
    args = ["run", str(tasks), "--agent", "nop", "--task-source", "prefixed", "--run-dir", "r1"]
    proc = ksi_cli(*args, "--prefix", "flag", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "solved: 0/1" in proc.stdout
    flag.touch()
    regrade = ksi_cli("regrade", "r1", env=site.env(), cwd=tmp_path)
    assert regrade.returncode == 0, regrade.stderr
    assert "solved: 1/1" in regrade.stdout
    assert "not regraded" not in regrade.stderr


def test_check_and_grade_take_the_task_sources_options(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The options `ksi run` gives a task source reach it from `ksi check` and `ksi grade` too."""
    site.add("ksi-fake-source", "ksi_fake_source", ep_name="prefixed")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"task_id": "t", "prompt": "p", "files": {"a.txt": "a"}, '
        '"solution": {"files": {"a.txt": "done"}}, "eval": {"command": "grep -q done a.txt"}}\n'
    )
    source = ["--task-source", "prefixed", "--task-source-option", "prefix=opt"]
    checked = ksi_cli("check", str(tasks), *source, "--json", env=site.env(), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    result = json.loads(checked.stdout)
    assert [t["task_id"] for t in result["tasks"]] == ["opt-t"]

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("done")
    graded = ksi_cli(
        "grade", "--workspace", str(workspace), str(tasks), *source, "--task-id", "opt-t",
        "--json", env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert graded.returncode == 0, graded.stderr
    assert json.loads(graded.stdout)["resolved"] is True

"""What a user sees when a plugin is broken or takes a built-in's name (issue 15, points 4-5).

Real installed distributions (a ``*.dist-info`` with an entry point in a
temporary site directory, see :class:`test_plugins.Site`) and the real ``ksi``
command in a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import test_plugins
from test_plugins import Site, ksi_cli

#: The temporary site directory fixture of test_plugins.py.
site = test_plugins.site


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        json.dumps({"task_id": "t1", "prompt": "p", "eval": {"command": "true"}}) + "\n"
    )
    return path


def test_unknown_task_source_names_the_plugin_that_failed_to_import(
    site: Site, tmp_path: Path
) -> None:
    site.add("ksi-fake-broken", "ksi_fake_broken", version="2.3", ep_name="csv")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,prompt\nt1,p\n")

    proc = ksi_cli(
        "run", str(tasks), "--task-source", "csv", "--agent", "nop",
        "--runs-root", str(tmp_path / "runs"), env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("error: unknown task source 'csv'")
    assert (
        "error:   plugin 'csv' from ksi-fake-broken 2.3 failed to import: "
        "RuntimeError: ksi_fake_broken is broken on purpose"
    ) in lines
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()

    debug = ksi_cli(
        "--debug", "run", str(tasks), "--task-source", "csv", "--agent", "nop",
        "--runs-root", str(tmp_path / "runs"), env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert 'raise RuntimeError("ksi_fake_broken is broken on purpose")' in debug.stderr


def test_unknown_agent_names_the_plugin_with_a_misspelled_hook(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-typo", "ksi_fake_typo", ep_name="typo")
    proc = ksi_cli(
        "run", str(_tasks(tmp_path)), "--agent", "my-agent",
        "--runs-root", str(tmp_path / "runs"), env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: unknown agent 'my-agent'")
    assert "plugin 'typo' from ksi-fake-typo 1.0 failed to register hooks" in proc.stderr
    assert "did you mean 'ksi_register_agents'?" in proc.stderr


def test_a_known_name_says_nothing_about_unrelated_broken_plugins(
    site: Site, tmp_path: Path
) -> None:
    site.add("ksi-fake-broken", "ksi_fake_broken", ep_name="broken")
    proc = ksi_cli(
        "run", str(_tasks(tmp_path)), "--agent", "nop",
        "--runs-root", str(tmp_path / "runs"), env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "broken" not in proc.stderr


def test_ksi_plugins_exits_non_zero_while_a_plugin_is_broken(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    healthy = ksi_cli("plugins", env=site.env(), cwd=tmp_path)
    assert healthy.returncode == 0, healthy.stderr

    site.add("ksi-fake-broken", "ksi_fake_broken", ep_name="broken")
    broken = ksi_cli("plugins", env=site.env(), cwd=tmp_path)
    assert broken.returncode == 1
    assert "failed to import" in broken.stderr
    assert "`ksi --debug plugins` shows the tracebacks" in broken.stderr
    assert "Traceback" not in broken.stderr

    debug = ksi_cli("--debug", "plugins", env=site.env(), cwd=tmp_path)
    assert debug.returncode == 1
    # The traceback once, under its error (not repeated at exit).
    assert debug.stderr.count("Traceback (most recent call last)") == 1
    assert "ksi_fake_broken.py" in debug.stderr


def test_builtin_names_and_commands_win_over_a_plugins(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-squatter", "ksi_fake_squatter", version="0.4", ep_name="squatter")
    tasks = _tasks(tmp_path)

    # The default run still reads tasks with the built-in `custom` source and is `ksi run`.
    run = ksi_cli(
        "run", str(tasks), "--agent", "nop", "--run-dir", str(tmp_path / "run"),
        env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "the squatter's run" not in run.stdout
    assert (tmp_path / "run" / "run.json").is_file()
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["task_ids"] == ["t1"]  # not the squatter's "squatted"

    # The plugin's own names work.
    squat = ksi_cli("squat", env=site.env(), cwd=tmp_path)
    assert (squat.returncode, squat.stdout) == (0, "squatting\n")
    help_text = ksi_cli("--help", env=site.env(), cwd=tmp_path)
    assert [
        ln.split()[0] for ln in help_text.stdout.splitlines() if ln.strip().startswith("run ")
    ] == ["run"]

    # Both clashes are reported against the plugin, and `ksi plugins` fails.
    listing = ksi_cli("plugins", "--json", env=site.env(), cwd=tmp_path)
    assert listing.returncode == 1
    errors = [e for e in json.loads(listing.stdout)["errors"] if e["plugin"] == "squatter"]
    assert {e["stage"] for e in errors} == {"register task sources", "register commands"}
    by_stage = {e["stage"]: e["error"] for e in errors}
    assert "task source name 'custom' is built into ksi" in by_stage["register task sources"]
    assert "'squatter' (ksi-fake-squatter 0.4)" in by_stage["register task sources"]
    assert "command 'run' is already ksi itself's" in by_stage["register commands"]
    (plugin,) = [p for p in json.loads(listing.stdout)["plugins"] if p["name"] == "squatter"]
    assert plugin["components"] == {"task source": ["squatter-lines"]}


def test_plugins_new_refuses_a_builtin_name(tmp_path: Path) -> None:
    for name in ("custom", "ksi-command"):
        proc = ksi_cli("plugins", "new", name, "--dir", str(tmp_path / name), env={}, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "is the name of KSI's built-in" in proc.stderr
        assert "choose another name" in proc.stderr
        assert not (tmp_path / name).exists()
    made = ksi_cli(
        "plugins", "new", "my-bench", "--dir", str(tmp_path / "ok"), env={}, cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "ok" / "pyproject.toml").is_file()

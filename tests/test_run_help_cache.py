"""``ksi run --help`` lists the components' flags from a cache, never stale, never in the way.

Every test runs the real ``ksi`` in a subprocess with its own cache directory
(conftest's ``KSI_CACHE_DIR``) and a fake plugin found through an entry point
(``test_plugins.Site``). Whether plugins were loaded is read from
``sys.modules`` at exit (:data:`WRAPPER`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_plugins import Site, site  # noqa: F401  (the fixture)

#: The fake environment plugin's module, and the flag it declares.
FAKE_ENV = "ksi_fake_env"


#: ``ksi ARGS`` in-process in a fresh interpreter, then the modules it imported on stderr.
WRAPPER = """
import sys
from ksi.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("modules: " + " ".join(sys.modules), file=sys.stderr)
sys.exit(code)
"""


def ksi_run(
    *args: str,
    site: Site,  # noqa: F811
    cwd: Path,
    **env: str,
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The real ``ksi run ARGS`` in a new process, and the modules it imported."""
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, "run", *args],
        env=site.env(COLUMNS="200", **env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    stderr, _, modules = proc.stderr.rpartition("modules: ")
    proc.stderr = stderr
    return proc, set(modules.split())


def flags(help_text: str) -> set[str]:
    return {line.split()[0] for line in help_text.splitlines() if line.strip().startswith("--")}


def cache_files() -> list[Path]:
    root = Path(os.environ["KSI_CACHE_DIR"])
    return sorted(root.glob("*.json")) if root.is_dir() else []


@pytest.fixture
def flavoured(site: Site) -> Site:  # noqa: F811
    site.add("ksi-fake-env", FAKE_ENV, ep_name="flavoured")
    return site


def test_help_lists_the_components_flags_then_reads_them_without_loading_plugins(
    flavoured: Site, tmp_path: Path
) -> None:
    first, imported = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    expected = {"--image", "--network", "--cpus", "--memory", "--flavour"}
    if importlib.util.find_spec("ksi_polyglot") is not None:
        expected.add("--language")
    assert expected <= flags(first.stdout)
    assert {FAKE_ENV, "ksi.environments.docker"} <= imported  # no cache yet: plugins loaded
    assert len(cache_files()) == 1

    second, imported = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert not imported & {FAKE_ENV, "ksi.environments.docker", "ksi.plugins", "ksi.models"}


def test_a_changed_plugin_module_shows_its_new_flag_at_once(
    flavoured: Site, tmp_path: Path
) -> None:
    ksi_run("--help", site=flavoured, cwd=tmp_path)
    module = flavoured.root / f"{FAKE_ENV}.py"
    text = module.read_text()
    module.write_text(
        text.replace(
            '"--flavour": ("flavour", "Which flavour (flavoured environment)."),',
            '"--flavour": ("flavour", "Which flavour (flavoured environment)."),\n'
            '        "--sweetness": ("sweetness", "How sweet (new in this version)."),',
        )
    )
    after, imported = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert "--sweetness" in flags(after.stdout)
    assert FAKE_ENV in imported
    # A new plugin is a new entry point: its flags show too.
    flavoured.add("ksi-fake-source", "ksi_fake_source", ep_name="prefixed")
    after, _ = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert {"--sweetness", "--prefix"} <= flags(after.stdout)


def test_the_plugin_selection_variables_are_part_of_the_key(
    flavoured: Site, tmp_path: Path
) -> None:
    ksi_run("--help", site=flavoured, cwd=tmp_path)
    alone, _ = ksi_run("--help", site=flavoured, cwd=tmp_path, KSI_LOAD_PLUGINS="")
    assert alone.returncode == 0, alone.stderr
    assert "--image" in flags(alone.stdout)
    assert "--flavour" not in flags(alone.stdout)


def test_a_corrupt_or_unwritable_cache_changes_nothing_visible(
    flavoured: Site, tmp_path: Path
) -> None:
    reference, _ = ksi_run("--help", site=flavoured, cwd=tmp_path)
    (cache,) = cache_files()
    for damaged in ("{not json", '{"rows": []}', json.dumps({"files": 3, "rows": {}})):
        cache.write_text(damaged)
        proc, imported = ksi_run("--help", site=flavoured, cwd=tmp_path)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, reference.stdout, "")
        assert FAKE_ENV in imported  # read from the plugins, and the cache written anew
    proc, imported = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert proc.stdout == reference.stdout and FAKE_ENV not in imported

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for unusable in (blocker, blocker / "cache"):
        proc, _ = ksi_run("--help", site=flavoured, cwd=tmp_path, KSI_CACHE_DIR=str(unusable))
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, reference.stdout, "")
    assert blocker.read_text() == ""


def test_only_help_is_served_from_the_cache(flavoured: Site, tmp_path: Path) -> None:
    """A cache that lacks a flag (as a stale one would) never stops a run from parsing it."""
    ksi_run("--help", site=flavoured, cwd=tmp_path)
    (cache,) = cache_files()
    data = json.loads(cache.read_text())
    data["rows"]["environment"] = [r for r in data["rows"]["environment"] if r[0] != "--flavour"]
    cache.write_text(json.dumps(data))
    help_text, _ = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert "--flavour" not in flags(help_text.stdout)  # the help did come from the cache

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"task_id": "t", "prompt": "p", "files": {"a.txt": "a"}, '
        '"eval": {"command": "grep -q mint FLAVOUR"}}\n'
    )
    args = [str(tasks), "--agent", "nop", "--environment", "flavoured", "--run-dir", "r1"]
    proc, _ = ksi_run(*args, "--flavour", "mint", site=flavoured, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "solved: 1/1" in proc.stdout
    # The run read the plugins and wrote the cache anew: the help lists the flag again.
    help_text, _ = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert "--flavour" in flags(help_text.stdout)


def test_help_with_a_config_file_or_help_as_a_value_behaves_as_without_a_cache(
    flavoured: Site, tmp_path: Path
) -> None:
    (tmp_path / "run.toml").write_text('image = "busybox"\nflavour = "mint"\n')
    (tmp_path / "typo.toml").write_text('flavor = "mint"\n')
    cases = [
        ["-c", "run.toml", "--help"],
        ["--help", "-c", "typo.toml"],  # help first: the file is never read
        ["-c", "typo.toml", "--help"],  # the file first: its error, naming the key
        ["--agent", "--help"],  # --help is --agent's value: not help, a run that fails
        ["--", "--help"],  # a tasks path named --help
    ]
    cold = [ksi_run(*args, site=flavoured, cwd=tmp_path, KSI_CACHE_DIR=str(tmp_path / "none"))[0]
            for args in cases]  # fmt: skip
    ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert cache_files()
    for args, without in zip(cases, cold, strict=True):
        proc, imported = ksi_run(*args, site=flavoured, cwd=tmp_path)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            without.returncode,
            without.stdout,
            without.stderr,
        ), args
        if "Usage:" in proc.stdout and proc.returncode == 0:
            assert FAKE_ENV not in imported, args
    assert cold[0].returncode == 0 and "--flavour" in cold[0].stdout
    assert cold[2].returncode == 2 and "'flavor'" in cold[2].stderr
    assert "did you mean 'flavour'" in cold[2].stderr
    assert cold[3].returncode == 2 and "Usage:" not in cold[3].stdout


def test_a_plugin_that_failed_to_load_shows_its_flags_once_fixed(
    flavoured: Site, tmp_path: Path
) -> None:
    """A failed plugin's module was never imported, so no cache could watch it: none is kept."""
    flavoured.add("ksi-fake-broken", "ksi_fake_broken", ep_name="broken")
    proc, _ = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert proc.returncode == 0 and "--flavour" in flags(proc.stdout)
    fixed = (flavoured.root / f"{FAKE_ENV}.py").read_text()
    fixed = fixed.replace('"flavoured"', '"fixed"').replace("--flavour", "--fixed-flag")
    (flavoured.root / "ksi_fake_broken.py").write_text(fixed)
    proc, _ = ksi_run("--help", site=flavoured, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "--fixed-flag" in flags(proc.stdout)


def test_a_plugin_module_loaded_before_the_flags_are_read_is_still_watched(
    site: Site,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A Python caller that loaded the plugins before running ``ksi run`` in-process.

    The plugin's hook module (here apart from its component's module) was
    imported before the flags were read; editing it must still make the cache
    stale, or help would keep the flags of what it registered before.
    """
    from ksi.cli.run_flags_cache import cached_rows, rows_from_plugins
    from ksi.plugins import get_plugins

    site.add("ksi-fake-env", FAKE_ENV, ep_name="unused")  # the component's module, on the path
    (site.root / "ksi_fake_env-1.0.dist-info").rename(site.root / "unused")
    hooks = site.root / "ksi_fake_hooks.py"
    hooks.write_text(
        "from ksi import hookimpl\n"
        "from ksi_fake_env import FlavouredLocal\n\n\n"
        "@hookimpl\n"
        "def ksi_register_environments(register):\n"
        "    register(FlavouredLocal)\n"
    )
    site.add("ksi-fake-hooks", "ksi_fake_hooks", ep_name="hooks")
    kinds = ["environment", "task source"]
    get_plugins().registry("environment")  # loaded first, as such a caller would
    assert "ksi_fake_hooks" in sys.modules
    rows = rows_from_plugins(kinds)
    assert ("--flavour", "flavour", "Which flavour (flavoured environment).") in rows["environment"]
    assert cached_rows(kinds) == rows
    hooks.write_text(hooks.read_text() + "\n# edited\n")
    assert cached_rows(kinds) is None

"""Plugin loading with real (tiny) distributions on disk, and the ``ksi plugins`` command.

Each fake distribution is a module from ``tests/fixtures/plugins`` next to a
``*.dist-info`` directory with METADATA and entry_points.txt, on ``sys.path``
(or PYTHONPATH for a subprocess), so ``importlib.metadata`` finds its entry
point exactly as it would an installed package's.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest
import typer
from run_helpers import env_without_ksi_settings
from typer.testing import CliRunner

from ksi import hookimpl
from ksi.cli import build_app, plugins_cmd
from ksi.errors import DuplicateComponentError, PluginError, UnknownComponentError
from ksi.models import EvalResult, TaskSpec
from ksi.options import create_component
from ksi.plugins import get_plugins, register_plugin, registry, required_methods

pytest_plugins = ["ksi.testing"]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "plugins"
ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Distributions with a ``ksi`` entry point in the test environment before any test adds
#: its own (the README's test command installs plugins/ksi-harbor, ksi-arc and
#: ksi-polyglot; a developer may have installed any other): listings are compared without
#: them, so these tests pass whatever else is installed.
INSTALLED = frozenset(ep.dist.name for ep in entry_points(group="ksi") if ep.dist is not None)


def without_installed(lines: list[str]) -> list[str]:
    return [line for line in lines if not any(f"({d} " in line for d in INSTALLED)]


class Site:
    """A directory on ``sys.path`` holding fake installed distributions."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def add(
        self,
        dist: str,
        module: str,
        *,
        version: str = "1.0",
        ep_name: str | None = None,
        group: str = "ksi",
    ) -> None:
        src = FIXTURES / f"{module}.py"
        if src.exists():
            shutil.copy(src, self.root / f"{module}.py")
        info = self.root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[{group}]\n{ep_name or module} = {module}\n", encoding="utf-8"
        )
        importlib.invalidate_caches()

    def env(self, **extra: str) -> dict[str, str]:
        """os.environ for a subprocess that sees this site, without KSI_* plugin settings."""
        env = env_without_ksi_settings()
        env["PYTHONPATH"] = str(self.root)
        env.update(extra)
        return env


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield Site(root)
    for name in [m for m in sys.modules if m.startswith(("ksi_fake_", "ksi_qa"))]:
        del sys.modules[name]
    importlib.invalidate_caches()


def ksi_cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def follows_protocol(kind: str) -> dict[str, Any]:
    """Methods that make a test class pass the registration check for ``kind``.

    These tests are about registration, not behaviour: every method the
    protocol requires, doing nothing.
    """
    return {name: lambda self, *args, **kwargs: None for name in required_methods(kind)}


def error_for(plugin: str) -> Any:
    matches = [e for e in get_plugins().errors if e.plugin == plugin]
    assert matches, f"no load error for {plugin!r}: {get_plugins().errors}"
    return matches[0]


# -- loading ------------------------------------------------------------------


def test_good_plugin_registers_a_task_source_and_an_evaluator(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", version="1.2.3", ep_name="good")

    source_reg = registry("task source").get("FAKESRC")  # an alias, in another case
    assert source_reg.name == "fake-source"
    assert source_reg.plugin == "good"
    tasks_file = tmp_path / "tasks.txt"
    tasks_file.write_text("fix the bug\n\nadd a test\n")
    tasks = create_component(source_reg.obj, {}, kind="task source", option_flag="-o").load(
        tasks_file
    )
    assert [t.prompt for t in tasks] == ["fix the bug", "add a test"]

    grader = create_component(
        registry("evaluator").get("fake-eval").obj,
        {"path": "ok"},
        kind="evaluator",
        option_flag="-o",
    )
    assert grader.grade(tasks[0], tmp_path).native_score == 0.0
    (tmp_path / "ok").write_text("")
    assert grader.grade(tasks[0], tmp_path).native_score == 1.0

    info = get_plugins().infos["good"]
    assert (info.distribution, info.version, info.builtin) == ("ksi-fake-good", "1.2.3", False)
    assert info.hooks == ["ksi_register_evaluators", "ksi_register_task_sources"]
    assert info.components == {"task source": ["fake-source"], "evaluator": ["fake-eval"]}
    assert get_plugins().errors == []


def test_plugin_that_raises_on_import_is_reported_and_skipped(site: Site) -> None:
    site.add("ksi-fake-broken", "ksi_fake_broken", version="2.3", ep_name="broken")
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")

    assert registry("evaluator").get("fake-eval").plugin == "good"
    err = error_for("broken")
    assert (err.distribution, err.version, err.stage) == ("ksi-fake-broken", "2.3", "import")
    assert "RuntimeError: ksi_fake_broken is broken on purpose" in err.error
    assert "ksi-fake-broken 2.3" in str(err)
    assert "broken" not in get_plugins().infos


def test_misspelled_hook_name_is_caught_and_the_plugin_skipped(site: Site) -> None:
    site.add("ksi-fake-typo", "ksi_fake_typo", ep_name="typo")

    err = error_for("typo")
    assert err.stage == "register hooks"
    assert "'ksi_register_agent'" in err.error
    assert "did you mean 'ksi_register_agents'" in err.error
    assert not get_plugins().pm.has_plugin("typo")
    assert "typo" not in get_plugins().infos
    registry("agent")  # the built-in agents still load: the bad hook is gone


def test_undecorated_misspelled_hook_is_caught_too() -> None:
    class Plugin:
        @staticmethod
        def ksi_register_evaluator(register: Any) -> None:
            """Missing the final 's' and the @hookimpl decorator."""

    with pytest.raises(PluginError, match=r"ksi_register_evaluator.*did you mean"):
        register_plugin(Plugin, name="sloppy")
    assert not get_plugins().pm.has_plugin("sloppy")


def test_two_plugins_registering_one_name_clash_naming_both(site: Site) -> None:
    site.add("ksi-fake-clash-a", "ksi_fake_clash_a", ep_name="clash-a")
    site.add("ksi-fake-clash-b", "ksi_fake_clash_b", ep_name="clash-b")

    evaluators = registry("evaluator")
    with pytest.raises(DuplicateComponentError) as caught:
        evaluators.get("Same-Name")
    message = str(caught.value)
    assert "ksi-fake-clash-a 1.0" in message
    assert "ksi-fake-clash-b 1.0" in message
    assert "KSI_DISABLE_PLUGINS" in message
    # The clash costs only the clashing name.
    assert evaluators.get("only-in-a").plugin == "clash-a"
    assert evaluators.get("only-in-b").plugin == "clash-b"
    (err,) = [e for e in get_plugins().errors if "same-name" in e.error]
    assert err.stage == "register evaluators"
    assert "ksi-fake-clash-a" in err.error
    assert "ksi-fake-clash-b" in err.error


def test_plugin_whose_register_hook_raises_is_skipped_whole(site: Site) -> None:
    site.add("ksi-fake-raiser", "ksi_fake_raiser", version="0.9", ep_name="raiser")
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")

    evaluators = registry("evaluator")
    assert "fake-eval" in evaluators
    # What it registered before raising is not used either.
    with pytest.raises(UnknownComponentError):
        evaluators.get("half-done")
    err = error_for("raiser")
    assert (err.distribution, err.version) == ("ksi-fake-raiser", "0.9")
    assert err.stage == "register evaluators"
    assert "ValueError: cannot reach the grading service" in err.error
    # A broken evaluator plugin does not stop task sources from loading.
    assert "fake-source" in registry("task source")


def test_a_component_without_a_name_is_reported_and_the_rest_kept(
    ksi_plugin: Callable[..., Any],
) -> None:
    class Nameless:
        description = "forgot its name"

    Named = type("Named", (), {"name": "named-agent", "aliases": (), **follows_protocol("agent")})

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_agents(register: Any) -> None:
            register(Nameless)
            register(Named)

    ksi_plugin(Plugin, name="half-right")
    assert registry("agent").get("named-agent").obj is Named
    err = error_for("half-right")
    assert err.stage == "register agents"
    assert "without a non-empty string `name`" in err.error


def test_rebuilding_a_registry_does_not_repeat_its_errors(site: Site) -> None:
    site.add("ksi-fake-raiser", "ksi_fake_raiser", ep_name="raiser")
    registry("evaluator")
    undo = register_plugin(object(), name="nothing")  # forces registries to be rebuilt
    registry("evaluator")
    undo()
    get_plugins().build_all()
    assert len([e for e in get_plugins().errors if e.plugin == "raiser"]) == 1


# -- environment variables -----------------------------------------------------


def test_ksi_load_plugins_loads_only_the_named_distributions(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    site.add("ksi-fake-broken", "ksi_fake_broken", ep_name="broken")
    monkeypatch.setenv("KSI_LOAD_PLUGINS", "KSI_Fake_Good")  # normalised like pip names

    state = get_plugins()
    assert "good" in state.infos
    assert state.errors == []  # broken was never imported


def test_ksi_load_plugins_accepts_entry_point_names(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    site.add("ksi-fake-clash-a", "ksi_fake_clash_a", ep_name="clash-a")
    monkeypatch.setenv("KSI_LOAD_PLUGINS", " good , ")
    assert [i.name for i in get_plugins().infos.values() if not i.builtin] == ["good"]


def test_empty_ksi_load_plugins_loads_no_third_party_plugin(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    site.add("ksi-fake-broken", "ksi_fake_broken", ep_name="broken")
    monkeypatch.setenv("KSI_LOAD_PLUGINS", "")

    state = get_plugins()
    assert [i.name for i in state.infos.values() if not i.builtin] == []
    assert state.errors == []
    assert any(i.builtin for i in state.infos.values())  # built-ins always load


def test_ksi_load_plugins_naming_a_missing_distribution_is_reported(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    monkeypatch.setenv("KSI_LOAD_PLUGINS", "ksi-fake-goood")
    err = error_for("ksi-fake-goood")
    assert err.distribution == "KSI_LOAD_PLUGINS"
    assert "ksi-fake-good" in err.error  # lists what is installed


def test_ksi_disable_plugins_blocks_distributions_and_entry_point_names(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")
    site.add("ksi-fake-broken", "ksi_fake_broken", ep_name="broken")
    site.add("ksi-fake-typo", "ksi_fake_typo", ep_name="typo")
    monkeypatch.setenv("KSI_DISABLE_PLUGINS", "ksi-fake-broken,typo")

    state = get_plugins()
    assert state.errors == []
    assert "good" in state.infos
    assert "broken" not in state.infos
    assert "typo" not in state.infos


def test_strict_plugins_makes_an_import_failure_fatal(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.add("ksi-fake-broken", "ksi_fake_broken", version="2.3", ep_name="broken")
    monkeypatch.setenv("KSI_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match=r"ksi-fake-broken 2\.3.*broken on purpose.*STRICT"):
        get_plugins()


def test_strict_plugins_makes_a_registration_failure_fatal(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.add("ksi-fake-raiser", "ksi_fake_raiser", ep_name="raiser")
    monkeypatch.setenv("KSI_STRICT_PLUGINS", "1")
    get_plugins()  # importing is fine
    with pytest.raises(PluginError, match="cannot reach the grading service"):
        registry("evaluator")


def test_strict_plugins_makes_a_clash_fatal(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    site.add("ksi-fake-clash-a", "ksi_fake_clash_a", ep_name="clash-a")
    site.add("ksi-fake-clash-b", "ksi_fake_clash_b", ep_name="clash-b")
    monkeypatch.setenv("KSI_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="same-name"):
        registry("evaluator")


# -- laziness and real subprocesses --------------------------------------------


def test_importing_ksi_loads_no_plugin(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-marker", "ksi_fake_marker", ep_name="marker")
    marker = tmp_path / "imported"
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import ksi, ksi.plugins, ksi.registry, ksi.options, ksi.cli, ksi.cli.plugins_cmd
        marker = Path({str(marker)!r})
        assert not marker.exists(), "a plugin was imported by `import ksi`"
        assert ksi.plugins._STATE is None
        ksi.plugins.get_plugins()
        assert marker.exists(), "first use did not load the plugin"
        print("lazy")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env=site.env(KSI_FAKE_MARKER=str(marker)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "lazy"


def test_ksi_plugins_json_in_a_subprocess_discovers_entry_points(
    site: Site, tmp_path: Path
) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", version="1.2.3", ep_name="good")
    site.add("ksi-fake-broken", "ksi_fake_broken", version="2.3", ep_name="broken")

    proc = ksi_cli("plugins", "--json", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # a plugin failed to load (issue 15)
    data = json.loads(proc.stdout)
    (good,) = [p for p in data["plugins"] if p["name"] == "good"]
    assert good == {
        "name": "good",
        "distribution": "ksi-fake-good",
        "version": "1.2.3",
        "builtin": False,
        "hooks": ["ksi_register_evaluators", "ksi_register_task_sources"],
        "components": {"task source": ["fake-source"], "evaluator": ["fake-eval"]},
    }
    assert not any(p["builtin"] for p in data["plugins"])
    (err,) = data["errors"]
    assert err["plugin"] == "broken"
    assert err["distribution"] == "ksi-fake-broken"
    assert err["version"] == "2.3"
    assert err["stage"] == "import"
    assert "broken on purpose" in err["error"]


def test_ksi_plugins_text_lists_plugins_on_stdout_and_errors_on_stderr(
    site: Site, tmp_path: Path
) -> None:
    site.add("ksi-fake-good", "ksi_fake_good", version="1.2.3", ep_name="good")
    site.add("ksi-fake-broken", "ksi_fake_broken", version="2.3", ep_name="broken")

    proc = ksi_cli("plugins", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # a plugin failed to load (issue 15)
    assert without_installed(proc.stdout.splitlines()) == [
        "good (ksi-fake-good 1.2.3): hooks: ksi_register_evaluators, "
        "ksi_register_task_sources; registers: task sources: fake-source; evaluators: fake-eval"
    ]
    assert (
        "error: plugin 'broken' from ksi-fake-broken 2.3 failed to import: "
        "RuntimeError: ksi_fake_broken is broken on purpose"
    ) in proc.stderr.splitlines()

    everything = ksi_cli("plugins", "--all", env=site.env(), cwd=tmp_path)
    assert everything.returncode == 1, everything.stderr
    lines = everything.stdout.splitlines()
    assert any(line.startswith("ksi.tasks.custom (ksi ") for line in lines)
    assert any(line.startswith("good (") for line in lines)


def test_ksi_plugins_strict_exits_with_the_error(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-broken", "ksi_fake_broken", ep_name="broken")
    proc = ksi_cli("plugins", env=site.env(KSI_STRICT_PLUGINS="1"), cwd=tmp_path)
    assert proc.returncode != 0
    assert "broken on purpose" in proc.stderr
    assert "Traceback" not in proc.stderr


def _plugins_cli() -> typer.Typer:
    return build_app()


def test_ksi_plugins_shows_in_process_plugins_and_clashes(
    ksi_plugin: Callable[..., Any],
) -> None:
    class Clash:
        name: ClassVar[str] = "command"  # the built-in evaluator's name
        aliases: ClassVar[tuple[str, ...]] = ()

        def grade(self, task: TaskSpec, workdir: Path, **_: Any) -> EvalResult:
            return EvalResult(status="graded", native_score=0.0)

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_evaluators(register: Any) -> None:
            register(Clash)

    ksi_plugin(Plugin, name="squatter")
    result = CliRunner().invoke(_plugins_cli(), ["plugins", "--json"])
    assert result.exit_code == 1, result.output  # a plugin failed (issue 15)
    data = json.loads(result.stdout)
    (squatter,) = [p for p in data["plugins"] if p["distribution"] not in INSTALLED]
    assert squatter["name"] == "squatter"
    assert squatter["distribution"] == "(in-process)"
    (err,) = data["errors"]
    assert err["plugin"] == "squatter"
    assert "'ksi.eval.command' (built into ksi)" in err["error"]


def test_ksi_plugins_draws_a_table_on_a_terminal(
    ksi_plugin: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plugins_cmd, "is_tty", lambda: True)
    result = CliRunner().invoke(_plugins_cli(), ["plugins", "--all"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "plugin" in line)
    assert "distribution" in header and "registers" in header
    assert "ksi.tasks.custom" in result.stdout


def test_ksi_plugins_without_third_party_plugins_says_so(tmp_path: Path) -> None:
    env = env_without_ksi_settings()
    proc = ksi_cli("plugins", env={**env, "KSI_LOAD_PLUGINS": ""}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "No plugins installed (--all includes KSI's built-in plugins)."


def test_ksi_plugins_with_only_a_broken_plugin_says_it_failed_on_stdout_too(
    site: Site, tmp_path: Path
) -> None:
    """Issue 28 #10: not "No plugins installed" when one is, and failed to load."""
    site.add("ksi-fake-broken", "ksi_fake_broken", version="2.3", ep_name="broken")
    proc = ksi_cli("plugins", env=site.env(KSI_LOAD_PLUGINS="broken"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.strip() == (
        "No plugins loaded: 1 plugin failed to load (the errors are on stderr)."
    )
    assert "broken on purpose" in proc.stderr


# -- the pytest fixtures KSI ships ------------------------------------------------


def test_ksi_plugin_fixture_registers_for_one_test_only(ksi_plugin: Callable[..., Any]) -> None:
    Agent = type("Agent", (), {"name": "fixture-agent", "aliases": (), **follows_protocol("agent")})

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_agents(register: Any) -> None:
            register(Agent)

    assert ksi_plugin(Plugin) is Plugin
    assert registry("agent").get("fixture-agent").obj is Agent


def test_ksi_fixtures_work_through_a_pytest11_entry_point(site: Site, tmp_path: Path) -> None:
    """The way a plugin author's test suite gets them once KSI is installed."""
    site.add("ksi-testing-shim", "ksi.testing", ep_name="ksi.testing", group="pytest11")
    tests = tmp_path / "plugin_tests"
    tests.mkdir()
    (tests / "test_mine.py").write_text(
        textwrap.dedent(
            """
            from ksi import hookimpl
            from ksi.plugins import registry

            class Source:
                name = "mine"
                aliases = ()

                def load(self, path):
                    return []

                def validate(self, path):
                    return []

            class Plugin:
                @staticmethod
                @hookimpl
                def ksi_register_task_sources(register):
                    register(Source)

            def test_registered(ksi_fresh_plugins, ksi_plugin):
                ksi_plugin(Plugin, name="mine")
                assert registry("task source").get("MINE").obj is Source

            def test_gone_afterwards(ksi_fresh_plugins):
                assert "mine" not in registry("task source")

            def test_the_cli_caches_in_the_tests_own_directory(ksi_cache_dir):
                import os, subprocess, sys
                assert os.environ["KSI_CACHE_DIR"] == str(ksi_cache_dir)
                assert list(ksi_cache_dir.iterdir()) == []
                subprocess.run(
                    [sys.executable, "-m", "ksi", "run", "--help"], check=True, capture_output=True
                )
                assert [p.suffix for p in ksi_cache_dir.iterdir()] == [".json"]
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        env=site.env(),
        cwd=tests,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


# -- one test per registration hook (see tests/test_hooks_documented.py) -----------


@attrs.define
class _Component:
    """A minimal registrable class; subclasses set ``name``."""

    name: ClassVar[str] = "base"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = "for tests"


def test_hook_ksi_register_task_sources(ksi_plugin: Callable[..., Any], tmp_path: Path) -> None:
    class WordsSource(_Component):
        name: ClassVar[str] = "words"
        aliases: ClassVar[tuple[str, ...]] = ("w",)
        default_evaluator: ClassVar[str] = "command"

        def load(self, path: Path) -> list[TaskSpec]:
            return [TaskSpec(id=w, prompt=f"say {w}") for w in path.read_text().split()]

        def validate(self, path: Path) -> list[Any]:
            return []

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_task_sources(register: Any) -> None:
            register(WordsSource)

    ksi_plugin(Plugin, name="words-plugin")
    tasks_file = tmp_path / "words.txt"
    tasks_file.write_text("alpha beta")
    reg = registry("task source").get("W")
    assert (reg.name, reg.plugin) == ("words", "words-plugin")
    source = create_component(reg.obj, {}, kind="task source", option_flag="-o")
    assert [t.id for t in source.load(tasks_file)] == ["alpha", "beta"]
    assert get_plugins().infos["words-plugin"].components == {"task source": ["words"]}


def test_hook_ksi_register_evaluators(ksi_plugin: Callable[..., Any], tmp_path: Path) -> None:
    @attrs.define
    class MarkerEvaluator(_Component):
        name: ClassVar[str] = "marker"
        grades_in: ClassVar[str] = "host"
        file: str = "DONE"

        def grade(self, task: TaskSpec, workdir: Path, **_: Any) -> EvalResult:
            score = 1.0 if (workdir / self.file).exists() else 0.0
            return EvalResult(status="graded", native_score=score)

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_evaluators(register: Any) -> None:
            register(MarkerEvaluator)

    ksi_plugin(Plugin)
    reg = registry("evaluator").get("Marker")
    grader = create_component(reg.obj, {"file": "ok.txt"}, kind="evaluator", option_flag="-o")
    (tmp_path / "ok.txt").write_text("")
    assert grader.grade(TaskSpec(id="t"), tmp_path).native_score == 1.0
    assert "marker" in registry("evaluator").names()


def _check_registration(ksi_plugin: Callable[..., Any], kind: str, hook: str) -> None:
    component = type(
        f"My{kind.title()}", (_Component,), {"name": f"my-{kind}", **follows_protocol(kind)}
    )

    def impl(register: Any) -> None:
        register(component)

    impl.__name__ = hook
    plugin = type("Plugin", (), {hook: staticmethod(hookimpl(impl))})
    ksi_plugin(plugin, name=f"{kind}-plugin")
    reg = registry(kind).get(f"MY-{kind.upper()}")
    assert reg.obj is component
    assert reg.plugin == f"{kind}-plugin"
    assert get_plugins().infos[f"{kind}-plugin"].hooks == [hook]


def test_hook_ksi_register_agents(ksi_plugin: Callable[..., Any]) -> None:
    _check_registration(ksi_plugin, "agent", "ksi_register_agents")


def test_hook_ksi_register_environments(ksi_plugin: Callable[..., Any]) -> None:
    _check_registration(ksi_plugin, "environment", "ksi_register_environments")


def test_hook_ksi_register_executors(ksi_plugin: Callable[..., Any]) -> None:
    _check_registration(ksi_plugin, "executor", "ksi_register_executors")


def test_hook_ksi_register_commands(
    site: Site, tmp_path: Path, ksi_plugin: Callable[..., Any]
) -> None:
    # For real: an installed plugin's command is in `ksi --help` and runs.
    site.add("ksi-fake-cmd", "ksi_fake_cmd", ep_name="hello")
    help_text = ksi_cli("--help", env=site.env(), cwd=tmp_path)
    assert help_text.returncode == 0, help_text.stderr
    assert "hello" in help_text.stdout
    proc = ksi_cli("hello", "--name", "KSI", env=site.env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello, KSI from a plugin\n"

    # In process: a command hook that raises is reported, and the others still run.
    class Broken:
        @staticmethod
        @hookimpl
        def ksi_register_commands(cli: Any) -> None:
            raise RuntimeError("no commands today")

    ksi_plugin(Broken, name="broken-commands")
    app = typer.Typer()
    get_plugins().register_commands(app)
    assert [c.name or c.callback.__name__ for c in app.registered_commands] == ["hello"]
    (err,) = [e for e in get_plugins().errors if e.plugin == "broken-commands"]
    assert err.stage == "register commands"
    assert "no commands today" in err.error


# -- docs/plugins.md: the complete example works --------------------------------


EXAMPLE = FIXTURES / "ksi-qa"


def test_docs_plugins_md_shows_the_tested_example_verbatim() -> None:
    doc = (DOCS / "plugins.md").read_text(encoding="utf-8")
    for name in ("pyproject.toml", "ksi_qa.py"):
        source = (EXAMPLE / name).read_text(encoding="utf-8")
        assert source in doc, f"docs/plugins.md no longer shows {EXAMPLE / name} verbatim"


def test_docs_plugins_md_example_installs_and_works(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Build and install the example the way a user would (no network: no deps, no isolation).
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site.root), str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    importlib.invalidate_caches()

    tasks_file = tmp_path / "questions.txt"
    tasks_file.write_text(
        "# id | question | answer\ncapital | What is the capital of France? | Paris\n"
        "sum | What is 2 + 3? | 5\n"
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "answer.txt").write_text("paris\n")

    listing = ksi_cli("plugins", "--json", env=site.env(), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    (qa,) = [p for p in json.loads(listing.stdout)["plugins"] if p["distribution"] not in INSTALLED]
    assert qa["distribution"] == "ksi-qa"
    assert qa["components"] == {"task source": ["qa"], "evaluator": ["answer-file"]}

    graded = ksi_cli(
        "grade", "--task-source", "qa", "--tasks-path", str(tasks_file), "--task-id", "capital",
        "--workspace", str(workspace), env=site.env(), cwd=tmp_path,
    )  # fmt: skip
    assert graded.returncode == 0, graded.stderr
    assert "1.0" in graded.stdout

    # In process: the loader's errors are located, the evaluator's options are typed.
    source = create_component(
        registry("task source").get("questions").obj, {}, kind="task source", option_flag="-o"
    )
    bad = tmp_path / "bad.txt"
    bad.write_text("a | q | x\nb | only two\na | q | y\n")
    assert [str(p) for p in source.validate(bad)] == [
        f"{bad}:line 2: expected ID | QUESTION | ANSWER",
        f"{bad}:line 3: task 'a': ID: task id used twice; ids must be unique",
    ]
    task = next(t for t in source.load(tasks_file) if t.id == "capital")
    strict = create_component(
        registry("evaluator").get("answer-file").obj,
        {"ignore_case": "no"},
        kind="evaluator",
        option_flag="--evaluator-option",
    )
    assert strict.grade(task, workspace).native_score == 0.0


def test_registering_an_already_loaded_plugin_module_is_harmless() -> None:
    import ksi.eval.command as builtin_module
    from ksi.plugins import get_plugins, register_plugin

    unregister = register_plugin(builtin_module, name="again")
    unregister()
    assert get_plugins().pm.is_registered(builtin_module), "the loaded plugin stays loaded"


# -- pluggy's order: tryfirst, trylast, wrappers (issue 9, section 4) ------------


def test_tryfirst_plugin_overrides_the_builtin_custom_source(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-override", "ksi_fake_override", ep_name="override")
    tasks_file = tmp_path / "prompts.txt"
    tasks_file.write_text("fix the bug\nadd a test\n")

    reg = registry("task source").get("custom")
    assert reg.plugin == "override"
    assert get_plugins().errors == []
    info = get_plugins().infos["override"]
    assert info.overrides == {"task source": ["custom of 'ksi.tasks.custom' (built into ksi)"]}

    # For real: the command line reads the file with the plugin's source; the
    # built-in would refuse a text file that is not JSON (exit code 2).
    proc = ksi_cli("tasks", "validate", str(tasks_file), env=site.env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"OK: 2 tasks in {tasks_file}\n"
    listing = ksi_cli("plugins", "--json", env=site.env(), cwd=tmp_path)
    (plugin,) = [p for p in json.loads(listing.stdout)["plugins"] if p["name"] == "override"]
    assert plugin["overrides"] == info.overrides


def test_without_tryfirst_a_builtin_name_stays_the_builtins(
    ksi_plugin: Callable[..., Any],
) -> None:
    class Custom:
        name: ClassVar[str] = "custom"
        aliases: ClassVar[tuple[str, ...]] = ()
        load = validate = staticmethod(lambda path: [])

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_task_sources(register: Any) -> None:
            register(Custom)

    ksi_plugin(Plugin, name="plain-custom")
    # Issue 15: the built-in wins (every default run keeps working); the clash is the plugin's.
    assert registry("task source").get("custom").plugin == "ksi.tasks.custom"
    err = error_for("plain-custom")
    assert err.stage == "register task sources"
    assert "built into ksi ('ksi.tasks.custom' (built into ksi))" in err.error
    assert "tryfirst=True" in err.error


def test_observers_are_called_in_pluggys_order(tmp_path: Path) -> None:
    """tryfirst first, then plain ones newest plugin first, trylast last."""
    calls: list[str] = []

    def observer(label: str, **opts: bool) -> type:
        def ksi_run_started(run: Any) -> None:
            calls.append(label)

        return type(label, (), {"ksi_run_started": staticmethod(hookimpl(**opts)(ksi_run_started))})

    undo = [
        register_plugin(observer("first", tryfirst=True), name="first"),
        register_plugin(observer("older"), name="older"),
        register_plugin(observer("last", trylast=True), name="last"),
        register_plugin(observer("newer"), name="newer"),
    ]
    try:
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text(json.dumps({"task_id": "t", "prompt": "p", "files": {"a": "b"}}) + "\n")
        import ksi

        ksi.run(tasks, agent="nop", run_dir=tmp_path / "run")
    finally:
        for fn in undo:
            fn()
    assert calls == ["first", "newer", "older", "last"]


def test_a_hook_wrapper_is_refused_naming_the_plugin(site: Site, tmp_path: Path) -> None:
    site.add("ksi-fake-wrapper", "ksi_fake_wrapper", version="0.2", ep_name="wrapping")
    site.add("ksi-fake-good", "ksi_fake_good", ep_name="good")

    assert registry("evaluator").get("fake-eval").plugin == "good"  # the others still load
    err = error_for("wrapping")
    assert (err.distribution, err.stage) == ("ksi-fake-wrapper", "register hooks")
    assert "'ksi_run_started' as a hook wrapper" in err.error
    assert "tryfirst=True or trylast=True" in err.error
    assert "wrapping" not in get_plugins().infos
    assert not get_plugins().pm.has_plugin("wrapping")

    # Strict, the same refusal ends the command with the plugin named.
    proc = ksi_cli("plugins", env=site.env(KSI_STRICT_PLUGINS="1"), cwd=tmp_path)
    assert proc.returncode == 1
    assert "plugin 'wrapping' from ksi-fake-wrapper 0.2 failed to register hooks" in proc.stderr
    assert "hook wrapper" in proc.stderr


def test_an_old_style_hookwrapper_in_process_is_refused() -> None:
    class Plugin:
        @staticmethod
        @hookimpl(hookwrapper=True)
        def ksi_attempt_finished(run: Any, record: Any) -> Iterator[None]:
            yield

    with pytest.raises(PluginError, match=r"plugin 'timing' defines 'ksi_attempt_finished' as a"):
        register_plugin(Plugin, name="timing")
    assert not get_plugins().pm.has_plugin("timing")


# -- components checked against their protocol (issue 9, section 2) ----------------


def test_a_component_missing_protocol_methods_is_reported_naming_them(
    ksi_plugin: Callable[..., Any],
) -> None:
    class HalfAgent:
        name: ClassVar[str] = "foo"
        aliases: ClassVar[tuple[str, ...]] = ()

        def setup(self, ctx: Any) -> None:
            pass

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_agents(register: Any) -> None:
            register(HalfAgent)

    ksi_plugin(Plugin, name="x")
    with pytest.raises(UnknownComponentError):
        registry("agent").get("foo")
    err = error_for("x")
    assert err.stage == "register agents"
    assert "plugin 'x' registered agent 'foo' without invocation(), outcome()" in err.error
    assert "nop" in registry("agent")  # the built-ins are untouched


def test_an_environment_whose_isolates_agent_is_not_a_bool_is_reported(
    ksi_plugin: Callable[..., Any],
) -> None:
    class Jail:
        name: ClassVar[str] = "jail"
        aliases: ClassVar[tuple[str, ...]] = ()
        description: ClassVar[str] = "x"
        isolates_agent: ClassVar[str] = "yes"

        def prepare(self, tasks: Any) -> None: ...
        def start(self, ctx: Any) -> Any: ...
        def cleanup(self, run_id: Any) -> int:
            return 0

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_environments(register: Any) -> None:
            register(Jail)

    ksi_plugin(Plugin, name="j")
    with pytest.raises(UnknownComponentError):
        registry("environment").get("jail")
    assert "registered environment 'jail' with isolates_agent='yes'; it must be True" in (
        error_for("j").error
    )


def test_strict_plugins_makes_a_protocol_miss_fatal(
    ksi_plugin: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    class NoGrade:
        name: ClassVar[str] = "no-grade"
        aliases: ClassVar[tuple[str, ...]] = ()

    class Plugin:
        @staticmethod
        @hookimpl
        def ksi_register_evaluators(register: Any) -> None:
            register(NoGrade)

    ksi_plugin(Plugin, name="sloppy")
    monkeypatch.setenv("KSI_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match=r"registered evaluator 'no-grade' without grade\(\)"):
        registry("evaluator")


def test_the_table_of_builtin_hooks_matches_the_builtin_modules() -> None:
    """Built-ins are registered from a table before any is imported; it must not drift."""
    from ksi.plugins import BUILTIN_HOOKS

    for module_name, hooks in BUILTIN_HOOKS.items():
        module = importlib.import_module(module_name)
        defined = {
            name: getattr(module, name)
            for name in dir(module)
            if name.startswith("ksi_") and callable(getattr(module, name))
        }
        assert sorted(defined) == sorted(hooks), module_name
        for name, function in defined.items():
            opts = getattr(function, "ksi_impl", None)
            assert opts is not None and opts["trylast"], f"{module_name}.{name} is not trylast"


def test_a_command_that_needs_no_agent_imports_no_agent_module(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        from ksi.plugins import registry
        registry("task source").get("custom")
        print(" ".join(sorted(m for m in sys.modules if m.startswith("ksi."))))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split()
    assert "ksi.tasks.custom" in loaded
    assert not [m for m in loaded if m.startswith(("ksi.agents", "ksi.environments"))]


def test_listing_tests_pass_whatever_else_is_installed(tmp_path: Path) -> None:
    """Issue 28 #6: a developer's own installed plugin does not fail KSI's tests."""
    other = Site(tmp_path)
    (tmp_path / "ksi_bystander.py").write_text(
        textwrap.dedent(
            """
            from ksi import hookimpl
            from ksi.models import EvalResult

            class Bystander:
                name = "bystander"
                aliases = ()

                def grade(self, task, workdir, **kwargs):
                    return EvalResult(status="scored", native_score=1.0)

            @hookimpl
            def ksi_register_evaluators(register):
                register(Bystander)
            """
        ),
        encoding="utf-8",
    )
    other.add("ksi-bystander", "ksi_bystander", ep_name="bystander")
    listing_tests = [
        "test_ksi_plugins_text_lists_plugins_on_stdout_and_errors_on_stderr",
        "test_ksi_plugins_shows_in_process_plugins_and_clashes",
        "test_docs_plugins_md_example_installs_and_works",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         *(f"tests/test_plugins.py::{name}" for name in listing_tests)],
        env=other.env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "3 passed" in proc.stdout

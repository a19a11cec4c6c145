"""``ksi install`` / ``ksi uninstall``: real pip, in a fresh virtual environment, as a user would.

The fresh venv sees KSI and its dependencies through a ``.pth`` file (so no
network is needed for them) but has its own site-packages, where the plugin
lands; ``python -m ksi install -e plugins/ksi-harbor`` then runs pip in that
venv's interpreter exactly as the installed ``ksi`` script would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from run_helpers import env_without_ksi_settings
from typer.testing import CliRunner

from ksi.cli import build_app
from ksi.cli.install_cmd import INSTALLER_VAR, installer_argv

ROOT = Path(__file__).resolve().parent.parent
HARBOR = ROOT / "plugins" / "ksi-harbor"


def fresh_venv(path: Path) -> Path:
    """A new venv that can import KSI from this checkout; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site_dir = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # KSI from the checkout, and pip, pluggy, typer... from the development venv, minus
    # the repository's plugins installed there (the README's test command installs most,
    # .ci/ray-plugin-check.sh ksi-ray),
    # so that the plugin this test installs is the only one the fresh venv can see.
    deps = path.parent / "dev-site"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not any(
            p in entry.name.lower() for p in ("harbor", "ksi_arc", "ksi_polyglot", "ksi_ray")
        ):
            (deps / entry.name).symlink_to(entry)
    lines = [str(ROOT), str(deps)]
    (Path(site_dir) / "_ksi_dev.pth").write_text("\n".join(lines) + "\n")
    return python


def ksi(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = env_without_ksi_settings()
    env["KSI_INSTALLER"] = "pip"
    return subprocess.run(
        [str(python), "-m", "ksi", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("venv") / "v")


def test_install_editable_plugin_then_uninstall_it(venv_python: Path) -> None:
    before = ksi(venv_python, "plugins", "--json")
    assert before.returncode == 0, before.stderr
    assert '"ksi-harbor"' not in before.stdout

    installed = ksi(venv_python, "install", "-e", str(HARBOR))
    assert installed.returncode == 0, installed.stderr
    assert "New plugins:" in installed.stdout
    assert "harbor (ksi-harbor 0.1.0)" in installed.stdout
    assert "task sources: harbor" in installed.stdout
    assert "evaluators: harbor" in installed.stdout
    # The installer ran in the venv's own interpreter.
    assert f"{venv_python} -m pip install" in installed.stderr
    # Quiet unless -v: the command line and the plugins it added, not pip's ~30 lines.
    assert "Successfully installed" not in installed.stdout + installed.stderr
    assert len((installed.stdout + installed.stderr).splitlines()) <= 6

    listed = ksi(venv_python, "plugins", "--json")
    assert '"ksi-harbor"' in listed.stdout

    removed = ksi(venv_python, "uninstall", "ksi-harbor", "-v")
    assert removed.returncode == 0, removed.stderr
    assert "Successfully uninstalled" in removed.stdout  # -v shows the installer's output
    assert "Removed plugins:" in removed.stdout and "harbor (ksi-harbor" in removed.stdout
    assert '"ksi-harbor"' not in ksi(venv_python, "plugins", "--json").stdout


def test_a_failing_install_exits_nonzero_with_pip_output(venv_python: Path, tmp_path: Path) -> None:
    not_a_project = tmp_path / "empty"
    not_a_project.mkdir()
    result = ksi(venv_python, "install", "-e", str(not_a_project))
    assert result.returncode == 1
    assert "failed with exit code" in result.stderr
    assert "ERROR" in result.stderr  # without -v, the failing installer's last lines still show


def test_install_needs_something_to_install() -> None:
    result = CliRunner().invoke(build_app(), ["install"])
    assert result.exit_code == 2
    assert "name at least one PACKAGE, or -e PATH" in result.output


def test_install_of_a_missing_local_path_is_a_user_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_app(), ["install", "-e", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no such directory" in result.output


def test_uninstall_refuses_ksi_itself() -> None:
    result = CliRunner().invoke(build_app(), ["uninstall", "KSI"])
    assert result.exit_code == 2
    assert "refusing to uninstall KSI itself" in result.output


def test_installer_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(INSTALLER_VAR, "pip")
    assert installer_argv("install") == [sys.executable, "-m", "pip", "install"]
    assert installer_argv("uninstall")[-2:] == ["uninstall", "--yes"]
    # uv, when asked for, targets KSI's interpreter rather than whatever venv is active.
    fake_uv = tmp_path / "uv"
    fake_uv.write_text("#!/bin/sh\n")
    fake_uv.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(INSTALLER_VAR, "uv")
    assert installer_argv("install") == [str(fake_uv), "pip", "install", "--python", sys.executable]
    monkeypatch.setenv(INSTALLER_VAR, "conda")
    with pytest.raises(Exception, match="expected 'pip' or 'uv'"):
        installer_argv("install")


def test_uninstall_takes_the_short_name_ksi_plugins_shows(venv_python: Path) -> None:
    """``ksi plugins`` shows ``harbor``; ``ksi uninstall harbor`` used to say "No plugin
    was added or removed" and exit 0 (issue 28 #9)."""
    installed = ksi(venv_python, "install", "-e", str(HARBOR))
    assert installed.returncode == 0, installed.stderr
    removed = ksi(venv_python, "uninstall", "harbor")
    assert removed.returncode == 0, removed.stderr
    assert "harbor: a plugin of the distribution ksi-harbor; removing that" in removed.stderr
    assert "Removed plugins:" in removed.stdout and "harbor (ksi-harbor" in removed.stdout
    assert '"ksi-harbor"' not in ksi(venv_python, "plugins", "--json").stdout


def test_uninstall_of_a_name_nothing_provides_is_an_error(venv_python: Path) -> None:
    result = ksi(venv_python, "uninstall", "mybench")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "'mybench' is not an installed plugin or the distribution of one" in result.stderr


def test_reinstalling_an_edited_plugin_shows_what_it_registers_now(
    venv_python: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "ksi-qa"
    subprocess.run(
        ["cp", "-r", str(ROOT / "tests/fixtures/plugins/ksi-qa"), str(plugin)], check=True
    )
    first = ksi(venv_python, "install", "-e", str(plugin))
    assert first.returncode == 0, first.stderr
    assert "evaluators: answer-file" in first.stdout
    source = plugin / "ksi_qa.py"
    source.write_text(source.read_text().replace('"answer-file"', '"answer-file-2"'))
    again = ksi(venv_python, "install", "-e", str(plugin))
    assert again.returncode == 0, again.stderr
    assert "Changed plugins (now):" in again.stdout
    assert "evaluators: answer-file-2" in again.stdout
    assert "No plugin was added" not in again.stdout
    assert ksi(venv_python, "uninstall", "qa").returncode == 0

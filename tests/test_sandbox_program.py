"""The sandbox shows the agent's program and its interpreter even under a hidden home.

A fake ``$HOME`` (hidden by the sandbox like the real one) holds a venv with
a console script, a program reached through a chain of symlinks, and
secrets: the programs run, the secrets stay hidden, and the home itself is
never shown.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from docker_support import needs_bwrap, start_sandbox

import ksi
from ksi.environments.sandbox import (
    SandboxEnvironment,
    SandboxHandle,
    hidden_roots,
    unseen_roots,
)
from ksi.environments.sandbox_expose import program_mounts
from ksi.errors import EnvironmentFailure
from ksi.interfaces import Invocation

pytestmark = [pytest.mark.sandbox, needs_bwrap]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hidden ``$HOME`` with a venv CLI, a linked CLI and secrets."""
    home = tmp_path / "home"
    venv = home / "venvs" / "tool"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    key = home / ".ssh" / "id_ed25519"
    (site / "toolpkg.py").write_text(
        "import os\ndef main():\n"
        f"    print('tool ran; key visible:', os.path.exists({str(key)!r}))\n"
    )
    script = venv / "bin" / "tool"
    script.write_text(f"#!{venv}/bin/python\nimport toolpkg\ntoolpkg.main()\n")
    script.chmod(0o755)
    # Like Claude Code's installer: ~/.local/bin/hello -> ~/.local/share/hello/versions/1.0
    real = home / ".local" / "share" / "hello" / "versions" / "1.0"
    real.parent.mkdir(parents=True)
    real.write_text("#!/bin/sh\necho hello ran\n")
    real.chmod(0o755)
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "hello").symlink_to("../share/hello/versions/1.0")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("SECRET KEY\n")
    (home / ".local" / "share" / "keyring").write_text("SECRET\n")
    monkeypatch.setenv("HOME", str(home))
    return home


def _start(tmp_path: Path, home: Path) -> SandboxHandle:
    path = f"{home}/venvs/tool/bin:{home}/.local/bin:{os.environ['PATH']}"
    return start_sandbox(SandboxEnvironment(), tmp_path, {"PATH": path, "LANG": "C.UTF-8"})


def _run(handle: SandboxHandle, argv: tuple[str, ...], tmp_path: Path) -> tuple[int | None, str]:
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    res = handle.exec(
        Invocation(argv), timeout=60, stdout_path=out, stderr_path=err, log_cap_bytes=100_000
    )
    # A log exists once its stream printed something: none is an empty output.
    return res.exit_code, "".join(p.read_text() for p in (out, err) if p.exists())


def test_a_venv_cli_and_a_linked_cli_under_a_hidden_home_run(tmp_path: Path, home: Path) -> None:
    handle = _start(tmp_path, home)
    assert _run(handle, ("tool",), tmp_path) == (0, "tool ran; key visible: False\n")
    assert _run(handle, ("hello",), tmp_path) == (0, "hello ran\n")


def test_what_is_shown_is_the_programs_only(tmp_path: Path, home: Path) -> None:
    handle = _start(tmp_path, home)
    _, out = _run(
        handle,
        (
            "/bin/sh",
            "-c",
            f"cat {home}/.ssh/id_ed25519 {home}/.local/share/keyring 2>/dev/null; ls -A {home}",
        ),
        tmp_path,
    )
    assert "SECRET" not in out
    # /bin/sh is not under the home: nothing of it is shown (the run lists an empty home).
    assert out.split() == []
    mounts = program_mounts("tool", f"{home}/venvs/tool/bin", hidden_roots(True))
    shown = [Path(p) for p in mounts.binds]
    assert home not in shown and Path("/root") not in shown and Path("/home") not in shown
    assert {p.name for p in shown if home in p.parents} == {"bin", "lib", "pyvenv.cfg"} | (
        {"lib64"} if (home / "venvs/tool/lib64").exists() else set()
    )
    linked = program_mounts("hello", f"{home}/.local/bin", hidden_roots(True))
    assert linked.binds == (str(home / ".local/share/hello/versions"),)
    assert linked.symlinks == (("../share/hello/versions/1.0", str(home / ".local/bin/hello")),)


def test_a_program_straight_in_the_home_shows_the_file_alone(tmp_path: Path, home: Path) -> None:
    program = home / "mytool"
    program.write_text("#!/bin/sh\necho mytool ran\n")
    program.chmod(0o755)
    mounts = program_mounts(str(program), "", hidden_roots(True))
    assert mounts.binds == (str(program),)
    handle = _start(tmp_path, home)
    assert _run(handle, (str(program),), tmp_path) == (0, "mytool ran\n")


def test_a_visible_program_on_path_wins_over_a_hidden_one(tmp_path: Path, home: Path) -> None:
    # A pyenv-style shim under the home comes first on PATH; inside, the host's echo runs.
    shims = home / "shims"
    shims.mkdir()
    (shims / "echo").write_text("#!/bin/sh\nprintf 'shim\\n'\n")
    (shims / "echo").chmod(0o755)
    path = f"{shims}:/usr/bin:/bin"
    assert program_mounts("echo", path, hidden_roots(True)).binds == ()
    handle = _start(tmp_path, home)
    out, err = tmp_path / "o.log", tmp_path / "e.log"
    res = handle.exec(
        Invocation(("echo", "visible"), env={"PATH": path}),
        timeout=60,
        stdout_path=out,
        stderr_path=err,
        log_cap_bytes=100_000,
    )
    assert (res.exit_code, out.read_text()) == (0, "visible\n")


def test_a_program_under_tmp_runs_although_the_sandbox_has_its_own_tmp(
    tmp_path: Path, home: Path
) -> None:
    """A venv made in /tmp (a CI checkout's) is shown as one under a hidden home is."""
    if Path("/tmp").resolve() not in tmp_path.resolve().parents:
        pytest.skip(f"pytest's temporary directory {tmp_path} is not under /tmp")
    venv = tmp_path / "tmpvenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    mounts = program_mounts(python, "", unseen_roots(True))
    assert "/tmp" not in mounts.binds and str(tmp_path) not in mounts.binds
    assert any(link == python for _, link in mounts.symlinks) or python in mounts.binds
    handle = _start(tmp_path, home)
    assert _run(handle, (python, "-I", "-c", "print('ran')"), tmp_path) == (0, "ran\n")
    # The same with /tmp left out of what is looked under: the program is not found inside.
    hidden_only = program_mounts(python, "", hidden_roots(True))
    assert not any(link == python for _, link in hidden_only.symlinks)


#: Where this test's KSI has its dependencies (attrs, pluggy...).
DEPS = Path(sysconfig.get_paths()["purelib"])


def _tmp_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *roots: Path) -> str:
    """A venv under /tmp whose ``.pth`` names ``roots`` (like ``pip install -e``), made KSI's
    own Python."""
    if Path("/tmp").resolve() not in tmp_path.resolve().parents:
        pytest.skip(f"pytest's temporary directory {tmp_path} is not under /tmp")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "_editable.pth").write_text("".join(f"{p}\n" for p in roots))
    python = str(venv / "bin" / "python")
    monkeypatch.setattr(sys, "executable", python)
    return python


def test_ksis_own_python_in_a_tmp_venv_imports_from_it_in_the_sandbox(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KSI's venv and its editable checkout under /tmp (a CI checkout's): a process started
    with KSI's own interpreter (the ACP client), or starting it (an MCP server), imports
    from them inside, read-only, while the rest of the host's /tmp stays out of sight."""
    checkout = tmp_path / "checkout"
    (checkout / "ownmod").mkdir(parents=True)
    (checkout / "ownmod" / "__init__.py").write_text("")
    python = _tmp_venv(tmp_path, monkeypatch, checkout, Path(ksi.__file__).parent.parent, DEPS)
    (tmp_path / "secret.txt").write_text("SECRET\n")
    code = (
        "import os, ownmod, ksi.knowledge.tools\n"
        f"print('imported; secret visible:', os.path.exists({str(tmp_path / 'secret.txt')!r}))\n"
        "try:\n"
        f"    open({str(checkout / 'planted.py')!r}, 'w')\n"
        "except OSError as exc:\n"
        "    print('checkout writable: no', exc.strerror)\n"
    )
    SandboxEnvironment(network="none").prepare([])
    handle = _start(tmp_path, home)
    expected = (0, "imported; secret visible: False\ncheckout writable: no Read-only file system\n")
    assert _run(handle, (python, "-c", code), tmp_path) == expected
    helper = Invocation(("/bin/sh", "-c", 'exec "$0" -c "$1"', python, code), programs=(python,))
    assert _run(handle, helper.argv, tmp_path) != expected  # nothing said it runs KSI's Python
    out, err = tmp_path / "o.log", tmp_path / "e.log"
    res = handle.exec(helper, timeout=60, stdout_path=out, stderr_path=err, log_cap_bytes=100_000)
    assert (res.exit_code, out.read_text()) == expected, err.read_text()
    assert not (checkout / "planted.py").exists()


def test_ksis_own_python_importing_from_a_hidden_root_itself_fails_the_probe(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KSI's dependencies straight in the home, named by a ``.pth``: the home is never shown,
    so ``prepare`` says KSI cannot be imported inside, names the path and the fix, before
    any attempt runs."""
    for dep in DEPS.iterdir():
        if dep.suffix != ".pth" and not dep.name.startswith(("ksi", "_editable")):
            (home / dep.name).symlink_to(dep)
    _tmp_venv(tmp_path, monkeypatch, Path(ksi.__file__).parent.parent, home)
    with pytest.raises(EnvironmentFailure) as err:
        SandboxEnvironment(network="none").prepare([])
    message = str(err.value)
    assert "cannot import KSI inside the sandbox" in message
    assert str(home) in message and "expose=PATH" in message


def test_ksis_own_python_inside_the_run_directory_is_refused_with_the_fix(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run directory is hidden after KSI's Python is shown: a venv inside it cannot be
    shown without the other attempts, so the attempt's sandbox refuses, saying why."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    python = _tmp_venv(run_dir, monkeypatch, Path(ksi.__file__).parent.parent, DEPS)
    handle = start_sandbox(SandboxEnvironment(network="none"), run_dir)
    with pytest.raises(EnvironmentFailure) as err:
        handle.exec(
            Invocation((python, "-c", "import ksi")),
            timeout=60,
            stdout_path=tmp_path / "o.log",
            stderr_path=tmp_path / "e.log",
            log_cap_bytes=100_000,
        )
    assert f"inside the run directory {run_dir}" in str(err.value)
    assert "--run-dir elsewhere" in str(err.value)

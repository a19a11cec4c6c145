"""The ``sandbox`` environment with real bubblewrap (skipped, with the reason, without it)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_support import ROOT, needs_bwrap

from ksi.environments.sandbox import SandboxEnvironment, SandboxHandle
from ksi.errors import EnvironmentFailure, OptionsError
from ksi.interfaces import AttemptContext, Invocation
from ksi.models import TaskSpec
from ksi.options import create_component

pytestmark = [pytest.mark.sandbox, needs_bwrap]


def _env(**options: str) -> SandboxEnvironment:
    env = create_component(
        SandboxEnvironment, options, kind="environment", option_flag="--environment-option"
    )
    assert isinstance(env, SandboxEnvironment)
    return env


def _start(
    env: SandboxEnvironment, tmp_path: Path, base_env: dict[str, str] | None = None
) -> SandboxHandle:
    workspace = tmp_path / "attempt" / "workspace"
    (workspace / "repo").mkdir(parents=True)
    task = TaskSpec(id="t1")
    env.prepare([task])
    return env.start(
        AttemptContext(
            run_id="r",
            task=task,
            attempt=1,
            attempt_dir=workspace.parent,
            host_workspace=workspace,
            base_env=base_env
            if base_env is not None
            else {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"},
        )
    )


def _run(
    handle: SandboxHandle,
    argv: tuple[str, ...],
    tmp_path: Path,
    *,
    timeout: float | None = 60,
    env: dict[str, str] | None = None,
) -> tuple[int | None, str, str, bool]:
    out, err = tmp_path / f"o-{uuid.uuid4().hex}", tmp_path / f"e-{uuid.uuid4().hex}"
    res = handle.exec(
        Invocation(argv, env=env or {}, cwd="repo"),
        timeout=timeout,
        stdout_path=out,
        stderr_path=err,
        log_cap_bytes=1_000_000,
    )
    return res.exit_code, out.read_text(), err.read_text(), res.timed_out


def _sh(
    handle: SandboxHandle, script: str, tmp_path: Path, **kw: object
) -> tuple[int | None, str, str, bool]:
    return _run(handle, ("/bin/sh", "-c", script), tmp_path, **kw)  # type: ignore[arg-type]


def test_the_workspace_is_the_only_writable_place(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    handle = _start(_env(), tmp_path)
    _, out, err, _ = _sh(
        handle,
        f"pwd; echo made > made.txt; echo x > {outside}/escaped.txt; "
        "touch /etc/ksi-escaped; touch /usr/ksi-escaped; echo tmp > /tmp/t && cat /tmp/t",
        tmp_path,
    )
    handle.stop()
    assert out.splitlines()[0] == str(handle.host_workspace / "repo")
    made = handle.host_workspace / "repo" / "made.txt"
    assert made.read_text() == "made\n" and made.stat().st_uid == os.getuid()
    assert "tmp" in out.splitlines()  # a private /tmp exists and is writable
    assert not (outside / "escaped.txt").exists()
    assert not Path("/etc/ksi-escaped").exists()
    assert not Path("/usr/ksi-escaped").exists()
    assert err.count("Read-only file system") == 2


@pytest.fixture
def fake_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME holding a secret, outside /tmp (which the sandbox replaces anyway)."""
    home = Path(tempfile.mkdtemp(prefix=".ksi-test-home-", dir=ROOT))
    (home / ".config").mkdir()
    (home / ".config" / "credentials").write_text("top-secret-token\n")
    monkeypatch.setenv("HOME", str(home))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_the_host_home_cannot_be_read(tmp_path: Path, fake_home: Path) -> None:
    secret = fake_home / ".config" / "credentials"
    assert secret.read_text() == "top-secret-token\n"  # readable outside the sandbox
    handle = _start(_env(), tmp_path)
    _, out, err, _ = _sh(
        handle,
        f'cat {secret}; echo "home=$HOME"; ls -A "$HOME" | wc -l; ls -A /root | wc -l',
        tmp_path,
    )
    handle.stop()
    assert "top-secret-token" not in out
    assert "No such file" in err
    lines = out.splitlines()
    # HOME is an empty directory in the workspace; the host's /root is hidden too.
    assert lines[0] == f"home={handle.host_workspace / '.ksi' / 'home'}"
    assert lines[1:] == ["0", "0"]


def test_the_workspace_is_usable_even_under_a_hidden_home(tmp_path: Path, fake_home: Path) -> None:
    handle = _start(_env(), fake_home)  # workspace inside the (hidden) home directory
    code, out, _, _ = _sh(handle, "echo ok > made.txt && cat made.txt", tmp_path)
    handle.stop()
    assert (code, out) == (0, "ok\n")
    assert (handle.host_workspace / "repo" / "made.txt").is_file()


class _Listener:
    """A socket listening on the host's loopback that answers every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"hello\n")


def test_no_network_by_default_and_host_network_when_asked(tmp_path: Path) -> None:
    listener = _Listener()
    # bash's /dev/tcp: no client tool needed, and bash is outside any hidden home.
    connect = ("/bin/bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{listener.port} && head -1 <&3")
    try:
        offline = _start(_env(), tmp_path / "a")
        no_code, no_out, no_err, _ = _run(offline, connect, tmp_path)
        online = _start(_env(network="host"), tmp_path / "b")
        ok_code, ok_out, _, _ = _run(online, connect, tmp_path)
    finally:
        listener.sock.close()
    assert no_code != 0 and "Connection refused" in no_err and "hello" not in no_out
    assert (ok_code, ok_out) == (0, "hello\n")


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and b"sleep" in cmdline:
            found.append(int(entry.name))
    return found


def test_no_process_survives_a_timeout(tmp_path: Path) -> None:
    marker = str(7_000_000 + uuid.uuid4().int % 1_000_000)
    handle = _start(_env(), tmp_path)
    code, _, _, timed_out = _sh(
        handle,
        f"sleep {marker} & setsid sleep {marker} & (sleep {marker} &); exec sleep {marker}",
        tmp_path,
        timeout=1,
    )
    handle.stop()
    assert timed_out and code is None
    assert _sleepers(marker) == []


def test_background_processes_do_not_outlive_the_exec(tmp_path: Path) -> None:
    marker = str(8_000_000 + uuid.uuid4().int % 1_000_000)
    handle = _start(_env(), tmp_path)
    code, _, _, _ = _sh(handle, f"setsid sleep {marker} & echo started", tmp_path)
    assert code == 0
    assert _sleepers(marker) == []


def test_environment_is_scrubbed_and_capabilities_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSI_TEST_HOST_ONLY_SECRET", "leak")
    handle = _start(
        _env(), tmp_path, base_env={"PATH": os.environ["PATH"], "API_KEY": "k", "TMPDIR": "/x"}
    )
    _, out, _, _ = _sh(handle, "env; grep -E '^Cap(Eff|Prm)' /proc/self/status", tmp_path)
    assert "API_KEY=k" in out.splitlines()
    assert "KSI_TEST_HOST_ONLY_SECRET" not in out
    assert "TMPDIR=" not in out
    assert "CapEff:\t0000000000000000" in out
    assert "CapPrm:\t0000000000000000" in out


@pytest.mark.skipif(not Path("/run/docker.sock").exists(), reason="no docker socket on host")
def test_container_engine_socket_is_masked(tmp_path: Path) -> None:
    handle = _start(_env(), tmp_path)
    code, _, _, _ = _sh(handle, "test -S /run/docker.sock", tmp_path)
    assert code == 1


def test_copy_in_and_out_through_the_workspace(tmp_path: Path) -> None:
    src = tmp_path / "tests.sh"
    src.write_text("echo hidden-test\n")
    handle = _start(_env(), tmp_path)
    handle.copy_in(src, "grader/tests.sh")
    handle.copy_in(src, "repo/t.sh")
    code, out, _, _ = _sh(handle, "sh ../grader/tests.sh; sh t.sh", tmp_path)
    assert (code, out) == (0, "hidden-test\nhidden-test\n")
    assert handle.copy_out("grader/tests.sh", tmp_path / "back.sh")
    assert (tmp_path / "back.sh").read_text() == "echo hidden-test\n"
    assert not handle.copy_out("repo/none", tmp_path / "none")
    with pytest.raises(EnvironmentFailure, match="outside the workspace"):
        handle.copy_in(src, "/etc/x")


def test_missing_bwrap_and_bad_options_are_clear_errors() -> None:
    with pytest.raises(EnvironmentFailure, match=r"'/nonexistent/bwrap' \(bubblewrap\) was not"):
        _env(bwrap_binary="/nonexistent/bwrap").prepare([])
    with pytest.raises(OptionsError, match=r"network 'bridge' is not valid; use none"):
        _env(network="bridge")
    with pytest.raises(EnvironmentFailure, match=r"expose path '/nonexistent/x' does not exist"):
        _env(expose="/nonexistent/x").prepare([])

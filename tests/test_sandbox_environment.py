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
from docker_support import ROOT, needs_bwrap, start_sandbox
from run_helpers import ksi, write_tasks

from ksi.environments.sandbox import SandboxEnvironment, SandboxHandle
from ksi.errors import EnvironmentFailure, OptionsError
from ksi.interfaces import Invocation
from ksi.options import create_component

pytestmark = [pytest.mark.sandbox, needs_bwrap]


def _env(**options: str) -> SandboxEnvironment:
    env = create_component(
        SandboxEnvironment, options, kind="environment", option_flag="--environment-option"
    )
    assert isinstance(env, SandboxEnvironment)
    return env


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
    # A log exists once its stream printed something: none is an empty output.
    printed = [p.read_text() if p.exists() else "" for p in (out, err)]
    return res.exit_code, printed[0], printed[1], res.timed_out


def _sh(
    handle: SandboxHandle, script: str, tmp_path: Path, **kw: object
) -> tuple[int | None, str, str, bool]:
    return _run(handle, ("/bin/sh", "-c", script), tmp_path, **kw)  # type: ignore[arg-type]


def test_the_workspace_is_the_only_writable_place(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    handle = start_sandbox(_env(), tmp_path)
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
    handle = start_sandbox(_env(), tmp_path)
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
    handle = start_sandbox(_env(), fake_home)  # workspace inside the (hidden) home directory
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
        offline = start_sandbox(_env(), tmp_path / "a")
        no_code, no_out, no_err, _ = _run(offline, connect, tmp_path)
        online = start_sandbox(_env(network="host"), tmp_path / "b")
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
    handle = start_sandbox(_env(), tmp_path)
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
    handle = start_sandbox(_env(), tmp_path)
    code, _, _, _ = _sh(handle, f"setsid sleep {marker} & echo started", tmp_path)
    assert code == 0
    assert _sleepers(marker) == []


def test_halt_leaves_no_process_even_one_that_left_the_session_and_cleared_its_env(
    tmp_path: Path,
) -> None:
    """What escapes the tree kill on ``local`` (``setsid env -i``) dies with the PID namespace."""
    marker = str(9_000_000 + uuid.uuid4().int % 1_000_000)
    handle = start_sandbox(_env(), tmp_path)
    try:
        code, _, _, _ = _sh(handle, f"setsid env -i sleep {marker} & echo started", tmp_path)
        assert code == 0
        handle.halt()
        assert _sleepers(marker) == []
        handle.halt()  # idempotent
        res = handle.exec(
            Invocation(("/bin/sh", "-c", f"sleep {marker}")),
            timeout=60,
            stdout_path=tmp_path / "out",
            stderr_path=tmp_path / "err",
            log_cap_bytes=1000,
        )
        assert res.spawn_error is not None and res.exit_code is None
        assert _sleepers(marker) == []
    finally:
        handle.stop()


def test_environment_is_scrubbed_and_capabilities_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSI_TEST_HOST_ONLY_SECRET", "leak")
    handle = start_sandbox(
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
    handle = start_sandbox(_env(), tmp_path)
    code, _, _, _ = _sh(handle, "test -S /run/docker.sock", tmp_path)
    assert code == 1


def test_copy_in_and_out_through_the_workspace(tmp_path: Path) -> None:
    src = tmp_path / "tests.sh"
    src.write_text("echo hidden-test\n")
    handle = start_sandbox(_env(), tmp_path)
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
    with pytest.raises(OptionsError, match=r"network 'bridge' is not valid; use endpoints .* host"):
        _env(network="bridge")
    with pytest.raises(EnvironmentFailure, match=r"expose path '/nonexistent/x' does not exist"):
        _env(expose="/nonexistent/x").prepare([])


# -- secrets root can read, other attempts' files (issue 11, items 5 and 6) -------------


@pytest.fixture
def planted_root_secrets() -> Iterator[list[Path]]:
    """Secrets only root can read: a fake SSH host key and a file in /root (removed after)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the leak is of files only root can read")
    token = uuid.uuid4().hex
    planted = []
    for path in (Path(f"/etc/ssh/ssh_host_ksitest{token[:8]}_key"), Path(f"/root/.ksi-{token}")):
        if path.parent.is_dir():
            path.write_text(f"PRIVATE-{token}\n")
            path.chmod(0o600)
            planted.append(path)
    try:
        yield planted
    finally:
        for path in planted:
            path.unlink(missing_ok=True)


def test_an_agent_run_as_root_reads_no_host_secret(
    tmp_path: Path, planted_root_secrets: list[Path]
) -> None:
    """``ksi run --environment sandbox`` as root: shadow, gshadow, host keys, /root all fail."""
    secrets = [Path("/etc/shadow"), Path("/etc/gshadow"), *planted_root_secrets]
    secrets = [p for p in secrets if p.exists()]
    contents = {p: p.read_text() for p in secrets}
    assert all(contents.values()), "root reads them outside the sandbox"
    reads = " ".join(f"cat {p};" for p in secrets)
    cmd = f"{{ {reads} ls -A /root; ls /etc/ssh; }} > repo/loot.txt 2>&1; true"
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p"}])
    run_dir = tmp_path / "run"
    r = ksi(
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={cmd}",
        "--environment", "sandbox", "--run-dir", str(run_dir),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    loot = (run_dir / "attempts" / "t" / "1" / "captured" / "repo" / "loot.txt").read_text()
    for path, content in contents.items():
        for line in content.splitlines():
            assert line not in loot, f"{path} was read in the sandbox"
    for path in planted_root_secrets:
        if path.parent == Path("/root"):
            assert f"cat: {path}: No such file" in loot  # /root is an empty directory


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_other_attempts_and_runs_cannot_be_read(tmp_path: Path, executor: str) -> None:
    """Two concurrent attempts each plant a token; neither sees the other's, nor another run.

    Also with worker processes: each worker builds its attempts' sandboxes itself.
    """
    outside_tmp = Path(tempfile.mkdtemp(prefix=".ksi-test-runs-", dir=ROOT))  # /tmp is hidden
    try:
        _check_runs_are_hidden(tmp_path, outside_tmp / "runs", executor)
    finally:
        shutil.rmtree(outside_tmp)


def _check_runs_are_hidden(tmp_path: Path, runs: Path, executor: str) -> None:
    other_run = runs / "older"
    (other_run / "attempts" / "t" / "1" / "workspace").mkdir(parents=True)
    (other_run / "run.json").write_text("{}")
    (other_run / "attempts" / "t" / "1" / "workspace" / "mine.txt").write_text("older-token\n")
    run_dir = runs / "now"
    probe = (
        "cat /proc/sys/kernel/random/uuid > repo/mine.txt; sleep 1; "
        f"{{ cat {run_dir}/attempts/*/*/*/repo/mine.txt {runs}/*/attempts/*/*/*/mine.txt; "
        f"ls {runs} {run_dir}; cat {run_dir}/journal.jsonl; }} > repo/seen.txt 2>&1; true"
    )
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"task_id": "t", "prompt": "p"}])
    r = ksi(
        "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={probe}",
        "--environment", "sandbox", "--run-dir", str(run_dir),
        "--attempts", "2", "--concurrency", "2", "--executor", executor,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    for n in (1, 2):
        captured = run_dir / "attempts" / "t" / str(n) / "captured" / "repo"
        own = (captured / "mine.txt").read_text().strip()
        seen = (captured / "seen.txt").read_text()
        tokens = [line for line in seen.splitlines() if len(line) == 36 and line.count("-") == 4]
        assert tokens == [own], f"attempt {n} saw another attempt's file:\n{seen}"
        assert "older-token" not in seen and "older" not in seen.split()
        assert '"task_id"' not in seen  # the journal is hidden too
    # Outside the sandbox, everything is still where KSI left it.
    assert (other_run / "attempts" / "t" / "1" / "workspace" / "mine.txt").is_file()


def test_the_hide_option_hides_more_paths(tmp_path: Path) -> None:
    secret_dir = Path(tempfile.mkdtemp(prefix=".ksi-test-hide-", dir=ROOT))
    try:
        (secret_dir / "key").write_text("hide-me\n")
        handle = start_sandbox(_env(hide=str(secret_dir)), tmp_path)
        _, out, _, _ = _sh(handle, f"cat {secret_dir}/key; ls -A {secret_dir} | wc -l", tmp_path)
        handle.stop()
    finally:
        shutil.rmtree(secret_dir)
    assert out.splitlines() == ["0"]
    with pytest.raises(EnvironmentFailure, match=r"hide path 'rel/x' is not absolute"):
        _env(hide="rel/x").prepare([])

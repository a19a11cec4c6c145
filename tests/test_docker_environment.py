"""The ``docker`` environment on a real Docker engine (skipped, with the reason, without one)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_support import TEST_IMAGE, needs_docker
from test_sandbox_network import Server
from typer.testing import CliRunner

from ksi.environments.docker import (
    LABEL_ATTEMPT,
    LABEL_RUN,
    DockerEnvironment,
    DockerHandle,
)
from ksi.errors import EnvironmentFailure, KsiWarning, OptionsError, UserInputError
from ksi.interfaces import AttemptContext, Endpoint, Invocation
from ksi.models import TaskSpec
from ksi.options import create_component
from ksi.task_parts import Runtime

pytestmark = [pytest.mark.docker, needs_docker]

DOCKER = os.environ.get("KSI_DOCKER_BINARY", "").strip() or "docker"


def _printed(log: Path) -> str:
    """What a process wrote to a log (none when it printed nothing: no empty log file)."""
    return log.read_text() if log.exists() else ""


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=120)


def _containers(run_id: str) -> list[str]:
    out = _docker("ps", "-aq", "--filter", f"label={LABEL_RUN}={run_id}").stdout
    return out.split()


def _networks(run_id: str) -> list[str]:
    out = _docker("network", "ls", "-q", "--filter", f"label={LABEL_RUN}={run_id}").stdout
    return out.split()


@pytest.fixture
def run_id() -> Iterator[str]:
    """A fresh run id; every container and network left with it is removed after the test."""
    rid = f"test-{uuid.uuid4().hex[:10]}"
    yield rid
    ids = _containers(rid)
    if ids:
        _docker("rm", "-f", *ids)
    nets = _networks(rid)
    if nets:
        _docker("network", "rm", *nets)


def _env(**options: str) -> DockerEnvironment:
    env = create_component(
        DockerEnvironment,
        {"image": TEST_IMAGE, **options},
        kind="environment",
        option_flag="--environment-option",
    )
    assert isinstance(env, DockerEnvironment)
    return env


def _start(
    env: DockerEnvironment,
    tmp_path: Path,
    run_id: str,
    *,
    task_id: str = "t1",
    attempt: int = 1,
    base_env: dict[str, str] | None = None,
) -> DockerHandle:
    attempt_dir = tmp_path / f"{task_id}-{attempt}"
    workspace = attempt_dir / "workspace"
    (workspace / "repo").mkdir(parents=True, exist_ok=True)
    task = TaskSpec(id=task_id, prompt="p")
    env.prepare([task])
    return env.start(
        AttemptContext(
            run_id=run_id,
            task=task,
            attempt=attempt,
            attempt_dir=attempt_dir,
            host_workspace=workspace,
            base_env=base_env if base_env is not None else {"LANG": "C.UTF-8"},
        )
    )


def _sh(
    handle: DockerHandle,
    script: str,
    tmp_path: Path,
    *,
    timeout: float | None = 60,
    env: dict[str, str] | None = None,
    cwd: str = "repo",
    stdin: str | None = None,
) -> tuple[int | None, str, str, bool]:
    out, err = tmp_path / f"out-{uuid.uuid4().hex}", tmp_path / f"err-{uuid.uuid4().hex}"
    res = handle.exec(
        Invocation(("sh", "-c", script), env=env or {}, cwd=cwd, stdin=stdin),
        timeout=timeout,
        stdout_path=out,
        stderr_path=err,
        log_cap_bytes=1_000_000,
    )
    # A log exists once its stream printed something: none is an empty output.
    return res.exit_code, _printed(out), _printed(err), res.timed_out


def test_agent_writes_into_repo_as_the_host_user_and_the_files_are_deletable(
    tmp_path: Path, run_id: str
) -> None:
    handle = _start(_env(), tmp_path, run_id)
    try:
        assert handle.workspace_path == "/workspace"
        code, out, _, _ = _sh(
            handle, "pwd; mkdir -p pkg/sub && echo hello > pkg/sub/made.txt && id -u", tmp_path
        )
        assert code == 0
        lines = out.split()
        assert lines[0] == "/workspace/repo"
        assert lines[1] == str(os.getuid())
    finally:
        handle.stop()
    made = handle.host_workspace / "repo" / "pkg" / "sub" / "made.txt"
    assert made.read_text() == "hello\n"
    assert made.stat().st_uid == os.getuid()
    assert made.parent.stat().st_uid == os.getuid()
    shutil.rmtree(handle.host_workspace / "repo" / "pkg")
    assert not (handle.host_workspace / "repo" / "pkg").exists()


def test_process_gets_base_env_plus_invocation_env_and_nothing_of_the_host(
    tmp_path: Path, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSI_TEST_HOST_ONLY_SECRET", "must-not-leak")
    base = {"ANTHROPIC_API_KEY": "sk-test-123", "LANG": "C.UTF-8", "PATH": "/host/only/bin"}
    handle = _start(_env(), tmp_path, run_id, base_env=base)
    try:
        code, out, _, _ = _sh(handle, "env", tmp_path, env={"EXTRA_VAR": "x y"})
    finally:
        handle.stop()
    assert code == 0
    seen = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert seen["ANTHROPIC_API_KEY"] == "sk-test-123"
    assert seen["EXTRA_VAR"] == "x y"
    assert seen["LANG"] == "C.UTF-8"
    assert "KSI_TEST_HOST_ONLY_SECRET" not in seen
    # The image's PATH applies, not the host's; HOME is an empty directory in the workspace.
    assert seen["PATH"] == "/bin"
    assert seen["HOME"] == "/workspace/.ksi/home"


def _all_command_lines() -> str:
    lines = []
    for entry in Path("/proc").iterdir():
        try:
            lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, NotADirectoryError):
            continue
    return "\n".join(lines)


def test_secret_values_are_not_on_the_docker_command_line(tmp_path: Path, run_id: str) -> None:
    handle = _start(_env(), tmp_path, run_id, base_env={"MY_TOKEN": "tok-very-secret"})
    try:
        # While the exec runs, the docker client's argv (visible to every host user) is listed.
        out = tmp_path / "ps.txt"
        done = threading.Event()

        def snapshot() -> None:
            while not done.is_set():
                listing = _all_command_lines()
                if "ksi-exec" in listing:
                    out.write_text(listing)
                    return

        watcher = threading.Thread(target=snapshot, daemon=True)
        watcher.start()
        code, got, _, _ = _sh(handle, 'sleep 2; echo "$MY_TOKEN"', tmp_path)
        done.set()
        watcher.join()
    finally:
        handle.stop()
    assert code == 0 and got == "tok-very-secret\n"
    listing = out.read_text()
    assert "ksi-exec" in listing
    assert "tok-very-secret" not in listing


def test_capabilities_are_dropped_and_privileges_cannot_be_gained(
    tmp_path: Path, run_id: str
) -> None:
    handle = _start(_env(), tmp_path, run_id)
    try:
        code, out, _, _ = _sh(
            handle, "grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status", tmp_path
        )
    finally:
        handle.stop()
    assert code == 0
    status = dict(line.split(":\t") for line in out.splitlines())
    assert status["CapEff"] == "0000000000000000"
    assert status["CapPrm"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1"


def test_pids_limit_caps_the_number_of_processes(tmp_path: Path, run_id: str) -> None:
    handle = _start(_env(pids_limit="20"), tmp_path, run_id)
    try:
        code, out, _, _ = _sh(
            handle,
            # The forking loop runs in a subshell that dies once fork fails; after it only
            # shell builtins run, since at the limit nothing can fork.
            "(n=0; while [ $n -lt 40 ]; do sleep 30 & n=$((n+1)); done) 2>/dev/null; "
            "set -- /proc/[0-9]*; echo $#",
            tmp_path,
        )
    finally:
        handle.stop()
    assert code == 0, out
    assert 10 < int(out.split()[-1]) <= 20


class _Banner:
    """A TCP server on every host address that greets each connection with a fixed line."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"ksi-banner\n")

    def close(self) -> None:
        self.sock.close()


def test_network_none_blocks_connections_that_bridge_allows(tmp_path: Path, run_id: str) -> None:
    server = _Banner()
    try:
        bridged = _start(_env(network="bridge"), tmp_path, run_id, task_id="bridged")
        offline = _start(_env(network="none"), tmp_path, run_id, task_id="offline")
        try:
            # The host as the bridged container sees it: its default gateway.
            _, route, _, _ = _sh(bridged, "ip route | awk '/^default/ {print $3}'", tmp_path)
            probe = f"nc -w 5 {route.strip()} {server.port} </dev/null"
            ok_code, ok_out, ok_err, _ = _sh(bridged, probe, tmp_path)
            no_code, no_out, no_err, _ = _sh(offline, probe, tmp_path)
        finally:
            bridged.stop()
            offline.stop()
    finally:
        server.close()
    assert ok_code == 0 and ok_out == "ksi-banner\n", (probe, ok_out, ok_err)
    assert no_code != 0 and "ksi-banner" not in no_out
    assert "unreachable" in no_err.lower()


def test_timeout_kills_everything_the_exec_started_and_stop_removes_the_container(
    tmp_path: Path, run_id: str
) -> None:
    handle = _start(_env(), tmp_path, run_id)
    try:
        code, _, _, timed_out = _sh(
            handle, "sleep 1001 & (setsid sleep 1002 &); exec sleep 1003", tmp_path, timeout=1
        )
        assert timed_out and code is None
        _, ps, _, _ = _sh(handle, "ps -o args", tmp_path)
        assert "sleep 10" not in ps
        assert "sleep infinity" in ps  # the container itself is still usable
    finally:
        handle.stop()
    assert _containers(run_id) == []
    handle.stop()  # idempotent


def test_background_processes_do_not_survive_a_finished_exec(tmp_path: Path, run_id: str) -> None:
    handle = _start(_env(), tmp_path, run_id)
    try:
        code, _, _, _ = _sh(handle, "sleep 1004 & echo started", tmp_path)
        assert code == 0
        _, ps, _, _ = _sh(handle, "ps -o args", tmp_path)
    finally:
        handle.stop()
    assert "sleep 1004" not in ps


def test_exit_code_stdin_and_log_cap(tmp_path: Path, run_id: str) -> None:
    handle = _start(_env(), tmp_path, run_id)
    try:
        code, out, _, _ = _sh(handle, "cat; exit 7", tmp_path, stdin="from stdin\n")
        assert (code, out) == (7, "from stdin\n")
        log = tmp_path / "capped.log"
        res = handle.exec(
            Invocation(("sh", "-c", "yes | head -c 50000")),
            timeout=60,
            stdout_path=log,
            stderr_path=tmp_path / "capped.err",
            log_cap_bytes=1000,
        )
    finally:
        handle.stop()
    assert res.output_truncated
    assert log.stat().st_size < 1200


def test_containers_carry_run_and_attempt_labels(tmp_path: Path, run_id: str) -> None:
    handle = _start(_env(), tmp_path, run_id, task_id="task/\u00e9", attempt=3)
    try:
        res = _docker("inspect", "--format", "{{json .Config.Labels}}", handle.container)
        labels = json.loads(res.stdout)
    finally:
        handle.stop()
    assert labels[LABEL_RUN] == run_id
    assert labels[LABEL_ATTEMPT] == "task/\u00e9/3"
    assert handle.container.startswith("ksi-")


def test_cleanup_removes_leftovers_of_one_run_or_of_all(tmp_path: Path, run_id: str) -> None:
    other = f"{run_id}-other"
    env = _env()
    try:
        _start(env, tmp_path, run_id, task_id="a")
        _start(env, tmp_path, run_id, task_id="b")
        _start(env, tmp_path, other, task_id="c")
        assert len(_containers(run_id)) == 2
        assert len(_networks(run_id)) == 1  # the run's internal network (network=endpoints)
        assert env.cleanup(run_id) == 3  # two containers and the network
        assert _containers(run_id) == [] and _networks(run_id) == []
        assert len(_containers(other)) == 1 and len(_networks(other)) == 1
        assert env.cleanup(None) >= 2
        assert _containers(other) == [] and _networks(other) == []
        assert env.cleanup(run_id) == 0
    finally:
        ids = _containers(other)
        if ids:
            _docker("rm", "-f", *ids)
        nets = _networks(other)
        if nets:
            _docker("network", "rm", *nets)


def test_starting_an_attempt_again_replaces_its_leftover_container(
    tmp_path: Path, run_id: str
) -> None:
    env = _env()
    first = _start(env, tmp_path, run_id)
    second = _start(env, tmp_path, run_id)  # e.g. a resumed run before any cleanup
    try:
        assert first.container == second.container
        assert len(_containers(run_id)) == 1
        code, _, _, _ = _sh(second, "true", tmp_path)
        assert code == 0
    finally:
        second.stop()


def test_copy_in_and_copy_out_inside_and_outside_the_workspace(tmp_path: Path, run_id: str) -> None:
    src = tmp_path / "hidden-tests"
    src.mkdir()
    (src / "test_x.sh").write_text("echo graded\n")
    handle = _start(_env(), tmp_path, run_id)
    try:
        handle.copy_in(src, "/opt/grader")
        handle.copy_in(src / "test_x.sh", "repo/tests/test_x.sh")
        code, out, _, _ = _sh(handle, "sh /opt/grader/test_x.sh; cat tests/test_x.sh", tmp_path)
        assert code == 0 and out == "graded\necho graded\n"
        _sh(handle, "echo result > /opt/grader/out.txt", tmp_path)
        assert handle.copy_out("/opt/grader/out.txt", tmp_path / "back" / "out.txt")
        assert handle.copy_out("/opt/grader", tmp_path / "backdir")
        assert handle.copy_out("repo/tests", tmp_path / "fromrepo")
        assert not handle.copy_out("/opt/nothing-here", tmp_path / "none")
        assert not handle.copy_out("repo/nothing-here", tmp_path / "none2")
    finally:
        handle.stop()
    assert (tmp_path / "back" / "out.txt").read_text() == "result\n"
    assert (tmp_path / "backdir" / "test_x.sh").read_text() == "echo graded\n"
    assert (tmp_path / "fromrepo" / "test_x.sh").is_file()
    assert (handle.host_workspace / "repo" / "tests" / "test_x.sh").stat().st_uid == os.getuid()


def test_task_dockerfile_is_built_once_and_cached_by_content(tmp_path: Path, run_id: str) -> None:
    ctx = tmp_path / "img"
    ctx.mkdir()
    marker = uuid.uuid4().hex
    (ctx / "Dockerfile").write_text(f"FROM {TEST_IMAGE}\nCOPY marker.txt /marker.txt\n")
    (ctx / "marker.txt").write_text(marker + "\n")
    task = TaskSpec(id="df", metadata={"dockerfile": str(ctx / "Dockerfile")})
    env = _env(image="")
    env.prepare([task])
    tag = env.image_for(task)
    try:
        assert tag.startswith("ksi-task:")
        created = _docker("image", "inspect", "--format", "{{.Created}}", tag).stdout
        again = _env(image="")
        again.prepare([task])
        assert again.image_for(task) == tag
        assert _docker("image", "inspect", "--format", "{{.Created}}", tag).stdout == created
        (ctx / "marker.txt").write_text("changed\n")
        changed = _env(image="")
        changed.prepare([task])
        new_tag = changed.image_for(task)
        assert new_tag != tag
        workspace = tmp_path / "ws"
        (workspace / "repo").mkdir(parents=True)
        handle = changed.start(AttemptContext(run_id, task, 1, tmp_path, workspace, {}))
        try:
            _, out, _, _ = _sh(handle, "cat /marker.txt", tmp_path)
        finally:
            handle.stop()
        assert out == "changed\n"
        _docker("rmi", "-f", new_tag)
    finally:
        _docker("rmi", "-f", tag)


def test_task_docker_image_wins_over_the_run_image(tmp_path: Path) -> None:
    env = _env(image="ksi-test/does-not-exist:never")
    task = TaskSpec(id="own", metadata={"docker_image": TEST_IMAGE})
    env.prepare([task])
    assert env.image_for(task) == TEST_IMAGE


def test_prepare_explains_missing_and_unavailable_images() -> None:
    with pytest.raises(UserInputError, match=r"no image for task 'lonely'.*--image"):
        _env(image="").prepare([TaskSpec(id="lonely")])
    with pytest.raises(EnvironmentFailure, match=r"localhost:1/ksi-missing:x.*'t9'"):
        _env(image="localhost:1/ksi-missing:x").prepare([TaskSpec(id="t9")])
    df = TaskSpec(id="bad-df", metadata={"dockerfile": "/nonexistent/Dockerfile"})
    with pytest.raises(EnvironmentFailure, match=r"/nonexistent/Dockerfile.*'bad-df'"):
        _env(image="").prepare([df])


def test_missing_docker_cli_is_a_clear_error() -> None:
    env = _env(docker_binary="/nonexistent/docker")
    with pytest.raises(EnvironmentFailure, match=r"'/nonexistent/docker' was not found.*podman"):
        env.prepare([TaskSpec(id="t")])


def test_bad_options_are_rejected_with_the_valid_choices() -> None:
    with pytest.raises(OptionsError, match=r"network 'no net'.*endpoints.*none, bridge, host"):
        _env(network="no net")
    with pytest.raises(OptionsError, match=r"workspace_mount 'relative'"):
        _env(workspace_mount="relative")
    with pytest.raises(OptionsError, match=r"pids_limit must be a positive"):
        _env(pids_limit="0")
    with pytest.raises(OptionsError, match=r"has no option 'imgae'"):
        _env(imgae="x")


def test_docker_binary_defaults_to_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KSI_DOCKER_BINARY", "podman")
    assert _env().docker_binary == "podman"
    assert _env(docker_binary="docker").docker_binary == "docker"


def test_ksi_cleanup_command_removes_a_runs_containers(tmp_path: Path, run_id: str) -> None:
    from ksi.cli import build_app

    _start(_env(), tmp_path, run_id, task_id="left")
    _start(_env(), tmp_path, run_id, task_id="over")
    run_dir = tmp_path / "runs" / "some-dir-name"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_id}))
    runner = CliRunner()
    result = runner.invoke(build_app(), ["cleanup", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "removed 3" in result.output  # two containers and the run's network
    assert _containers(run_id) == [] and _networks(run_id) == []
    result = runner.invoke(build_app(), ["cleanup", str(run_dir)])
    assert "removed 0" in result.output


# -- network=endpoints (the default): the declared endpoints only ------------------------------

#: ``relay METHOD TARGET [MORE]``: one request to the relay the exec got (``$HTTP_PROXY``),
#: with busybox ``nc``; ``MORE`` is sent after the head (a request inside a CONNECT tunnel).
RELAY_SH = r"""
relay() {
  p=${HTTP_PROXY#http://}
  printf '%s %s HTTP/1.1\r\nHost: x\r\n\r\n%b' "$1" "$2" "${3:-}" | nc -w 5 "${p%:*}" "${p##*:}"
  echo "[rc=$?]"
}
"""


def _relay_exec(
    handle: DockerHandle, script: str, tmp_path: Path, endpoints: tuple[Endpoint, ...]
) -> tuple[int | None, str, str]:
    out, err = tmp_path / f"out-{uuid.uuid4().hex}", tmp_path / f"err-{uuid.uuid4().hex}"
    res = handle.exec(
        Invocation(("sh", "-c", RELAY_SH + script), endpoints=endpoints),
        timeout=60,
        stdout_path=out,
        stderr_path=err,
        log_cap_bytes=1_000_000,
    )
    return res.exit_code, _printed(out), _printed(err)


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    """The mock model (the allowed endpoint) and another local server (a disallowed host),
    both on 127.0.0.1 of this machine."""
    pair = (Server("model").start(), Server("other").start())
    yield pair
    for server in pair:
        assert server.httpd is not None
        server.httpd.shutdown()
        server.httpd.server_close()


def test_by_default_the_agent_reaches_its_declared_endpoint_and_nothing_else(
    tmp_path: Path, run_id: str, servers: tuple[Server, Server]
) -> None:
    model, other = servers
    handle = _start(_env(), tmp_path, run_id)
    try:
        script = (
            f"relay GET http://127.0.0.1:{model.port}/plain\n"
            f"relay CONNECT 127.0.0.1:{model.port} 'GET /tunnel HTTP/1.0\\r\\n\\r\\n'\n"
            f"relay GET http://127.0.0.1:{other.port}/plain\n"
            f"relay CONNECT 127.0.0.1:{other.port} 'GET /tunnel HTTP/1.0\\r\\n\\r\\n'\n"
            f"relay GET http://localhost:{other.port}/by-name\n"
            # Straight at the host, past the relay: the gateway and the other server's port.
            f"g=${{HTTP_PROXY#http://}}; nc -w 3 ${{g%:*}} {other.port} </dev/null; "
            'echo "[direct rc=$?]"\n'
        )
        code, out, err = _relay_exec(handle, script, tmp_path, (Endpoint("127.0.0.1", model.port),))
        inspected = json.loads(_docker("inspect", handle.container).stdout)[0]
    finally:
        handle.stop()
    assert code == 0, (out, err)
    assert "served:model:/plain" in out and "served:model:/tunnel" in out, out
    assert model.paths == ["/plain", "/tunnel"]
    assert other.paths == [] and "served:other" not in out
    assert out.count("403 Forbidden") == 3, out
    assert "[direct rc=1]" in out, out
    refused = f"docker: refused connection to 127.0.0.1:{other.port}; the agent declared "
    assert f"{refused}127.0.0.1:{model.port}; use --network bridge to allow all" in err, err
    assert f"docker: refused connection to localhost:{other.port}" in err
    # The container sits on the run's internal network (no route off the machine) only.
    [network] = inspected["NetworkSettings"]["Networks"]
    assert inspected["HostConfig"]["NetworkMode"] == network
    net = json.loads(_docker("network", "inspect", network).stdout)[0]
    assert net["Internal"] is True and net["Labels"][LABEL_RUN] == run_id
    assert net["Options"]["com.docker.network.bridge.enable_icc"] == "false"


def test_a_process_without_endpoints_gets_no_relay_and_a_relay_ends_with_its_exec(
    tmp_path: Path, run_id: str, servers: tuple[Server, Server]
) -> None:
    model, _ = servers
    handle = _start(_env(), tmp_path, run_id, base_env={"HTTPS_PROXY": "http://10.1.2.3:3128"})
    try:
        endpoint = (Endpoint("127.0.0.1", model.port),)
        code, out, err = _relay_exec(
            handle, 'echo "$HTTP_PROXY" > proxy-was; echo "[https=$HTTPS_PROXY]"', tmp_path,
            endpoint,
        )  # fmt: skip
        old = (tmp_path / "t1-1" / "workspace" / "proxy-was").read_text().strip()
        # The grader's kind of process: no endpoints, so no relay; the old one is gone.
        later = f"HTTP_PROXY={old}; relay GET http://127.0.0.1:{model.port}/late\n"
        code2, out2, _ = _relay_exec(handle, 'echo "[env=$HTTP_PROXY]"; ' + later, tmp_path, ())
    finally:
        handle.stop()
    assert code == 0, err
    assert old.startswith("http://") and f"[https={old}]" in out  # the relay wins over the host's
    assert code2 == 0 and "[env=]" in out2, out2
    assert "served:model" not in out2 and model.paths == []


def test_the_relay_answers_its_own_attempt_only_and_attempts_cannot_reach_each_other(
    tmp_path: Path, run_id: str, servers: tuple[Server, Server]
) -> None:
    model, _ = servers
    env = _env()
    first = _start(env, tmp_path, run_id, task_id="first")
    second = _start(env, tmp_path, run_id, task_id="second")
    endpoint = (Endpoint("127.0.0.1", model.port),)
    held: list[tuple[int | None, str, str]] = []
    try:
        # The first attempt's agent holds its relay open and listens on a port of its own.
        hold = 'echo "$HTTP_PROXY" > proxy; nc -l -p 9999 </dev/null & sleep 6; echo held'
        worker = threading.Thread(
            target=lambda: held.append(_relay_exec(first, hold, tmp_path, endpoint))
        )
        worker.start()
        proxy_file = tmp_path / "first-1" / "workspace" / "proxy"
        for _ in range(100):
            if proxy_file.exists() and proxy_file.read_text().strip():
                break
            threading.Event().wait(0.05)
        theirs = proxy_file.read_text().strip()
        first_ip = first.relay.peer
        steal = (
            f"HTTP_PROXY={theirs}; relay GET http://127.0.0.1:{model.port}/stolen\n"
            f'echo hi | nc -w 3 {first_ip} 9999; echo "[peer rc=$?]"\n'
        )
        code, out, err = _relay_exec(second, steal, tmp_path, endpoint)
        worker.join()
    finally:
        first.stop()
        second.stop()
    assert held and held[0][0] == 0 and "held" in held[0][1], held
    assert first.relay.host == second.relay.host and first.relay.peer != second.relay.peer
    assert code == 0, err
    assert "HTTP/1.1" not in out and "served:model" not in out, out  # closed unanswered
    assert "[peer rc=1]" in out, out
    assert model.paths == []


def test_network_bridge_is_the_whole_network_and_warned_about(run_id: str) -> None:
    task = TaskSpec(id="t1", prompt="p")
    with pytest.warns(KsiWarning, match=r"network=bridge: the agents' containers get the whole"):
        _env(network="bridge").prepare([task])
    with warnings.catch_warnings():
        warnings.simplefilter("error", KsiWarning)
        _env().prepare([task])
        _env(network="none").prepare([task])


def test_a_task_that_sets_its_network_gets_it_and_the_run_is_told(
    tmp_path: Path, run_id: str
) -> None:
    """Tasks decide for themselves (runtime.network); ksi run still says the network is open."""
    env = _env()
    opened = TaskSpec(id="opened", prompt="p", runtime=Runtime(network="bridge"))
    with pytest.warns(KsiWarning, match=r"task 'opened' \(its runtime.network\) gets the whole"):
        env.prepare([opened, TaskSpec(id="closed", prompt="p")])
    workspace = tmp_path / "ws"
    (workspace / "repo").mkdir(parents=True)
    handle = env.start(
        AttemptContext(
            run_id=run_id,
            task=opened,
            attempt=1,
            attempt_dir=tmp_path,
            host_workspace=workspace,
            base_env={},
        )
    )
    try:
        mode = _docker("inspect", "--format", "{{.HostConfig.NetworkMode}}", handle.container)
    finally:
        handle.stop()
    assert mode.stdout.strip() == "bridge" and handle.relay is None
    assert _networks(run_id) == []  # no internal network made for it


def test_an_engine_whose_networks_are_not_on_this_machine_is_refused_with_the_fix() -> None:
    from ksi.environments.docker_net import check_local_address

    # TEST-NET-2: no address of this machine; binding to it sends nothing anywhere.
    with pytest.raises(EnvironmentFailure, match=r"not an address of this machine.*--network"):
        check_local_address("198.51.100.1", "network x")

"""The sandbox's network: the agent reaches the endpoints it declares, and nothing else.

Real bubblewrap, real HTTP servers on 127.0.0.1 in this process, real clients
(Python's ``urllib`` / ``http.client``) inside the sandbox.
"""

from __future__ import annotations

import http.server
import os
import shlex
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from docker_support import needs_bwrap, start_sandbox
from run_helpers import journal_lines, ksi, write_tasks

from ksi.environments.sandbox import SandboxEnvironment, SandboxHandle
from ksi.errors import EnvironmentFailure
from ksi.interfaces import Endpoint, Invocation

pytestmark = [pytest.mark.sandbox, needs_bwrap]

#: Fetch each URL; print what came back, or FAILED and why.
FETCH = """
import sys, urllib.request
for url in sys.argv[1:]:
    try:
        print(urllib.request.urlopen(url, timeout=10).read().decode())
    except Exception as exc:
        print("FAILED", url, type(exc).__name__, exc)
"""
#: A CONNECT tunnel through $HTTPS_PROXY to HOST PORT, then a GET.
TUNNEL = """
import http.client, os, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
conn.set_tunnel(sys.argv[1], int(sys.argv[2]))
try:
    conn.request("GET", "/tunnel")
    print(conn.getresponse().read().decode())
except Exception as exc:
    print("FAILED", type(exc).__name__, exc)
"""


@attrs.define
class Server:
    """An HTTP server on 127.0.0.1 answering ``served:<name>:<path>``; it records each path."""

    name: str
    paths: list[str] = attrs.field(factory=list)
    httpd: http.server.ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.httpd is not None
        return int(self.httpd.server_address[1])

    def url(self, host: str = "127.0.0.1", path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def start(self) -> Server:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.paths.append(self.path)
                body = f"served:{server.name}:{self.path}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    pair = (Server("model").start(), Server("other").start())
    yield pair
    for s in pair:
        assert s.httpd is not None
        s.httpd.shutdown()
        s.httpd.server_close()


def _start(tmp_path: Path, **options: str) -> SandboxHandle:
    return start_sandbox(SandboxEnvironment(**options), tmp_path)  # type: ignore[arg-type]


def _python(
    handle: SandboxHandle,
    script: str,
    *args: str,
    endpoints: tuple[Endpoint, ...],
    tmp_path: Path,
    timeout: float = 60,
) -> tuple[str, str]:
    """Run ``script`` with this test's Python in the sandbox; ``(stdout, stderr)``."""
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    res = handle.exec(
        Invocation((sys.executable, "-I", "-c", script, *args), endpoints=endpoints),
        timeout=timeout,
        stdout_path=out,
        stderr_path=err,
        log_cap_bytes=1_000_000,
    )
    assert res.spawn_error is None, res.spawn_error
    # A log exists once its stream printed something: none is an empty output.
    stdout, stderr = (p.read_text() if p.exists() else "" for p in (out, err))
    # Every script prints on its way out: silence means it never got there; say why.
    assert stdout, (
        f"the script printed nothing (exit {res.exit_code}, timed out: {res.timed_out} "
        f"after {res.duration_sec:.1f}s); its stderr:\n{stderr}"
    )
    return stdout, stderr


def test_the_agent_reaches_its_declared_endpoint_and_no_other_port(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    model, other = servers
    handle = _start(tmp_path)
    out, _ = _python(
        handle,
        FETCH,
        model.url(path="/v1/messages"),
        other.url(),
        endpoints=(Endpoint("127.0.0.1", model.port),),
        tmp_path=tmp_path,
    )
    lines = out.splitlines()
    assert lines[0] == "served:model:/v1/messages"  # the base_url unchanged
    assert lines[1].startswith(f"FAILED {other.url()}"), out
    assert other.paths == []


def test_a_process_that_declares_no_endpoint_gets_no_network(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    model, _ = servers
    handle = _start(tmp_path)
    out, _ = _python(
        handle,
        FETCH + "import os; print(os.environ.get('HTTPS_PROXY'))",
        model.url(),
        endpoints=(),
        tmp_path=tmp_path,
    )
    assert out.splitlines()[0].startswith("FAILED"), out
    assert out.splitlines()[1] == "None"
    assert model.paths == []


def test_network_none_blocks_even_the_declared_endpoint(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    model, _ = servers
    handle = _start(tmp_path, network="none")
    out, _ = _python(
        handle,
        FETCH,
        model.url(),
        model.url("localhost"),
        endpoints=(Endpoint("127.0.0.1", model.port), Endpoint("localhost", model.port)),
        tmp_path=tmp_path,
    )
    assert [line.split()[0] for line in out.splitlines()] == ["FAILED", "FAILED"], out
    assert model.paths == []


def test_a_named_endpoint_is_reached_through_the_proxy_by_connect_and_plain_http(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    model, _ = servers
    handle = _start(tmp_path)
    declared = (Endpoint("localhost", model.port),)
    out, _ = _python(
        handle, TUNNEL, "localhost", str(model.port), endpoints=declared, tmp_path=tmp_path
    )
    assert out.strip() == "served:model:/tunnel"
    # No DNS and nothing listening on localhost's port inside: only the proxy gets there.
    out, _ = _python(
        handle, FETCH, model.url("localhost", "/plain?q=1"), endpoints=declared, tmp_path=tmp_path
    )
    assert out.strip() == "served:model:/plain?q=1"
    assert model.paths == ["/tunnel", "/plain?q=1"]


def test_a_refused_connection_is_explained_in_the_agent_log(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    model, other = servers
    handle = _start(tmp_path)
    out, err = _python(
        handle,
        TUNNEL,
        "localhost",
        str(other.port),
        endpoints=(Endpoint("localhost", model.port),),
        tmp_path=tmp_path,
    )
    assert out.startswith("FAILED") and "403" in out, out
    assert (
        f"sandbox: refused connection to localhost:{other.port}; the agent declared "
        f"localhost:{model.port}; use --environment-option network=host to allow all"
    ) in err
    assert other.paths == []


def _relay_traces() -> tuple[list[str], int, list[str]]:
    """The relay's threads, this process's open descriptors, the relay's directories."""
    threads = [t.name for t in threading.enumerate() if t.name == "ksi-sandbox-relay"]
    fds = len(os.listdir("/proc/self/fd"))
    dirs = sorted(p.name for p in Path(tempfile.gettempdir()).glob("ksi-net-*"))
    return threads, fds, dirs


def test_the_relay_ends_with_the_exec_even_one_cut_off_mid_connection(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    model, _ = servers
    handle = _start(tmp_path)
    before = _relay_traces()
    # Opens a connection through the relay, holds it, and never ends: the timeout cuts it off.
    hold = (
        "import socket, sys, time\n"
        f"s = socket.create_connection(('127.0.0.1', {model.port}))\n"
        "s.sendall(b'GET /held HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "print(s.recv(100)[:15].decode(), flush=True)\n"
        "time.sleep(600)\n"
    )
    out, _ = _python(
        handle, hold, endpoints=(Endpoint("127.0.0.1", model.port),), tmp_path=tmp_path, timeout=5
    )
    assert out.startswith("HTTP/1.0 200"), out
    assert model.paths == ["/held"]
    assert _relay_traces() == before


def test_through_ksi_run_the_agent_reaches_its_endpoint_and_the_grader_nothing(
    tmp_path: Path, servers: tuple[Server, Server]
) -> None:
    model, _ = servers
    # The base interpreter, shown by expose= below: the venv's python may live in a /tmp
    # checkout, and a program named inside a shell command is not looked for.
    python = os.path.realpath(sys.executable)
    fetch = f"{python} -I -c {shlex.quote(FETCH)} {model.url(path='/agent')}"
    task = {
        "task_id": "net",
        "prompt": "fetch",
        "files": {"README.md": "x\n"},
        # Graded inside the sandbox too: it sees the agent's fetch, and must not fetch itself.
        "eval": {"command": f'grep -q served:model:/agent got.txt && {fetch} | grep -q "^FAILED"'},
    }
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task])
    run_dir = tmp_path / "run"
    res = ksi(
        "run",
        str(tasks),
        "--agent",
        "command",
        "--agent-option",
        f"cmd={fetch} > repo/got.txt",
        "--agent-option",
        f"endpoints=127.0.0.1:{model.port}",
        "--environment",
        "sandbox",
        # The grader's Python too (the agent's is shown with its relay's interpreter).
        "--environment-option",
        f"expose={sys.base_prefix}",
        "--eval-in",
        "environment",
        "--run-dir",
        str(run_dir),
    )
    [rec] = journal_lines(run_dir)
    assert (rec["status"], rec["score"]) == ("scored", 1.0), (res.stdout, res.stderr, rec)
    assert model.paths == ["/agent"]


def test_a_relay_interpreter_that_cannot_run_inside_is_refused_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(EnvironmentFailure, match=r"KSI's Python \(.*false\) cannot run inside"):
        SandboxEnvironment().prepare([])
    SandboxEnvironment(network="none").prepare([])  # no relay, nothing to check

"""The host half of the sandbox's network relay: the agent reaches its declared endpoints only.

A sandboxed process has its own network namespace holding nothing but
loopback. For an exec whose :class:`~ksi.interfaces.Invocation` declares
endpoints (an agent's model API), :class:`HostRelay` runs in the KSI process
for the length of that exec:

* a private directory (``0700``) holds one Unix socket per route and a copy
  of :mod:`ksi.environments.sandbox_relay`; it is bound read-only into the
  sandbox at :data:`INSIDE_DIR`;
* inside, the agent is started by that relay script under KSI's own base
  interpreter (``-I -S``: stdlib only), which listens on loopback and copies
  each connection to a Unix socket here;
* an endpoint on a loopback address (``127.0.0.1:PORT``, ``[::1]:PORT``) is
  served on the same address and port inside, so ``base_url`` stays as it is;
* every endpoint (a named host such as ``api.anthropic.com:443``: there is no
  DNS inside) is also reachable through an HTTP proxy on
  ``127.0.0.1:`` :data:`PROXY_PORT` (``HTTPS_PROXY``/``HTTP_PROXY``): it
  accepts ``CONNECT host:port`` and plain ``http://`` requests for the
  declared endpoints only, and refuses anything else, with the reason
  written to the agent's log.

Nothing else leaves the sandbox: this side connects to nothing but the
declared endpoints. :meth:`HostRelay.close` ends the relay's thread, every
connection and the directory (the sandbox's half ends with the agent).

The ``docker`` environment uses the same relay with a :class:`TcpFront`
instead: its container sits on an internal docker network (no route out),
and the proxy listens on that network's gateway, a host address the
container can reach, answering the attempt's own container only. There is
no in-container half (an image need not hold a Python), so every endpoint,
a loopback one too, goes through the proxy, and a refusal is kept in
:attr:`HostRelay.refused` for the environment to write to the agent's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import attrs

from ksi.environments import sandbox_relay
from ksi.errors import EnvironmentFailure
from ksi.interfaces import Endpoint, host_port

#: Where the relay's directory appears inside the sandbox (under its private /tmp).
INSIDE_DIR = "/tmp/.ksi-net"
#: The relay script's name in that directory.
SCRIPT = "relay.py"
#: The in-sandbox port of the HTTP proxy (the next free one when an endpoint uses it).
PROXY_PORT = 3128
_PROXY_SOCKET = "proxy.sock"
#: Largest request head the proxy reads before refusing.
_MAX_HEAD = 64 * 1024
_CHUNK = 65536
_START_TIMEOUT = 10.0

_Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Endpoint | None], Awaitable[None]]
_Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


#: Refusals :attr:`HostRelay.refused` keeps (an agent retrying in a loop would fill memory).
MAX_REFUSALS = 50


def refusal(host: str, port: int, declared: Sequence[Endpoint], who: str = "sandbox") -> str:
    """The line the agent's log gets for a connection the environment ``who`` refused."""
    allowed = ", ".join(str(e) for e in declared) or "none"
    allow_all = "--network bridge" if who == "docker" else "--environment-option network=host"
    return (
        f"{who}: refused connection to {host_port(host, port)}; the agent declared {allowed}; "
        f"use {allow_all} to allow all"
    )


@attrs.frozen
class TcpFront:
    """Serve the proxy on TCP at ``host`` (a port of the system's choosing), to ``peer`` only.

    For an agent in a container on an internal docker network: ``host`` is
    the network's gateway (an address of this machine the container can
    reach), ``peer`` the container's address on that network; a connection
    from anywhere else is closed unanswered.
    """

    host: str
    peer: str


class HostRelay:
    """One exec's relay: Unix sockets in a private directory (or a :class:`TcpFront`),
    served by one thread.

    Use as a context manager around the exec (``with HostRelay(endpoints) as relay``);
    :meth:`wrap` turns the agent's argv into the in-sandbox relay's and
    :meth:`env` gives the proxy variables.
    """

    def __init__(
        self, endpoints: Sequence[Endpoint], *, tcp: TcpFront | None = None, who: str = "sandbox"
    ) -> None:
        self.endpoints = tuple(dict.fromkeys(endpoints))
        self.tcp = tcp
        self.who = who
        #: Loopback endpoints served on the same address inside (the sandbox's half only).
        self.direct = () if tcp else tuple(e for e in self.endpoints if e.is_loopback)
        used = {e.port for e in self.direct}
        #: With a :class:`TcpFront`, the port it listens on, known once the relay started.
        self.proxy_port = 0 if tcp else next(p for p in range(PROXY_PORT, 65536) if p not in used)
        #: Why connections were refused or failed, in order (at most :data:`MAX_REFUSALS`).
        self.refused: list[str] = []
        #: The sockets and the in-sandbox script (none with a :class:`TcpFront`).
        self.dir = None if tcp else Path(tempfile.mkdtemp(prefix="ksi-net-"))
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- what the sandbox gets ------------------------------------------
    def wrap(self, interpreter: str, argv: Sequence[str]) -> list[str]:
        """The in-sandbox command: the relay script, which starts ``argv``."""
        pairs = [f"{_listen(e)}={_socket_name(i)}" for i, e in enumerate(self.direct)]
        pairs.append(f"127.0.0.1:{self.proxy_port}={_PROXY_SOCKET}")
        return [interpreter, "-I", "-S", f"{INSIDE_DIR}/{SCRIPT}", INSIDE_DIR, *pairs, "--", *argv]

    def env(self) -> dict[str, str]:
        """The proxy variables (both spellings); loopback endpoints are reached directly.

        With a :class:`TcpFront` nothing is reached directly: ``NO_PROXY`` is
        empty, so a loopback ``base_url`` goes through the proxy too (to this
        machine's loopback, as it means on the host).
        """
        if self.tcp is not None:
            proxy = f"http://{host_port(self.tcp.host, self.proxy_port)}"
            bypass = ""
        else:
            proxy = f"http://127.0.0.1:{self.proxy_port}"
            bypass = ",".join(["127.0.0.1", "::1", *(e.host for e in self.direct)])
        env: dict[str, str] = {}
        for name, value in (("HTTPS_PROXY", proxy), ("HTTP_PROXY", proxy), ("NO_PROXY", bypass)):
            env[name] = env[name.lower()] = value
        env["ALL_PROXY"] = env["all_proxy"] = proxy
        return env

    def bwrap_args(self) -> list[str]:
        assert self.dir is not None, "a TcpFront relay has no in-sandbox half"
        return ["--ro-bind", str(self.dir), INSIDE_DIR]

    # -- lifecycle -------------------------------------------------------
    def __enter__(self) -> HostRelay:
        try:
            if self.dir is not None:
                shutil.copyfile(sandbox_relay.__file__, self.dir / SCRIPT)
            self._thread = threading.Thread(
                target=self._run, name=f"ksi-{self.who}-relay", daemon=True
            )
            self._thread.start()
            if not self._ready.wait(_START_TIMEOUT) or self._error is not None:
                raise EnvironmentFailure(
                    f"{self.who} environment: the network relay did not start: {self._error}"
                )
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End every connection and the thread; remove the directory. Idempotent."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to __enter__, which raises it
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        servers = []
        proxy = self._tracked(self._proxy, None)
        if self.tcp is not None:
            server = await asyncio.start_server(proxy, host=self.tcp.host, port=0)
            self.proxy_port = int(server.sockets[0].getsockname()[1])
            servers.append(server)
        else:
            assert self.dir is not None
            for i, endpoint in enumerate(self.direct):
                direct = self._tracked(self._direct, endpoint)
                path = str(self.dir / _socket_name(i))
                servers.append(await asyncio.start_unix_server(direct, path=path))
            path = str(self.dir / _PROXY_SOCKET)
            servers.append(await asyncio.start_unix_server(proxy, path=path))
        self._ready.set()
        await self._stop.wait()
        for server in servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in servers:
            await server.wait_closed()

    def _tracked(self, handler: _Handler, endpoint: Endpoint | None) -> _Serve:
        """``handler`` as a connection callback whose task :meth:`close` can cancel."""

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            try:
                if self.tcp is not None:
                    peer = writer.get_extra_info("peername")
                    if not peer or peer[0] != self.tcp.peer:
                        return  # not the attempt's container: closed unanswered
                await handler(reader, writer, endpoint)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                pass
            finally:
                writer.close()
                self._tasks.discard(task)

        return serve

    # -- the routes ------------------------------------------------------
    async def _direct(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, endpoint: Endpoint | None
    ) -> None:
        assert endpoint is not None
        upstream = await self._connect(writer, endpoint.host, endpoint.port)
        if upstream is None:
            return
        self._status(writer, None)
        await _splice(reader, writer, *upstream)

    async def _proxy(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _unused: Endpoint | None
    ) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _MAX_HEAD:
            return
        line, _, rest = head.partition(b"\r\n")
        method, target, version = [*line.decode("latin-1").split(" "), "", ""][:3]
        connect = method.upper() == "CONNECT"
        host, port, path = _target(target, connect)
        if host is None or port is None or Endpoint(host, port) not in self.endpoints:
            why = refusal(host or target, port or 0, self.endpoints, self.who)
            self._status(writer, why)
            body = (why + "\n").encode()
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            return
        upstream = await self._connect(writer, host, port)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        self._status(writer, None)
        if connect:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            # A plain http:// request through the proxy: send it in origin form, and close
            # after the response (a kept-alive connection could name another host next).
            headers = [
                h
                for h in rest.split(b"\r\n")
                if h and not h.lower().startswith((b"connection:", b"proxy-"))
            ]
            first = f"{method} {path} {version}".encode("latin-1")
            up_writer.write(b"\r\n".join([first, *headers, b"Connection: close", b"", b""]))
        await _splice(reader, writer, up_reader, up_writer)

    async def _connect(
        self, writer: asyncio.StreamWriter, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            return await asyncio.open_connection(host, port)
        except OSError as exc:
            target = host_port(host, port)
            why = f"{self.who}: cannot connect to {target} (declared by the agent): {exc}"
            self._status(writer, why)
            writer.write(
                b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            )
            await writer.drain()
            return None

    def _status(self, writer: asyncio.StreamWriter, why: str | None) -> None:
        """Tell the in-sandbox half ``OK`` or ``NO <why>`` (it writes that to the agent's
        log); with a :class:`TcpFront` there is no such half, so a refusal is kept in
        :attr:`refused` instead."""
        if self.tcp is None:
            writer.write(b"OK\n" if why is None else b"NO " + why.encode() + b"\n")
        elif why is not None and len(self.refused) < MAX_REFUSALS:
            self.refused.append(why)


def _socket_name(index: int) -> str:
    return f"ep{index}.sock"


def _listen(endpoint: Endpoint) -> str:
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{host}:{endpoint.port}"


def _target(target: str, connect: bool) -> tuple[str | None, int | None, str]:
    """``(host, port, origin-form path)`` of a proxy request's target; ``None`` when unreadable."""
    try:
        if connect:
            parts = urlsplit("//" + target)
            return parts.hostname, parts.port, ""
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            return None, None, ""
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return parts.hostname, parts.port or 80, path
    except ValueError:
        return None, None, ""


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        pass


async def _splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both sides are done; close the upstream connection."""
    try:
        await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
    finally:
        up_writer.close()

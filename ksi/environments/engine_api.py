"""A few Docker Engine API calls over the daemon's unix socket, for the per-attempt hot path.

Why: each ``docker`` CLI invocation costs ~15-20 ms of process start-up
before it reaches the daemon. Starting and removing an attempt's container
are two plain JSON requests, so making them directly (stdlib ``http.client``,
no SDK) takes two CLI start-ups off every attempt. Everything else (exec,
builds, pulls, cp) stays on the CLI, which also remains the whole path for
podman and remote engines.

It is used only when it provably talks to the same daemon as the CLI: the
daemon ID from ``GET /info`` must equal ``docker info --format {{.ID}}``
(a docker context or ``DOCKER_HOST`` pointing elsewhere disables it).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ksi.environments.images import docker
from ksi.errors import EnvironmentFailure

API_VERSION = "v1.41"  # Docker 20.10; newer daemons accept it, older ones are rare.
DEFAULT_SOCKET = "/var/run/docker.sock"


class EngineAPIError(EnvironmentFailure):
    """The daemon answered with an error (``status`` is the HTTP status)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class EngineAPI:
    """Requests to one daemon socket (a new connection per request: thread-safe)."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 120
    ) -> Any:
        conn = _UnixConnection(self.socket_path, timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, f"/{API_VERSION}{path}", body=data, headers=headers)
            res = conn.getresponse()
            raw = res.read()
        finally:
            conn.close()
        payload: Any = None
        if raw:
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = {"message": raw.decode(errors="replace")}
        if res.status >= 400:
            message = payload.get("message", "") if isinstance(payload, dict) else str(payload)
            raise EngineAPIError(res.status, message or f"HTTP {res.status}")
        return payload

    def run_detached(self, name: str, body: dict[str, Any]) -> None:
        """``docker run -d --name NAME``: create, then start (removed again if start fails)."""
        self.request("POST", f"/containers/create?name={quote(name)}", body)
        try:
            self.request("POST", f"/containers/{quote(name)}/start")
        except BaseException:
            self.remove(name)
            raise

    def stop_now(self, name: str) -> bool:
        """``docker stop --time 0 NAME``: returns once the container stopped; False when absent."""
        try:
            self.request("POST", f"/containers/{quote(name)}/stop?t=0", timeout=120)
        except EngineAPIError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def remove(self, name: str) -> bool:
        """``docker rm -f NAME``; False when there was no such container."""
        try:
            self.request("DELETE", f"/containers/{quote(name)}?force=1", timeout=120)
        except EngineAPIError as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _socket_path() -> str | None:
    host = os.environ.get("DOCKER_HOST", "").strip()
    if host:
        return host.removeprefix("unix://") if host.startswith("unix://") else None
    return DEFAULT_SOCKET


def engine_api_for(binary: str) -> EngineAPI | None:
    """An API client for the daemon ``binary`` talks to, or None (use the CLI for everything)."""
    if Path(binary).name != "docker" or os.environ.get("KSI_DOCKER_API", "1") == "0":
        return None
    path = _socket_path()
    if path is None or not Path(path).exists():
        return None
    api = EngineAPI(path)
    try:
        info = api.request("GET", "/info", timeout=10)
    except (OSError, EngineAPIError, http.client.HTTPException):
        return None
    cli = docker(binary, "info", "--format", "{{.ID}}", timeout=30)
    same = cli.returncode == 0 and isinstance(info, dict) and cli.stdout.strip() == info.get("ID")
    return api if same else None

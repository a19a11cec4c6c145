"""One typed declaration of a KSI container, from which both ways of starting it are derived.

The ``docker`` environment starts an attempt's container either with the
``docker run`` CLI (any docker-compatible engine: podman, a remote daemon) or
with one Engine API request (Docker's own socket, two CLI start-ups fewer per
attempt; see :mod:`ksi.environments.engine_api`). Both must start the very
same container: the hardening (capabilities dropped, no privilege gain,
bounded pids, an init) is a security property, so it is declared here once,
as fields of :class:`ContainerSpec`, and :meth:`ContainerSpec.cli_args` and
:meth:`ContainerSpec.api_body` only translate it. A test starts one spec both
ways and compares the engine's ``docker inspect`` of the two.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

#: ``docker run``'s ``--security-opt`` every KSI container gets: setuid binaries gain nothing.
NO_NEW_PRIVILEGES = "no-new-privileges"
#: Characters a docker container or network name may not hold (each run becomes one ``-``).
NAME_BAD = re.compile(r"[^a-zA-Z0-9_.-]+")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


@attrs.frozen
class BindMount:
    """A host directory shown at ``target`` in the container (nothing else of the host is)."""

    source: str
    target: str


@attrs.frozen
class ContainerSpec:
    """Everything a container is started with; the defaults are KSI's hardening.

    Environment variables are not part of it: each ``docker exec`` passes its
    invocation's own, so a secret never sits in the container's config.
    """

    name: str
    image: str
    #: ``--user`` value; None runs as the image's ``USER``.
    user: str | None
    mounts: tuple[BindMount, ...]
    workdir: str
    #: ``none``, ``bridge``, ``host`` or a docker network's name.
    network: str
    labels: Mapping[str, str] = attrs.field(factory=dict)
    #: The long-lived process each exec joins: ``sleep infinity``.
    entrypoint: str = "sleep"
    cmd: tuple[str, ...] = ("infinity",)
    #: Capabilities dropped: every one, unless a task asks for the engine's default set.
    cap_drop: tuple[str, ...] = ("ALL",)
    security_opt: tuple[str, ...] = (NO_NEW_PRIVILEGES,)
    pids_limit: int = 2048
    #: A tiny init as PID 1 reaps orphaned processes.
    init: bool = True
    cpus: float | None = None
    #: A docker memory size (``4g``, ``512m``); unlimited when None.
    memory: str | None = None
    #: User namespace mode (podman's ``keep-id``); None: the engine's default.
    userns: str | None = None

    def cli_args(self) -> list[str]:
        """``docker run -d`` arguments (after the binary) that start this container."""
        args = ["run", "-d", "--name", self.name]
        for key, value in self.labels.items():
            args += ["--label", f"{key}={value}"]
        for cap in self.cap_drop:
            args += ["--cap-drop", cap]
        for opt in self.security_opt:
            args += ["--security-opt", opt]
        args += ["--pids-limit", str(self.pids_limit), "--network", self.network]
        # Said either way, as the API body does: a daemon's own default (dockerd's "init")
        # must not decide it on one path only.
        args.append("--init" if self.init else "--init=false")
        if self.cpus is not None:
            args += ["--cpus", str(self.cpus)]
        if self.memory:
            args += ["--memory", self.memory]
        if self.user is not None:
            args += ["--user", self.user]
        if self.userns is not None:
            args.append(f"--userns={self.userns}")
        for mount in self.mounts:
            args += ["--mount", f"type=bind,source={mount.source},target={mount.target}"]
        args += ["-w", self.workdir, "--entrypoint", self.entrypoint, self.image, *self.cmd]
        return args

    def api_body(self) -> dict[str, Any] | None:
        """The Engine API ``POST /containers/create`` body; None when only the CLI can say it.

        (A memory size this does not parse is left to the CLI, which explains a bad one.)
        """
        mounts = [{"Type": "bind", "Source": m.source, "Target": m.target} for m in self.mounts]
        host: dict[str, Any] = {
            "SecurityOpt": list(self.security_opt),
            "PidsLimit": self.pids_limit,
            "NetworkMode": self.network,
            "Init": self.init,
            "Mounts": mounts,
        }
        if self.cap_drop:
            host["CapDrop"] = list(self.cap_drop)
        if self.cpus is not None:
            host["NanoCpus"] = round(self.cpus * 1e9)
        if self.memory:
            size = memory_bytes(self.memory)
            if size is None:
                return None
            host["Memory"] = size
        if self.userns is not None:
            host["UsernsMode"] = self.userns
        body: dict[str, Any] = {
            "Image": self.image,
            "Entrypoint": [self.entrypoint],
            "Cmd": list(self.cmd),
            "WorkingDir": self.workdir,
            "Labels": dict(self.labels),
            "HostConfig": host,
        }
        if self.user is not None:
            body["User"] = self.user
        return body


def user_fields(user: str, binary: str) -> tuple[str | None, str | None]:
    """``(user, userns)`` of a spec for the ``user`` option: host, image, or a ``--user`` value."""
    if user == "image":
        return None, None
    if user != "host":
        return user, None
    if "podman" in Path(binary).name and os.getuid() != 0:
        # Rootless podman maps the host user to root in the container; keep-id maps it to
        # the same uid instead, so files in the workspace stay the user's.
        return f"{os.getuid()}:{os.getgid()}", "keep-id"
    return f"{os.getuid()}:{os.getgid()}", None


def memory_bytes(value: str) -> int | None:
    """``512m`` / ``4g`` / ``1073741824`` as bytes; None when the CLI should judge it."""
    match = _SIZE.match(value)
    if match is None:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])

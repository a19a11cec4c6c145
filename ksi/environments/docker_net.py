"""A run's internal docker network, where the ``docker`` environment's agents reach only their
declared endpoints (``network=endpoints``, the default).

Why this shape, given what a container can run: an image need not hold a
Python (KSI's test images are a bare busybox root plus the agent CLIs), so
the sandbox's in-process relay half (:mod:`ksi.environments.sandbox_relay`)
cannot run inside. Instead:

* each run gets one ``docker network create --internal`` network: the engine
  gives its containers no route off the machine (no internet, no LAN, no
  cloud metadata address), and ``enable_icc=false`` keeps the run's
  containers from reaching each other;
* the bridge of that network has a gateway address on this machine, which
  the containers can reach; for each agent process that declares endpoints,
  KSI's own :class:`~ksi.environments.sandbox_net.HostRelay` (the sandbox's
  allowlisting proxy) listens there, on a port of its own, answers the
  attempt's container only, and connects to the declared endpoints only.
  The agent gets it as ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``.

What this cannot stop: the gateway is an address of the host, so a host
service listening on every address (``0.0.0.0``) answers the container, as
it answers any container; a service bound to ``127.0.0.1`` does not. The
relay must listen on an address of *this* machine, so a remote engine, a
rootless one or Docker Desktop (whose networks live in a VM) cannot be used
this way: :func:`check_engine` says so before a run starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from ksi.environments.container import NAME_BAD
from ksi.environments.images import docker, exit_detail
from ksi.errors import EnvironmentFailure

#: The ``network`` option value that keeps an agent to its declared endpoints.
ENDPOINTS = "endpoints"
#: ``docker network create`` options: no route out; the run's containers cannot reach each other.
_CREATE_OPTIONS = ("--internal", "-o", "com.docker.network.bridge.enable_icc=false")
#: The lock file (in the temporary directory) serializing the making of networks.
_LOCK_NAME = "ksi-docker-networks.lock"
#: ``docker network rm`` errors that are not failures of a cleanup.
_LEFT_ALONE = ("has active endpoints", "not found", "no such network", "exit status")
_FIX = "use --network bridge (the whole network) or --network none (no network at all)"


@attrs.frozen
class RunNetwork:
    """A run's internal network and the host address on it where the relay listens."""

    name: str
    gateway: str


def network_name(run_id: str) -> str:
    """The run's network: readable, valid and unique (``ksi-net-<run>-<hash>``)."""
    digest = hashlib.sha1(run_id.encode()).hexdigest()[:8]
    slug = NAME_BAD.sub("-", run_id)[:60].strip("-.") or "x"
    return f"ksi-net-{slug}-{digest}"


def ensure_network(binary: str, run_id: str, labels: dict[str, str]) -> RunNetwork:
    """The run's internal network, created unless it exists (a resumed run, another worker)."""
    name = network_name(run_id)
    flags = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
    with _creation_lock():
        found = docker(binary, "network", "inspect", name, timeout=60)
        if found.returncode != 0:
            res = docker(binary, "network", "create", *_CREATE_OPTIONS, *flags, name, timeout=120)
            if res.returncode != 0:
                raise EnvironmentFailure(
                    f"docker environment: creating the internal network {name} failed: "
                    f"{exit_detail(res)}; {_FIX}"
                )
            found = docker(binary, "network", "inspect", name, timeout=60)
    network = RunNetwork(name, _gateway(found, name))
    check_local_address(network.gateway, f"network {name}")
    return network


@contextlib.contextmanager
def _creation_lock() -> Iterator[None]:
    """Held while a run's network is looked for and made, by every KSI process on this machine.

    The worker processes of one run start attempts at once, and docker
    checks a new network's name only on a best-effort basis: two ``network
    create`` calls racing make two networks of one name, which no later
    command can tell apart. (Without a usable lock file, no lock.)
    """
    try:
        fd = os.open(Path(tempfile.gettempdir()) / _LOCK_NAME, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _gateway(inspected: subprocess.CompletedProcess[str], name: str) -> str:
    """The gateway address in a docker (``IPAM.Config``) or podman (``subnets``) network's
    ``network inspect``; IPv4 first, as the container address the relay answers is IPv4."""
    try:
        found = json.loads(inspected.stdout) if inspected.returncode == 0 else None
    except ValueError:
        found = None
    info: Any = found[0] if isinstance(found, list) and found else found
    gateways: list[Any] = []
    if isinstance(info, dict):
        ipam = info.get("IPAM") or {}
        gateways += [c.get("Gateway") for c in ipam.get("Config") or [] if isinstance(c, dict)]
        gateways += [s.get("gateway") for s in info.get("subnets") or [] if isinstance(s, dict)]
    usable = sorted((g for g in gateways if isinstance(g, str) and g), key=lambda g: ":" in g)
    if usable:
        return usable[0]
    why = exit_detail(inspected) if inspected.returncode else "none in its IPAM"
    raise EnvironmentFailure(
        f"docker environment: network {name} has no gateway address, so the agent's relay has "
        f"nowhere to listen ({why}); {_FIX}"
    )


def check_local_address(address: str, what: str) -> None:
    """Fail unless ``address`` (a docker network's gateway) is an address of this machine."""
    import socket  # start-up: every run imports this module (the docker plugin); few probe

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError as exc:
        raise EnvironmentFailure(
            f"docker environment: the gateway of {what} ({address}) is not an address of this "
            f"machine ({exc.strerror or exc}): the engine's networks live elsewhere (a remote "
            "engine, rootless docker, Docker Desktop's VM), so KSI's relay cannot listen where "
            f"an agent's container reaches it and network=endpoints (the default) cannot work; "
            f"{_FIX}"
        ) from None


def check_engine(binary: str, label: str) -> None:
    """Before a run: make (and remove) a throwaway network as a run's is made, so an engine
    that cannot make one, or whose networks are not on this machine, stops the run before
    its first attempt rather than failing every attempt. ``label`` is the run label, so
    ``ksi cleanup --all`` finds a probe network a crash left."""
    probe = f"ksi-probe-{uuid.uuid4().hex[:12]}"
    try:
        ensure_network(binary, probe, {label: probe})
    finally:
        remove_networks(binary, f"{label}={probe}")


def container_address(inspected: Any, network: str) -> str | None:
    """The container's address on ``network``, from its ``docker inspect`` object."""
    settings = inspected.get("NetworkSettings") if isinstance(inspected, dict) else None
    networks = settings.get("Networks") if isinstance(settings, dict) else None
    entry = networks.get(network) if isinstance(networks, dict) else None
    address = entry.get("IPAddress") if isinstance(entry, dict) else None
    return address if isinstance(address, str) and address else None


def remove_networks(binary: str, selector: str) -> int:
    """Remove the KSI networks matching the label ``selector``; count those removed.

    One still in use (a run going on, with ``--all``) or already gone is left
    alone: it goes with its own run's cleanup.
    """
    res = docker(binary, "network", "ls", "-q", "--filter", f"label={selector}", timeout=60)
    ids = res.stdout.split() if res.returncode == 0 else []
    if not ids:
        return 0
    removed = docker(binary, "network", "rm", *ids, timeout=120)
    problems = [
        line
        for line in removed.stderr.strip().splitlines()
        if line and not any(ok in line.lower() for ok in _LEFT_ALONE)
    ]
    if removed.returncode != 0 and problems:
        raise EnvironmentFailure(
            f"docker environment: removing {len(ids)} network(s) failed: {problems[-1]}"
        )
    return len(removed.stdout.split())

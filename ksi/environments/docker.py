"""The ``docker`` environment: each attempt's agent runs in its own hardened container.

One long-lived container per attempt (``docker run -d ... sleep infinity``),
each agent process started in it with ``docker exec``, the container removed
(``docker rm -f``) when the attempt ends. Why this shape:

* the attempt workspace is bind-mounted at ``workspace_mount`` (default
  ``/workspace``, the task files in ``/workspace/repo``), so the host keeps
  the workspace when the container is gone and grading happens on the host,
  out of the agent's reach;
* processes run as the host user's uid:gid, so every file the agent writes
  is owned by, and deletable by, the user who started the run;
* every container carries ``ksi.run`` and ``ksi.attempt`` labels, so the
  leftovers of a killed run are found and removed by label
  (:meth:`DockerEnvironment.cleanup`, ``ksi cleanup``) even when no KSI
  process survives to remember them.

Images are built, checked and cleaned up with the Docker CLI (through
``subprocess``), so any docker-compatible CLI works: ``docker_binary=podman`` or
``KSI_DOCKER_BINARY=podman``. The per-attempt hot path (create, start, stop,
remove a container) talks to the daemon's Engine API over its Unix socket
instead (:mod:`ksi.environments.engine_api`: one HTTP request instead of a CLI
process each), but only when that socket belongs to the daemon the CLI itself
uses; otherwise, or with ``use_engine_api=false`` / ``KSI_DOCKER_API=0``, the
CLI does everything. ``exec`` always goes through the CLI. Both ways of starting
a container are derived from one :class:`~ksi.environments.container.ContainerSpec`
(:meth:`DockerEnvironment.container_spec`), where the hardening is declared, and
sent one way, by :func:`~ksi.environments.docker_start.start_container`.

The network, by default (``network=endpoints``), is the run's internal docker
network with no route out, and each agent process reaches the endpoints it
declares (its model API) through KSI's relay on that network's gateway, the
same allowlisting proxy the ``sandbox`` uses (:mod:`ksi.environments.docker_net`).
``bridge``, ``host`` or a named network give the container that whole network,
which ``ksi run`` warns about; ``none`` gives it nothing.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import shutil
import subprocess
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ksi.environments.container import NAME_BAD, BindMount, ContainerSpec, user_fields
from ksi.environments.docker_net import (
    ENDPOINTS,
    RunNetwork,
    check_engine,
    ensure_network,
    remove_networks,
)
from ksi.environments.docker_start import relay_front, start_container
from ksi.environments.images import (
    build_task_image,
    check_daemon,
    client_env,
    default_docker_binary,
    docker,
    ensure_image,
    exit_detail,
    resolve_binary,
    task_image_source,
)
from ksi.errors import EnvironmentFailure, KsiWarning, UserInputError
from ksi.fstree import copy_tree
from ksi.hookspecs import hookimpl
from ksi.interfaces import AttemptContext, Endpoint, EnvironmentBase, ExecResult, Invocation
from ksi.models import TaskSpec
from ksi.proc import TAG_VAR, new_tag, read_tail, run_process
from ksi.task_parts import CAPABILITY_SETS

if TYPE_CHECKING:
    # Imported where used: http.client alone costs more than the rest of `ksi run --help`.
    from ksi.environments.engine_api import EngineAPI

#: Label naming the run a container belongs to (``ksi cleanup`` selects on it).
LABEL_RUN = "ksi.run"
#: Label naming the attempt: ``<task id>/<attempt number>``.
LABEL_ATTEMPT = "ksi.attempt"
#: ``attempt`` for an agent's container, ``eval`` for a fresh grading container.
LABEL_ROLE = "ksi.role"
NETWORKS = (ENDPOINTS, "none", "bridge", "host")
#: Host variables naming host paths that do not exist in the container (the scrub passes them
#: for ``local``); left out so the image's own values and defaults apply.
HOST_ONLY_VARS = frozenset(
    {
        "PATH",
        "SHELL",
        "TMPDIR",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
    }
)
#: Where HOME points inside the container, relative to the workspace (writable, starts empty).
HOME_SUBDIR = ".ksi/home"

# Runs the invocation, then kills whatever it left running (found by the KSI_PROC_TAG in its
# environment), so that "exec returns" means "nothing it started is still alive" without an
# extra `docker exec` round trip per invocation.
_SWEEP = r"""unset KSI_PROC_TAG
n=0
[ -n "$t" ] && for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = "$$" ] && continue
  if tr '\000' '\n' < "$d/environ" 2>/dev/null | grep -qx "KSI_PROC_TAG=$t"; then
    kill -9 "$p" 2>/dev/null && n=$((n+1))
  fi
done
"""
#: First line of stderr when the program of an exec is not in the container (exit 127).
NOT_FOUND_MARK = "ksi-exec: cannot run "
_CHECK = (
    'command -v "$1" >/dev/null 2>&1 || '
    '{ echo "' + NOT_FOUND_MARK + '$1: not found in the container" >&2; exit 127; }\n'
)
EXEC_WRAPPER = _CHECK + '"$@"\nrc=$?\nt=$KSI_PROC_TAG\n' + _SWEEP + "exit $rc\n"
#: What the engine prints when it cannot start the exec at all (no shell, no working directory).
_ENGINE_EXEC_FAILURES = ("OCI runtime exec failed", "executable file not found", "chdir to cwd")
SWEEP_SCRIPT = "t=$1\n" + _SWEEP + 'echo "$n"\n'

_NETWORK_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")


def container_name(run_id: str, task_id: str, attempt: int, role: str = "") -> str:
    """A readable, valid, unique container name for an attempt (``ksi-<run>-<task>-<n>-<hash>``)."""
    # start-up: listing components imports this module; this only when used
    import hashlib

    digest = hashlib.sha1(f"{run_id}\0{task_id}\0{attempt}\0{role}".encode()).hexdigest()[:8]
    slug = NAME_BAD.sub("-", f"{run_id}-{task_id}")[:80].strip("-.") or "x"
    prefix = f"ksi-{role}-" if role else "ksi-"
    return f"{prefix}{slug}-{attempt}-{digest}"


def container_env(
    base_env: Mapping[str, str], extra: Mapping[str, str], workspace_path: str
) -> dict[str, str]:
    """The agent's environment inside the container: the scrubbed base env plus the invocation's.

    Host-specific variables (``PATH``, ``TMPDIR``...) are left out so the
    image's own values apply, and ``HOME`` points at an empty writable
    directory in the workspace; an invocation may still set any of them.
    """
    env = {k: v for k, v in base_env.items() if k not in HOST_ONLY_VARS}
    env["HOME"] = posixpath.join(workspace_path, HOME_SUBDIR)
    env.update(extra)
    return env


@attrs.frozen
class ContainerSettings:
    """The resources and identity of one task's containers: run options, task runtime wins."""

    cpus: float | None
    memory: str | None
    user: str
    capabilities: str
    network: str = ENDPOINTS


def container_settings(
    task: TaskSpec,
    *,
    cpus: float | None,
    memory: str | None,
    user: str,
    capabilities: str,
    network: str = ENDPOINTS,
) -> ContainerSettings:
    """The settings for ``task``: the ``cpus``, ``memory_mb``, ``user``, ``capabilities``
    and ``network`` of its :class:`~ksi.task_parts.Runtime` override the run's options
    when set (not None).

    Task sources set these for tasks that need them (Harbor's ``[environment]``
    resources; its tasks run as the image's user), so such a run needs no
    extra options. The values were checked when the task was built; only the
    network name, which is docker's business, is checked here.
    """
    rt = task.runtime
    if rt.network is not None:
        try:
            _check_network(None, None, rt.network)
        except ValueError as exc:
            raise UserInputError(f"task {task.id!r}: runtime.network: {exc}") from None
    return ContainerSettings(
        cpus=rt.cpus if rt.cpus is not None else cpus,
        memory=f"{rt.memory_mb}m" if rt.memory_mb is not None else memory,
        user=rt.user if rt.user is not None else user,
        capabilities=rt.capabilities if rt.capabilities is not None else capabilities,
        network=rt.network if rt.network is not None else network,
    )


def is_loopback_url(url: str) -> bool:
    """Whether ``url``'s host is a loopback name or address (``localhost``, 127.x, ``::1``)."""
    try:
        endpoint = Endpoint.from_url(url)
    except ValueError:
        return False
    host = endpoint.host
    return host == "localhost" or host.endswith(".localhost") or endpoint.is_loopback


def _check_network(_inst: Any, _attr: Any, value: str) -> None:
    if value not in NETWORKS and not _NETWORK_NAME.match(value):
        raise ValueError(
            f"network {value!r} is not valid; use endpoints (the default: only the endpoints "
            "the agent declares), none, bridge, host, or the name of a docker network"
        )


def open_network_warning(network: str, task_ids: Sequence[str] = ()) -> str:
    """What a run is told when an agent's container gets a whole network, not its endpoints."""
    reach = {
        "bridge": "the internet, your LAN and every address docker's bridge reaches",
        "host": "the host's own network, services on its loopback included",
    }.get(network, f"whatever docker network {network!r} reaches")
    who = "the agents' containers get"
    if task_ids:
        shown = ", ".join(repr(t) for t in task_ids[:5])
        more = f" and {len(task_ids) - 5} more" if len(task_ids) > 5 else ""
        who = f"task {shown}{more} (its runtime.network) gets"
    return (
        f"docker environment: network={network}: {who} the whole network ({reach}), not "
        "only the endpoints each agent declares; KSI does not limit where the agent connects. "
        "The default, network=endpoints, allows its model API and nothing else"
    )


def _check_mount(_inst: Any, _attr: Any, value: str) -> None:
    if not value.startswith("/") or posixpath.normpath(value) == "/":
        raise ValueError(
            f"workspace_mount {value!r} must be an absolute path other than / (e.g. /workspace)"
        )


def _check_pids(_inst: Any, _attr: Any, value: int) -> None:
    if value < 1:
        raise ValueError(f"pids_limit must be a positive number of processes, got {value}")


def _check_user(_inst: Any, _attr: Any, value: str) -> None:
    if not value.strip():
        raise ValueError("user must be host, image, or UID[:GID] / a user name in the image")


def _check_capabilities(_inst: Any, _attr: Any, value: str) -> None:
    if value not in CAPABILITY_SETS:
        raise ValueError(
            f"capabilities {value!r} is not valid; use none (drop all, the default) or default "
            "(the engine's default set, for tasks that install packages as root)"
        )


def _env_flags(env: Mapping[str, str], tag: str) -> list[str]:
    """``-e`` flags that keep secret values out of the command line (``ps`` shows argv).

    ``-e KEY`` makes the client copy the value from its own environment; only
    variables the client needs for itself (HOME, PATH...) go as ``KEY=VALUE``.
    """
    client = client_env()
    flags: list[str] = []
    for key, value in env.items():
        flags += ["-e", f"{key}={value}" if key in client else key]
    flags += ["-e", f"{TAG_VAR}={tag}"]
    return flags


def docker_bytes(binary: str, *args: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    """Run a docker CLI command with ``data`` on its stdin (bytes in, bytes out)."""
    try:
        return subprocess.run(
            [binary, *args], input=data, capture_output=True, env=client_env(), timeout=600
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentFailure(f"docker environment: `{binary} {args[0]}` failed: {exc}") from exc


def _client_env_for(env: Mapping[str, str]) -> dict[str, str]:
    client = client_env()
    return {**client, **{k: v for k, v in env.items() if k not in client}}


@attrs.define
class DockerHandle:
    """One attempt's running container."""

    binary: str
    container: str
    host_workspace: Path
    workspace_path: str
    base_env: Mapping[str, str]
    #: uid and gid the container's processes run as (files copied in get them).
    owner: tuple[int, int] = (0, 0)
    #: ``chown`` the workspace back to KSI's user before removing the container.
    give_back_workspace: bool = False
    #: Removes the container without a CLI start-up, when the daemon's socket is usable.
    #: The :class:`~ksi.environments.engine_api.EngineAPI` in use, if any. Typed ``Any``
    #: because attrs resolves field types at runtime and engine_api is imported where used.
    api: Any = None
    #: Where an exec's relay listens and whom it answers (``network=endpoints``), else None;
    #: a :class:`~ksi.environments.sandbox_net.TcpFront` (``Any`` as ``api``).
    relay: Any = None
    _stopped: bool = False
    _halted: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def exec(
        self,
        invocation: Invocation,
        *,
        timeout: float | None,
        stdout_path: Path,
        stderr_path: Path,
        log_cap_bytes: int,
    ) -> ExecResult:
        if self.relay is None or not invocation.endpoints:
            return self._exec(invocation, {}, timeout, stdout_path, stderr_path, log_cap_bytes)
        # start-up: the relay's asyncio costs `ksi run --help` ~20 ms.
        from ksi.environments.sandbox_net import HostRelay

        with HostRelay(invocation.endpoints, tcp=self.relay, who="docker") as relay:
            res = self._exec(
                invocation, relay.env(), timeout, stdout_path, stderr_path, log_cap_bytes
            )
        if relay.refused:  # the agent's log says why a connection failed, as the sandbox's does
            with open(stderr_path, "a", encoding="utf-8") as log:
                log.write("".join(f"{why}\n" for why in relay.refused))
        return res

    def _exec(
        self,
        invocation: Invocation,
        proxy_env: Mapping[str, str],
        timeout: float | None,
        stdout_path: Path,
        stderr_path: Path,
        log_cap_bytes: int,
    ) -> ExecResult:
        tag = new_tag()
        env = container_env(self.base_env, invocation.env, self.workspace_path)
        env.update(proxy_env)  # the relay is the only way out: it wins over any proxy given
        cwd = posixpath.normpath(posixpath.join(self.workspace_path, invocation.cwd))
        argv = [self.binary, "exec"]
        if invocation.stdin is not None:
            argv.append("-i")
        argv += ["-w", cwd, *_env_flags(env, tag), self.container]
        argv += ["sh", "-c", EXEC_WRAPPER, "ksi-exec", *invocation.argv]
        res = run_process(
            argv,
            cwd=self.host_workspace,
            env=_client_env_for(env),
            timeout=timeout,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            stdin=invocation.stdin,
            log_cap_bytes=log_cap_bytes,
            tag=tag,
        )
        timed_out = res.timed_out
        stragglers = res.stragglers_killed
        if timed_out:
            # Killing the docker client does not kill what it started in the container.
            stragglers += self.kill_tagged(tag)
        spawn_error = res.spawn_error
        exit_code = None if timed_out else res.exit_code
        if spawn_error is None and exit_code in (126, 127):
            spawn_error = _exec_start_failure(stderr_path)
            if spawn_error is not None:
                exit_code = None
        return attrs.evolve(
            res, exit_code=exit_code, spawn_error=spawn_error, stragglers_killed=stragglers
        )

    def kill_tagged(self, tag: str) -> int:
        """SIGKILL every process in the container started by the exec carrying ``tag``."""
        res = docker(
            self.binary,
            "exec",
            self.container,
            "sh",
            "-c",
            SWEEP_SCRIPT,
            "ksi-sweep",
            tag,
            timeout=60,
        )
        try:
            return int(res.stdout.strip() or 0) if res.returncode == 0 else 0
        except ValueError:
            return 0

    def _host_path(self, env_path: str) -> Path | None:
        """The host path of a container path inside the workspace mount, else None."""
        norm = posixpath.normpath(posixpath.join(self.workspace_path, env_path))
        if norm == self.workspace_path:
            return self.host_workspace
        if norm.startswith(self.workspace_path.rstrip("/") + "/"):
            return self.host_workspace / posixpath.relpath(norm, self.workspace_path)
        return None

    def copy_in(self, host_src: Path, env_dest: str) -> None:
        host_dest = self._host_path(env_dest)
        if host_dest is not None:  # in the bind mount: copy on the host, keeping ownership
            _copy_host(host_src.resolve(), host_dest)
            return
        dest = posixpath.normpath(posixpath.join(self.workspace_path, env_dest))
        # A tar stream unpacked by the container's own user, so the files belong to the uid the
        # agent runs as (`docker cp` makes them root's, and `cp -a` needs getent in the image).
        # start-up: listing components imports this module; this only when used
        import tarfile

        buf = io.BytesIO()
        uid, gid = self.owner

        def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
            return info

        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(host_src, arcname=posixpath.basename(dest), filter=owned)
        res = docker_bytes(
            self.binary,
            "exec",
            "-i",
            self.container,
            "sh",
            "-c",
            'mkdir -p "$1" && tar -xf - -C "$1"',
            "ksi-copy-in",
            posixpath.dirname(dest),
            data=buf.getvalue(),
        )
        if res.returncode != 0:
            raise EnvironmentFailure(
                f"docker environment: copying {host_src} into {self.container}:{dest} failed: "
                f"{res.stderr.decode(errors='replace').strip() or res.returncode}"
            )

    def copy_out(self, env_src: str, host_dest: Path) -> bool:
        host_src = self._host_path(env_src)
        if host_src is not None:
            if not os.path.lexists(host_src):
                return False
            _copy_host(host_src, host_dest)
            return True
        src = posixpath.normpath(posixpath.join(self.workspace_path, env_src))
        if host_dest.is_dir():
            shutil.rmtree(host_dest)
        host_dest.parent.mkdir(parents=True, exist_ok=True)
        res = docker(self.binary, "cp", f"{self.container}:{src}", str(host_dest), timeout=600)
        if res.returncode != 0:
            if (
                "no such file" in (res.stderr + res.stdout).lower()
                or "could not find" in (res.stderr + res.stdout).lower()
            ):
                return False
            raise EnvironmentFailure(
                f"docker environment: copying {self.container}:{src} to {host_dest} failed: "
                f"{exit_detail(res)}"
            )
        return True

    def halt(self) -> None:
        """Kill every process in the container: ``docker stop --time 0``, which returns once
        the container (its whole PID namespace) has stopped; idempotent.

        A process the agent detached from its exec's sweep (``env -u
        KSI_PROC_TAG ...``) dies here, before capture reads the bind-mounted
        workspace, which stays on the host. The stopped container is removed
        by :meth:`stop`. When the workspace must be handed back to KSI's user
        (see :meth:`stop`), the container is started again, fresh (none of the
        agent's processes), for the ``chown``.
        """
        with self._lock:
            if self._halted or self._stopped:
                return
            # start-up: listing components imports this module; this only when used
            import http.client

            from ksi.environments.engine_api import EngineAPIError

            try:
                if self.api is not None:
                    self.api.stop_now(self.container)
                else:
                    res = docker(self.binary, "stop", "--time", "0", self.container, timeout=120)
                    if res.returncode != 0 and "no such container" not in res.stderr.lower():
                        raise EnvironmentFailure(exit_detail(res))
            except (EnvironmentFailure, EngineAPIError, OSError, http.client.HTTPException) as exc:
                raise EnvironmentFailure(
                    f"docker environment: stopping container {self.container} failed: {exc}; "
                    "its processes may still run, so the attempt is not captured"
                ) from exc
            self._halted = True
            if self.give_back_workspace:
                docker(self.binary, "start", self.container, timeout=120)
                self._give_back_workspace()

    def _give_back_workspace(self) -> None:
        """``chown -R`` the workspace to KSI's user, from inside the (running) container."""
        docker(
            self.binary,
            "exec",
            "--privileged",
            "-u",
            "0",
            self.container,
            "chown",
            "-R",
            f"{os.getuid()}:{os.getgid()}",
            self.workspace_path,
            timeout=300,
        )

    def stop(self) -> None:
        """Remove the container (its processes die with it); idempotent.

        When the container ran as another user than the one running KSI (and
        KSI is not root), the workspace is first handed back to KSI's user, so
        files the agent wrote as root stay deletable on the host (done by
        :meth:`halt` already when it ran).
        """
        with self._lock:
            if self._stopped:
                return
            if self.give_back_workspace and not self._halted:
                self._give_back_workspace()
            if self.api is not None:
                # start-up: listing components imports this module; this only when used
                import http.client

                from ksi.environments.engine_api import EngineAPIError

                try:
                    self.api.remove(self.container)
                except (EngineAPIError, OSError, http.client.HTTPException) as exc:
                    raise EnvironmentFailure(
                        f"docker environment: removing container {self.container} failed: "
                        f"{exc}; remove it with `ksi cleanup --all`"
                    ) from exc
                self._stopped = True
                return
            res = docker(self.binary, "rm", "-f", self.container, timeout=120)
            if res.returncode != 0 and "no such container" not in res.stderr.lower():
                raise EnvironmentFailure(
                    f"docker environment: removing container {self.container} failed: "
                    f"{exit_detail(res)}; remove it with `ksi cleanup --all`"
                )
            self._stopped = True


def _exec_start_failure(stderr_path: Path) -> str | None:
    """Why an exec that exited 126/127 never started its program, or None if it did."""
    tail = read_tail(stderr_path, 2048).strip().splitlines()
    for line in reversed(tail[-5:]):
        if line.startswith(NOT_FOUND_MARK) or any(m in line for m in _ENGINE_EXEC_FAILURES):
            return line.strip()
    return None


def _owner(user: str) -> tuple[int, int]:
    """The uid:gid container processes run as, when the ``user`` option says (else root's)."""
    if user == "host":
        return os.getuid(), os.getgid()
    uid, _, gid = user.partition(":")
    if uid.isdigit():
        return int(uid), int(gid) if gid.isdigit() else int(uid)
    return 0, 0


def _copy_host(src: Path, dest: Path) -> None:
    """Copy a file or tree on the host; a symlink at ``src`` is copied as a link, not followed."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir() and not src.is_symlink():
        copy_tree(src, dest, merge=True)
    else:
        shutil.copy2(src, dest, follow_symlinks=False)


@attrs.define
class DockerEnvironment(EnvironmentBase):
    """Options are fields: ``--environment docker -e image=... -e network=none`` and so on."""

    name: ClassVar[str] = "docker"
    aliases: ClassVar[tuple[str, ...]] = ("container",)
    description: ClassVar[str] = (
        "Each attempt in its own container (no capabilities, no-new-privileges, pids limit), "
        "workspace mounted at /workspace, run as your uid, network only to the endpoints the "
        "agent declares (network=bridge: the whole network); docker or podman CLI."
    )
    #: The agent runs in a container, off the host.
    isolates_agent: ClassVar[bool] = True

    #: ``ksi run`` flags that set one of these options: flag -> (option, help).
    cli_options: ClassVar[dict[str, tuple[str, str]]] = {
        "--image": ("image", "Docker image for the run."),
        "--network": (
            "network",
            "endpoints (default: only the agent's model API, through KSI's relay), none, "
            "bridge (the whole network), host, or a docker network's name (docker).",
        ),
        "--cpus": ("cpus", "CPU limit per attempt (docker)."),
        "--memory": ("memory", "Memory limit per attempt (docker)."),
    }

    #: Image for tasks that set neither ``docker_image`` nor ``dockerfile``.
    image: str = ""
    cpus: float | None = None
    #: A docker memory size (``4g``, ``512m``); unlimited when unset.
    memory: str | None = None
    pids_limit: int = attrs.field(default=2048, validator=_check_pids)
    #: ``endpoints`` (default: the run's internal network; each agent process reaches the
    #: endpoints it declares, its model API, through KSI's relay, and nothing else),
    #: ``none`` (offline), ``bridge`` / ``host`` / a docker network's name (all of it; warned).
    network: str = attrs.field(default=ENDPOINTS, validator=_check_network)
    docker_binary: str = attrs.field(factory=default_docker_binary)
    #: Where the attempt workspace appears in the container; the repo is ``<mount>/repo``.
    workspace_mount: str = attrs.field(default="/workspace", validator=_check_mount)
    #: ``host`` (your uid:gid), ``image`` (the image's USER), or a ``--user`` value.
    user: str = attrs.field(default="host", validator=_check_user)
    #: Run a tiny init as PID 1 so orphaned processes are reaped (``--init``).
    init: bool = True
    #: ``none`` (drop every capability) or ``default`` (the engine's default set).
    capabilities: str = attrs.field(default="none", validator=_check_capabilities)
    #: Start and remove containers through the Engine API socket when it is the CLI's daemon
    #: (two fewer CLI start-ups per attempt); ``false``: the CLI for everything.
    use_engine_api: bool = True
    _images: dict[str, str] = attrs.field(factory=dict, init=False)
    _binary: str = attrs.field(default="", init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    #: EngineAPI, False (not usable) or None (not checked yet); ``Any`` as ``api`` above.
    _api: Any = attrs.field(default=None, init=False)
    #: Each run's internal network (``network=endpoints``), made at its first attempt.
    _networks: dict[str, RunNetwork] = attrs.field(factory=dict, init=False)
    _network_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    #: Whether prepare() checked the engine's networks are local / warned about open ones.
    _engine_checked: bool = attrs.field(default=False, init=False)
    _warned: bool = attrs.field(default=False, init=False)

    # -- run lifetime -----------------------------------------------------
    def prepare(self, tasks: Sequence[TaskSpec]) -> None:
        """Check the engine answers and every task's image exists (pull or build it once);
        warn when agents get a whole network rather than their endpoints."""
        networks = {t.id: self.settings_for(t).network for t in tasks}  # bad values fail now
        self._warn_open_network(networks)
        binary = self._resolve()
        check_daemon(binary)
        if not self._engine_checked and ENDPOINTS in (self.network, *networks.values()):
            check_engine(binary, LABEL_RUN)
            self._engine_checked = True
        missing = [t.id for t in tasks if task_image_source(t.runtime, self.image)[0] == "none"]
        if missing:
            raise UserInputError(
                f"docker environment: no image for task {', '.join(repr(t) for t in missing[:5])}"
                f"{' and others' if len(missing) > 5 else ''}; pass --image IMAGE (or "
                "--environment-option image=IMAGE): tasks of a tasks file (the custom source) "
                "cannot name an image of their own; a plugin's task source can set "
                "runtime.image or runtime.dockerfile"
            )
        by_source: dict[tuple[str, str, str], list[str]] = {}
        for task in tasks:
            kind, ref, context = task_image_source(task.runtime, self.image)
            by_source.setdefault((kind, str(ref), str(context or "")), []).append(task.id)
        for (kind, source, context_dir), task_ids in by_source.items():
            if kind == "image":
                ensure_image(binary, source, task_ids)
                resolved = source
            else:
                resolved = build_task_image(binary, Path(source), Path(context_dir), task_ids)
            with self._lock:
                for task_id in task_ids:
                    self._images[task_id] = resolved

    def _warn_open_network(self, networks: Mapping[str, str]) -> None:
        """Say once when the run's option, or some tasks' runtime, opens a whole network."""
        if self._warned:
            return
        self._warned = True
        closed = (ENDPOINTS, "none")
        if self.network not in closed:
            warnings.warn(open_network_warning(self.network), KsiWarning, stacklevel=3)
            return
        by_network: dict[str, list[str]] = {}
        for task_id, network in networks.items():
            if network not in closed:
                by_network.setdefault(network, []).append(task_id)
        for network, task_ids in by_network.items():
            warnings.warn(open_network_warning(network, task_ids), KsiWarning, stacklevel=3)

    def endpoint_warning(self, agent: str, url: str) -> str | None:
        """Why ``url`` (the agent's ``base_url``) is out of the containers' reach, or None.

        ``network=endpoints`` (the default) reaches it through KSI's relay, on
        the host, and ``host`` shares the host's loopback; on ``bridge``,
        ``none`` or a named network, 127.0.0.1 is the container's own. Tasks
        that set ``runtime.network`` decide for themselves, so this looks at
        the run's option only.
        """
        if self.network in (ENDPOINTS, "host") or not is_loopback_url(url):
            return None
        return (
            f"agent {agent!r}: base_url {url} is this machine's loopback, which a container "
            f"on the {self.network!r} network cannot reach (its 127.0.0.1 is its own), so "
            "every model call would fail; leave out --network (network=endpoints, the default, "
            "reaches it through KSI's relay), pass --network host, or give a base_url the "
            "container can reach"
        )

    def image_for(self, task: TaskSpec) -> str:
        """The (pulled or built) image a task runs in; prepares it when prepare() did not."""
        with self._lock:
            found = self._images.get(task.id)
        if found is None:
            self.prepare([task])
            found = self._images[task.id]
        return found

    def settings_for(self, task: TaskSpec) -> ContainerSettings:
        """The run's options with the task's runtime ``cpus``/``memory_mb``/``user``/... applied."""
        return container_settings(
            task,
            cpus=self.cpus,
            memory=self.memory,
            user=self.user,
            capabilities=self.capabilities,
            network=self.network,
        )

    def container_spec(
        self, ctx: AttemptContext, settings: ContainerSettings, binary: str
    ) -> ContainerSpec:
        """The attempt's container, hardening included: both start paths are derived from it.

        With ``network=endpoints`` it joins the run's internal network (made here when it
        is the run's first attempt).
        """
        user, userns = user_fields(settings.user, binary)
        network = settings.network
        if network == ENDPOINTS:
            network = self._run_network(binary, ctx.run_id).name
        return ContainerSpec(
            name=container_name(ctx.run_id, ctx.task.id, ctx.attempt),
            image=self.image_for(ctx.task),
            user=user,
            userns=userns,
            mounts=(BindMount(str(ctx.host_workspace.resolve()), self.workspace_mount),),
            workdir=self.workspace_mount,
            network=network,
            labels={
                LABEL_RUN: ctx.run_id,
                LABEL_ATTEMPT: f"{ctx.task.id}/{ctx.attempt}",
                LABEL_ROLE: "attempt",
            },
            cap_drop=() if settings.capabilities == "default" else ("ALL",),
            pids_limit=self.pids_limit,
            init=self.init,
            cpus=settings.cpus,
            memory=settings.memory,
        )

    def start(self, ctx: AttemptContext) -> DockerHandle:
        binary = self._resolve()
        settings = self.settings_for(ctx.task)
        spec = self.container_spec(ctx, settings, binary)
        host_ws = Path(spec.mounts[0].source)
        (host_ws / HOME_SUBDIR).mkdir(parents=True, exist_ok=True)
        api = self._engine_api()
        start_container(binary, api, spec, ctx)
        relay = None
        if settings.network == ENDPOINTS:
            gateway = self._run_network(binary, ctx.run_id).gateway
            relay = relay_front(binary, api, spec, ctx, gateway)
        return DockerHandle(
            binary=binary,
            container=spec.name,
            host_workspace=host_ws,
            workspace_path=self.workspace_mount,
            base_env=dict(ctx.base_env),
            owner=_owner(settings.user),
            give_back_workspace=settings.user != "host" and os.getuid() != 0,
            api=api,
            relay=relay,
        )

    def _run_network(self, binary: str, run_id: str) -> RunNetwork:
        """The run's internal network, made once (attempts start in parallel)."""
        with self._network_lock:
            found = self._networks.get(run_id)
            if found is None:
                found = ensure_network(binary, run_id, {LABEL_RUN: run_id})
                self._networks[run_id] = found
            return found

    def _engine_api(self) -> EngineAPI | None:
        """The daemon's API when it is the CLI's own daemon (checked once), else None."""
        if not self.use_engine_api:
            return None
        # start-up: listing components imports this module; this only when used
        from ksi.environments.engine_api import EngineAPI, engine_api_for

        with self._lock:
            if self._api is None:
                self._api = engine_api_for(self._resolve()) or False
            return self._api if isinstance(self._api, EngineAPI) else None

    def cleanup(self, run_id: str | None) -> int:
        """Remove every container (attempt or eval) of ``run_id``, or of every run when None,
        then the run's internal network; count both."""
        binary = self._resolve()
        removed = remove_containers(binary, run_id)
        selector = f"{LABEL_RUN}={run_id}" if run_id is not None else LABEL_RUN
        removed += remove_networks(binary, selector)
        with self._network_lock:
            if run_id is None:
                self._networks.clear()
            else:
                self._networks.pop(run_id, None)
        return removed

    def _resolve(self) -> str:
        if not self._binary:
            self._binary = resolve_binary(self.docker_binary)
        return self._binary


def list_containers(binary: str, run_id: str | None) -> list[str]:
    """Ids of KSI containers (running or not) of ``run_id``, or of every run."""
    selector = f"label={LABEL_RUN}={run_id}" if run_id is not None else f"label={LABEL_RUN}"
    res = docker(binary, "ps", "-aq", "--no-trunc", "--filter", selector, timeout=60)
    if res.returncode != 0:
        raise EnvironmentFailure(
            f"docker environment: listing containers failed: {exit_detail(res)}"
        )
    return [line.strip() for line in res.stdout.splitlines() if line.strip()]


def remove_containers(binary: str, run_id: str | None) -> int:
    """``docker rm -f`` every KSI container of ``run_id`` (all runs when None); count them."""
    ids = list_containers(binary, run_id)
    if not ids:
        return 0
    res = docker(binary, "rm", "-f", *ids, timeout=300)
    if res.returncode != 0 and "no such container" not in res.stderr.lower():
        raise EnvironmentFailure(
            f"docker environment: removing {len(ids)} container(s) failed: {exit_detail(res)}"
        )
    return len(ids)


@hookimpl(trylast=True)
def ksi_register_environments(register: Any) -> None:
    register(DockerEnvironment)

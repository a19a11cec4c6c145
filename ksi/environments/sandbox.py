"""The ``sandbox`` environment: each agent process in a bubblewrap (``bwrap``) sandbox.

No daemon and no image: the sandbox sees the host's own root file system, but
read-only, so the agent uses the tools installed on the host. What it gets:

* the attempt workspace, bound at its own host path, is the only writable
  place besides a private, empty ``/tmp`` (a tmpfs per process, gone when it ends);
* ``HOME`` is an empty directory in the workspace (``.ksi/home``); the host's
  home directories (``/home``, ``/root``, ``$HOME``) are hidden behind empty
  file systems, so dotfiles and credentials there cannot be read;
* the sockets of container engines and per-user services (``/run/docker.sock``,
  ``/run/user``...) are masked: reaching one would be a way out;
* host secrets are hidden whatever the options (``/etc/shadow``, ``/etc/gshadow``,
  SSH host keys, ``/etc/ssl/private``...; the ``hide`` option adds paths): the
  sandbox runs as the user running KSI, and under root that is root without
  capabilities, which still owns, and so may read, every file root owns;
* the run directory is hidden (and a ``runs/`` root holding only runs): other
  attempts' live workspaces, the logs and the seeds are out of sight, the
  attempt's own workspace is bound back;
* the network endpoints the agent declares (its model API, from its
  ``base_url`` option or its provider's default host) and nothing else
  (``network=endpoints``, the default; :mod:`ksi.environments.sandbox_net`): its own
  network namespace holds only loopback, where a relay started with the
  agent forwards to KSI, which connects only to those endpoints; a grading
  command declares none and gets no network; ``network=none``: nothing even
  for the agent; ``network=host``: the host's network;
* the agent's program and its interpreter, read-only, even when installed
  under a hidden home (a venv on pyenv's Python, node under ``~/.nvm``):
  :mod:`ksi.environments.sandbox_expose`; for a process started with KSI's own
  interpreter (the knowledge tools' MCP server, the ACP client), what that
  interpreter imports from too (a venv and an editable checkout in ``/tmp``);
* its own PID, IPC and UTS namespaces, no capabilities, a new session (no
  terminal injection), and killed when its parent dies.

The sandbox is per ``exec``: every process an exec started dies with it (the
PID namespace ends when its first process does), so nothing outlives an
attempt and there is nothing for ``cleanup`` to find.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ksi.environments.local import LocalHandle
from ksi.environments.sandbox_expose import (
    ProgramMounts,
    import_roots,
    merged,
    program_mounts,
    python_mounts,
)
from ksi.errors import EnvironmentFailure
from ksi.hookspecs import hookimpl
from ksi.interfaces import AttemptContext, EnvironmentBase, Invocation
from ksi.models import TaskSpec

if TYPE_CHECKING:
    from ksi.environments.sandbox_net import HostRelay

HOME_SUBDIR = ".ksi/home"
#: Host directories hidden behind an empty tmpfs (besides ``$HOME``).
HIDDEN_DIRS = ("/home", "/root", "/run/user", "/run/containerd", "/run/podman", "/var/run/docker")
#: Sockets that would let a process out of any sandbox; replaced by /dev/null.
MASKED_FILES = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock")
#: Host secrets root can read, replaced by /dev/null whatever the options. The
#: sandbox runs as the user running KSI; under root that is root without
#: capabilities, which still owns (and may read) every file root owns.
SECRET_FILES = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
    "/etc/ssh/ssh_host_*_key",  # host private keys (the .pub files stay)
)
#: Host directories of secrets root can read, hidden behind an empty tmpfs whatever the options.
SECRET_DIRS = ("/etc/ssl/private", "/etc/docker", "/var/lib/docker", "/var/lib/containerd")
#: The file that marks a run directory (see :mod:`ksi.layout`).
_RUN_MARKER = "run.json"
#: Variables from the scrub naming host places the sandbox hides; left out.
HIDDEN_VARS = frozenset(
    {
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
    }
)


#: Run by KSI's Python in the probe: KSI imports what the knowledge tools' server needs
#: besides the MCP SDK (which is slow to import: found, not imported, as each module named).
_IMPORTS_CHECK = (
    "import importlib.util, sys, ksi.knowledge.tools\n"
    "missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\n"
    "sys.exit('cannot import ' + ', '.join(missing) if missing else 0)"
)

#: ``network`` option values: the declared endpoints only, nothing, the host's network.
NETWORK_CHOICES = ("endpoints", "none", "host")


def _check_network(_inst: Any, _attr: Any, value: str) -> None:
    if value not in NETWORK_CHOICES:
        raise ValueError(
            f"network {value!r} is not valid; use endpoints (default: the "
            "agent reaches only the endpoints it declares), none (no network at all) or host "
            "(the host's network)"
        )


def hidden_roots(hide_home: bool) -> list[Path]:
    """The home directories the sandbox hides (resolved, existing): ``HIDDEN_DIRS`` and $HOME."""
    if not hide_home:
        return []
    hidden = list(HIDDEN_DIRS)
    home = os.environ.get("HOME", "")
    if home and Path(home).is_absolute() and Path(home).resolve() != Path("/"):
        hidden.append(home)
    return sorted({Path(p).resolve() for p in hidden if Path(p).is_dir()})


#: Host directories every sandbox replaces with its own empty, private ones.
PRIVATE_TMP_DIRS = ("/tmp", "/var/tmp")


def unseen_roots(hide_home: bool) -> list[Path]:
    """What a sandboxed process cannot see of the host: the hidden homes and ``/tmp``.

    The roots a program's installation is looked for under (a venv made in
    ``/tmp`` is as invisible inside as one under ``/root``); the homes are
    :func:`hidden_roots`, ``/tmp`` and ``/var/tmp`` are the private tmpfs.
    """
    tmp = {Path(p).resolve() for p in PRIVATE_TMP_DIRS if Path(p).is_dir()}
    return sorted(tmp.union(hidden_roots(hide_home)))


def relay_interpreter() -> str:
    """KSI's own base interpreter (a venv's ``python`` resolved): it runs the in-sandbox relay."""
    if not sys.executable:
        raise EnvironmentFailure(
            "sandbox environment: KSI's Python interpreter is unknown (sys.executable is "
            "empty), so the network relay cannot run; use network=host or network=none"
        )
    return os.path.realpath(sys.executable)


def runs_own_python(invocation: Invocation) -> bool:
    """Whether the process, or a program it starts (an MCP server), is KSI's own interpreter."""
    own = os.path.abspath(sys.executable) if sys.executable else None
    return own is not None and any(
        os.path.abspath(p) == own for p in (invocation.argv[0], *invocation.programs)
    )


def own_python_mounts(hidden: Sequence[Path], runs: Sequence[str] = ()) -> ProgramMounts:
    """What KSI's own Python needs shown (:func:`python_mounts`); never a run directory's content.

    The run directory is hidden after these mounts, so a KSI installed inside
    it (``runs`` are the directories :func:`run_dirs_to_hide` gives) could not
    be shown without showing the other attempts: that is refused with the fix.
    """
    mounts = python_mounts(sys.executable, hidden)
    for bind in mounts.binds:
        inside = [r for r in runs if Path(r) == Path(bind) or Path(r) in Path(bind).parents]
        if inside:
            raise EnvironmentFailure(
                f"sandbox environment: KSI's Python ({sys.executable}) imports from {bind}, "
                f"inside the run directory {inside[0]}, which the sandbox hides from the agent; "
                "install KSI (its venv and source) outside the run directory, or choose a "
                "--run-dir elsewhere"
            )
    return mounts


def sandbox_env(
    base_env: Mapping[str, str], extra: Mapping[str, str], workspace: Path
) -> dict[str, str]:
    """The scrubbed base env plus the invocation's, with HOME in the workspace."""
    env = {k: v for k, v in base_env.items() if k not in HIDDEN_VARS}
    env["HOME"] = str(workspace / HOME_SUBDIR)
    env.update(extra)
    return env


def run_dirs_to_hide(attempt_dir: Path) -> list[str]:
    """The directories an attempt's sandbox hides: its run directory, and other runs.

    The run directory (the nearest ancestor of ``attempt_dir`` holding
    ``run.json``) holds every other attempt's live workspace, logs and the
    seeds; the sandbox binds only its own workspace back. When the run
    directory's parent holds nothing but run directories (a ``runs/`` root),
    it is hidden too, so other runs are out of sight as well. Without a run
    directory (an environment started outside a run), ``attempt_dir`` itself
    is hidden.
    """
    attempt_dir = attempt_dir.resolve()
    run_dir = next(
        (d for d in (attempt_dir, *attempt_dir.parents) if (d / _RUN_MARKER).is_file()), None
    )
    if run_dir is None or run_dir == Path("/"):
        return [str(attempt_dir)] if attempt_dir != Path("/") else []
    parent = run_dir.parent
    try:
        only_runs = parent != Path("/") and all(
            (entry / _RUN_MARKER).is_file()
            for entry in parent.iterdir()
            if entry.is_dir() and not entry.is_symlink()
        )
    except OSError:
        only_runs = False
    return [str(parent if only_runs else run_dir)]


def _secret_paths(extra: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(dirs, files)`` to hide: the built-in secrets plus ``extra``, resolved, existing."""
    found: set[Path] = set()
    for pattern in (*SECRET_FILES, *SECRET_DIRS, *extra):
        matches = glob.glob(pattern) if glob.has_magic(pattern) else [pattern]
        found.update(Path(m).resolve() for m in matches if os.path.lexists(m))
    dirs = sorted(str(p) for p in found if p.is_dir())
    files = sorted(str(p) for p in found if p.exists() and not p.is_dir())
    return dirs, files


def _outermost(paths: Sequence[str]) -> list[str]:
    """``paths`` without those under another of them (a tmpfs there already hides them)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(Path(k) == Path(path) or Path(k) in Path(path).parents for k in kept):
            kept.append(path)
    return kept


def bwrap_args(
    binary: str,
    workspace: Path,
    *,
    network: str,
    hide_home: bool,
    expose: Sequence[str],
    cwd: Path,
    hide: Sequence[str] = (),
    shown: Sequence[str] = (),
    mounts: Sequence[str] = (),
) -> list[str]:
    """The bubblewrap command line (without the program to run), in mount order.

    The one place a sandbox's command line is built. ``hide`` names more host
    paths to hide (a directory behind an empty tmpfs, a file behind /dev/null),
    e.g. :func:`run_dirs_to_hide`; the secrets in :data:`SECRET_FILES` and
    :data:`SECRET_DIRS` are always hidden. ``shown`` are bubblewrap mount
    arguments showing what the homes and ``/tmp`` hide (the program's
    installation, KSI's own Python), placed before the other hiding ones, so a
    secret or a run directory under them stays hidden; ``mounts`` come after
    them (the network relay's directory). ``workspace`` is bound writable last, so
    it is there even under a hidden directory. ``network`` is ``host`` for the
    host's network; anything else is the sandbox's own, loopback only.
    """
    args = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for tmp in PRIVATE_TMP_DIRS:
        args += ["--tmpfs", tmp]
    # Resolved (/var/run is a link to /run), each once, parents before children.
    for root in hidden_roots(hide_home):
        args += ["--tmpfs", str(root)]
    args += shown
    secret_dirs, secret_files = _secret_paths(hide)
    for path in _outermost(secret_dirs):
        args += ["--tmpfs", path]
    masked = {str(Path(p).resolve()) for p in MASKED_FILES if os.path.exists(p)}
    for path in sorted(masked.union(secret_files)):
        if not Path(path).is_dir():
            args += ["--ro-bind", "/dev/null", path]
    for path in expose:
        args += ["--ro-bind", path, path]
    args += mounts
    # Bound after the tmpfs mounts, so a workspace under /tmp or a hidden home is still there.
    args += ["--bind", str(workspace), str(workspace)]
    args += ["--unshare-all"]
    if network == "host":
        args.append("--share-net")
    args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--chdir", str(cwd)]
    return args


@attrs.define
class SandboxHandle(LocalHandle):
    """Host processes like ``local``'s, each run inside its own bubblewrap sandbox.

    Everything else (cancellation from another thread, logs, the kill of the
    whole tree) is :class:`LocalHandle`'s; only the command line and which
    paths may be copied differ.
    """

    binary: str = "bwrap"
    network: str = "endpoints"
    hide_home: bool = True
    expose: tuple[str, ...] = ()
    #: More host paths to hide (the ``hide`` option).
    hide: tuple[str, ...] = ()
    #: The attempt's directory: its run directory is hidden, all but the workspace.
    attempt_dir: Path | None = None

    @contextlib.contextmanager
    def _prepared(self, invocation: Invocation) -> Iterator[tuple[list[str], Path, dict[str, str]]]:
        """The bwrap command; with the network relay running when the process declares endpoints."""
        if self.network != "endpoints" or not invocation.endpoints:
            yield self._process(invocation)
            return
        # start-up: the relay's asyncio costs `ksi run --help` ~20 ms.
        from ksi.environments.sandbox_net import HostRelay

        with HostRelay(invocation.endpoints) as relay:
            yield self._process(invocation, relay)

    def _process(
        self, invocation: Invocation, relay: HostRelay | None = None
    ) -> tuple[list[str], Path, dict[str, str]]:
        cwd = (self.host_workspace / invocation.cwd).resolve()
        # Per exec, not per attempt: a run started since then is hidden too.
        runs = run_dirs_to_hide(self.attempt_dir) if self.attempt_dir is not None else []
        env = sandbox_env(self.base_env, invocation.env, self.host_workspace)
        hidden = unseen_roots(self.hide_home)
        program = list(invocation.argv)
        path_var = env.get("PATH", os.defpath)
        shown = [program_mounts(program[0], path_var, hidden, cwd=cwd)]
        # Started by the program (an MCP server).
        shown += [program_mounts(helper, path_var, hidden) for helper in invocation.programs]
        if runs_own_python(invocation):
            shown.append(own_python_mounts(hidden, runs))
        mounts: list[str] = []
        if relay is not None:
            interpreter = relay_interpreter()
            mounts += program_mounts(interpreter, "", hidden).bwrap_args()
            mounts += relay.bwrap_args()
            program = relay.wrap(interpreter, program)
            env.update(relay.env())
        argv = bwrap_args(
            self.binary,
            self.host_workspace,
            network=self.network,
            hide_home=self.hide_home,
            expose=self.expose,
            cwd=cwd,
            hide=(*self.hide, *runs),
            shown=merged(*shown).bwrap_args(),
            mounts=mounts,
        )
        argv += ["--", *program]
        return argv, self.host_workspace, env

    def halt(self) -> None:
        """End every process of the sandbox; later execs are refused.

        Each exec is its own PID namespace: when its first process exits the
        kernel kills every other process in it before bubblewrap returns, so
        no process of a finished exec survives (not even one that left the
        session and cleared its environment); :meth:`LocalHandle.halt` ends
        execs still running.
        """
        super().halt()

    def _host_path(self, env_path: str) -> Path:
        path = Path(os.path.normpath(self.host_workspace / env_path))
        if path != self.host_workspace and self.host_workspace not in path.parents:
            raise EnvironmentFailure(
                f"sandbox environment: {env_path} is outside the workspace; in the sandbox only "
                f"the workspace ({self.host_workspace}) is writable and outlives a process "
                "(/tmp is private to each process)"
            )
        return path


@attrs.define
class SandboxEnvironment(EnvironmentBase):
    """Options are fields: ``--environment sandbox -e network=host``."""

    name: ClassVar[str] = "sandbox"
    aliases: ClassVar[tuple[str, ...]] = ("bwrap", "bubblewrap")
    description: ClassVar[str] = (
        "Each agent process in a bubblewrap sandbox: host root read-only, the workspace the "
        "only writable path, empty HOME, private /tmp, network only to the endpoints the "
        "agent declares (network=none: none; network=host: the host's)."
    )
    #: The agent runs in a bubblewrap sandbox, off the host.
    isolates_agent: ClassVar[bool] = True
    #: The agent's processes run the host's programs (the knowledge tools' server).
    runs_host_programs: ClassVar[bool] = True

    #: ``endpoints`` (default: the agent reaches the endpoints it declares, its model
    #: API, and nothing else; grading commands get no network), ``none`` (nothing)
    #: or ``host`` (the host's network).
    network: str = attrs.field(default="endpoints", validator=_check_network)
    bwrap_binary: str = "bwrap"
    #: Hide /home, /root and $HOME behind empty file systems.
    hide_home: bool = True
    #: Comma-separated host paths to show read-only even when hidden (e.g. ``~/.nvm``).
    expose: str = ""
    #: Comma-separated host paths to hide as well (globs allowed, e.g. ``/srv/secrets``).
    hide: str = ""
    _binary: str = attrs.field(default="", init=False)

    def prepare(self, tasks: Sequence[TaskSpec]) -> None:
        """Check that bubblewrap exists and can create its namespaces on this machine."""
        binary = self._resolve()
        for path in self._paths(self.hide):
            if not Path(path).is_absolute():
                raise EnvironmentFailure(
                    f"sandbox environment: hide path {path!r} is not absolute; fix the hide= "
                    "option (comma-separated absolute paths, globs allowed)"
                )
        for path in self._expose_paths():
            if not Path(path).exists():
                raise EnvironmentFailure(
                    f"sandbox environment: expose path {path!r} does not exist; fix the "
                    "expose= option (comma-separated absolute paths)"
                )
        try:
            res = self._probe(binary, ["true"], network=self.network, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentFailure(f"sandbox environment: cannot run {binary}: {exc}") from exc
        if res.returncode != 0:
            detail = res.stderr.strip() or f"exit {res.returncode}"
            raise EnvironmentFailure(
                f"sandbox environment: bubblewrap cannot create a sandbox here ({detail}); "
                "when it cannot create namespaces, unprivileged user namespaces are disabled: "
                "enable them "
                "(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also "
                "kernel.apparmor_restrict_unprivileged_userns=0), or use --environment docker"
            )
        self._probe_own_python(binary)
        if self.network == "endpoints":
            self._probe_relay(binary)

    def _probe_own_python(self, binary: str) -> None:
        """Check that KSI's own Python imports KSI inside a sandbox, when it needs showing.

        The knowledge tools' MCP server and the ACP client run it there; with its
        venv or source under ``/tmp`` or a hidden home, :func:`own_python_mounts`
        shows them. Nothing to check (and no cost) when all it imports is in sight.
        """
        if not sys.executable:
            return
        hidden = unseen_roots(self.hide_home)
        own = own_python_mounts(hidden)
        if own == program_mounts(sys.executable, "", hidden):  # its imports are all in sight
            return
        modules = import_roots(sys.executable).found
        check = [sys.executable, "-I", "-c", _IMPORTS_CHECK, *modules]
        try:
            res = self._probe(
                binary,
                check,
                network="none",
                shown=own.bwrap_args(),
                expose=self._expose_paths(),
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            res = subprocess.CompletedProcess(check, 1, "", str(exc))
        if res.returncode != 0:
            detail = res.stderr.strip()[-500:] or f"exit {res.returncode}"
            paths = ", ".join(own.refused or own.binds)
            raise EnvironmentFailure(
                f"sandbox environment: KSI's Python ({sys.executable}) cannot import KSI "
                f"inside the sandbox ({detail}); it runs there for the knowledge tools and "
                f"the acp agent, and imports from {paths}, which the sandbox hides "
                f"(/tmp and /var/tmp are private{', the homes hidden' if self.hide_home else ''})."
                " Install KSI outside them, or show the path with expose=PATH"
            )

    def _probe_relay(self, binary: str) -> None:
        """Check that KSI's Python, which carries the agent's model calls, runs in a sandbox."""
        interpreter = relay_interpreter()
        hidden = unseen_roots(self.hide_home)
        check = [interpreter, "-I", "-S", "-c", "import socket, subprocess, threading"]
        mounts = program_mounts(interpreter, "", hidden).bwrap_args()
        try:
            res = self._probe(binary, check, network="none", mounts=mounts, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            res = subprocess.CompletedProcess(check, 1, "", str(exc))
        if res.returncode != 0:
            detail = res.stderr.strip()[-500:] or f"exit {res.returncode}"
            raise EnvironmentFailure(
                f"sandbox environment: KSI's Python ({interpreter}) cannot run inside the "
                f"sandbox ({detail}); it carries the agent's model calls (network=endpoints, "
                "the default). Show its installation with expose=PATH, or use network=host "
                "(the host's network) or network=none (no network)"
            )

    def _probe(
        self,
        binary: str,
        argv: Sequence[str],
        *,
        network: str,
        shown: Sequence[str] = (),
        mounts: Sequence[str] = (),
        expose: Sequence[str] = (),
        timeout: float,
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` in a throw-away sandbox made as an attempt's is (what ``prepare`` checks)."""
        with tempfile.TemporaryDirectory(prefix="ksi-bwrap-probe-") as tmp:
            probe = Path(tmp).resolve()
            sandbox = bwrap_args(
                binary,
                probe,
                network=network,
                hide_home=self.hide_home,
                expose=expose,
                cwd=probe,
                shown=shown,
                mounts=mounts,
            )
            return subprocess.run(
                [*sandbox, "--", *argv], capture_output=True, text=True, timeout=timeout
            )

    def start(self, ctx: AttemptContext) -> SandboxHandle:
        workspace = ctx.host_workspace.resolve()
        if not workspace.is_dir():
            raise EnvironmentFailure(
                f"attempt workspace {workspace} does not exist; the runner must create and "
                "seed it before starting the environment"
            )
        (workspace / HOME_SUBDIR).mkdir(parents=True, exist_ok=True)
        return SandboxHandle(
            host_workspace=workspace,
            workspace_path=str(workspace),
            base_env=dict(ctx.base_env),
            binary=self._resolve(),
            network=self.network,
            hide_home=self.hide_home,
            expose=tuple(self._expose_paths()),
            hide=tuple(self._paths(self.hide)),
            attempt_dir=ctx.attempt_dir,
        )

    def cleanup(self, run_id: str | None) -> int:
        """Nothing outlives a sandbox (``--die-with-parent``, a PID namespace per exec)."""
        return 0

    def _expose_paths(self) -> list[str]:
        return [str(Path(p).resolve()) for p in self._paths(self.expose)]

    @staticmethod
    def _paths(option: str) -> list[str]:
        """The comma-separated absolute paths of an option (``~`` expanded)."""
        return [str(Path(p.strip()).expanduser()) for p in option.split(",") if p.strip()]

    def _resolve(self) -> str:
        if not self._binary:
            found = shutil.which(self.bwrap_binary)
            if found is None:
                raise EnvironmentFailure(
                    f"sandbox environment: {self.bwrap_binary!r} (bubblewrap) was not found on "
                    "PATH; install it (apt-get install bubblewrap / dnf install bubblewrap) or "
                    "use --environment docker"
                )
            self._binary = found
        return self._binary


@hookimpl(trylast=True)
def ksi_register_environments(register: Any) -> None:
    register(SandboxEnvironment)

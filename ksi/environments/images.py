"""Finding, pulling and building the images the ``docker`` environment runs.

Everything goes through the Docker CLI (or a CLI-compatible engine such as
podman), so KSI needs no Docker SDK. A task's Dockerfile is built once and
tagged with a hash of its content and its build context
(``ksi-task:<hash>``): a second run, or a second task with the same
Dockerfile, finds the image and builds nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ksi.errors import EnvironmentFailure
from ksi.proc import read_tail
from ksi.task_parts import Runtime

#: Repository name of images KSI builds from task Dockerfiles.
TASK_IMAGE_REPO = "ksi-task"
#: Directories left out of a build context's hash (never part of what a Dockerfile uses).
_SKIP_DIRS = frozenset({".git", "__pycache__"})


def default_docker_binary() -> str:
    """``$KSI_DOCKER_BINARY`` (e.g. ``podman``), else ``docker``."""
    return os.environ.get("KSI_DOCKER_BINARY", "").strip() or "docker"


def client_env() -> dict[str, str]:
    """The variables the docker client itself needs (socket, config, rootless podman paths)."""
    keep_prefixes = ("DOCKER_", "CONTAINER_", "PODMAN_", "XDG_", "BUILDKIT_")
    keep = {"HOME", "PATH", "USER", "LOGNAME", "TMPDIR", "LANG", "LC_ALL"}
    return {k: v for k, v in os.environ.items() if k in keep or k.startswith(keep_prefixes)}


def resolve_binary(binary: str) -> str:
    """The full path of the docker CLI, or a clear error naming the fix."""
    found = shutil.which(binary)
    if found is None:
        raise EnvironmentFailure(
            f"docker environment: the container CLI {binary!r} was not found on PATH; install "
            "Docker (e.g. apt-get install docker.io) or point docker_binary= / "
            "$KSI_DOCKER_BINARY at a docker-compatible CLI such as podman"
        )
    return found


def docker(
    binary: str, *args: str, timeout: float | None = 120, input_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one short docker CLI command and capture its output (never raises on exit status)."""
    try:
        return subprocess.run(
            [binary, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=client_env(),
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentFailure(
            f"docker environment: `{binary} {' '.join(args[:3])} ...` did not answer within "
            f"{timeout}s; is the Docker daemon healthy?"
        ) from exc
    except OSError as exc:
        raise EnvironmentFailure(f"docker environment: cannot run {binary!r}: {exc}") from exc


def exit_detail(res: subprocess.CompletedProcess[str]) -> str:
    """The last line a failed docker CLI command printed (stderr, else stdout), or its status."""
    lines = (res.stderr or res.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit {res.returncode}"


def check_daemon(binary: str) -> str:
    """The engine's server version; a clear error when the daemon does not answer."""
    res = docker(binary, "version", "--format", "{{.Server.Version}}", timeout=30)
    if res.returncode != 0 or not res.stdout.strip():
        detail = (res.stderr or res.stdout).strip().splitlines()
        raise EnvironmentFailure(
            f"docker environment: `{binary} version` cannot reach the engine "
            f"({detail[-1] if detail else f'exit {res.returncode}'}); start the Docker daemon "
            "(e.g. `sudo systemctl start docker`) or check DOCKER_HOST and your permissions on "
            "the docker socket"
        )
    return res.stdout.strip()


def image_exists(binary: str, ref: str) -> bool:
    return docker(binary, "image", "inspect", "--format", "{{.Id}}", ref).returncode == 0


def ensure_image(binary: str, ref: str, used_by: Sequence[str] = ()) -> None:
    """Make sure ``ref`` is present locally, pulling it when it is not."""
    if image_exists(binary, ref):
        return
    res = docker(binary, "pull", ref, timeout=3600)
    if res.returncode != 0:
        tasks = f" (used by task {', '.join(repr(t) for t in used_by[:5])})" if used_by else ""
        tail = (res.stderr or res.stdout).strip().splitlines()
        raise EnvironmentFailure(
            f"docker environment: image {ref!r}{tasks} is not present locally and "
            f"`{binary} pull` failed: {tail[-1] if tail else 'exit ' + str(res.returncode)}; "
            f"build it (docker build -t {ref} DIR) or pull it first, or choose another with "
            "--image IMAGE (a plugin's task source may set its own with runtime.image)"
        )


def context_hash(dockerfile: Path, context: Path) -> str:
    """A hash of the Dockerfile and every file of its build context (path, mode, content)."""
    # start-up: listing components imports this module; this only when used
    import hashlib

    h = hashlib.sha256()
    h.update(b"dockerfile\0" + dockerfile.read_bytes() + b"\0")
    for root, dirs, files in os.walk(context):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            path = Path(root, name)
            rel = path.relative_to(context).as_posix()
            try:
                st = path.lstat()
                data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            except OSError:
                continue
            h.update(f"{rel}\0{st.st_mode & 0o777}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()[:16]


def build_task_image(
    binary: str, dockerfile: Path, context: Path, used_by: Sequence[str] = ()
) -> str:
    """Build ``dockerfile`` once, tagged ``ksi-task:<content hash>``; return the tag."""
    if not dockerfile.is_file():
        raise EnvironmentFailure(
            f"docker environment: dockerfile {str(dockerfile)!r} (task "
            f"{', '.join(repr(t) for t in used_by[:5])}) does not exist; fix the task's "
            "runtime.dockerfile (metadata `dockerfile`; an absolute path, or relative to the "
            "current directory)"
        )
    if not context.is_dir():
        raise EnvironmentFailure(
            f"docker environment: docker_context {str(context)!r} (task "
            f"{', '.join(repr(t) for t in used_by[:5])}) is not a directory"
        )
    tag = f"{TASK_IMAGE_REPO}:{context_hash(dockerfile, context)}"
    if image_exists(binary, tag):
        return tag

    with tempfile.NamedTemporaryFile(prefix="ksi-build-", suffix=".log", delete=False) as log:
        log_path = Path(log.name)
        proc = subprocess.run(
            [binary, "build", "-t", tag, "-f", str(dockerfile), str(context)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=client_env(),
        )
    if proc.returncode != 0:
        tail = read_tail(log_path, 2000).strip()
        raise EnvironmentFailure(
            f"docker environment: building {dockerfile} for task "
            f"{', '.join(repr(t) for t in used_by[:5])} failed (exit {proc.returncode}); "
            f"full log: {log_path}\n{tail}"
        )
    log_path.unlink(missing_ok=True)
    return tag


def task_image_source(runtime: Runtime, default_image: str) -> tuple[str, str | Path, Path | None]:
    """What a task runs in: ``("image", ref, None)`` or ``("dockerfile", path, context)``.

    The task's own ``runtime.image`` wins, then its ``runtime.dockerfile`` (built
    with ``runtime.docker_context``, default: the Dockerfile's directory), then
    the run's ``image``. ``("none", "", None)`` when none is set.
    """
    if runtime.image is not None:
        return ("image", runtime.image.strip(), None)
    if runtime.dockerfile is not None:
        path = Path(runtime.dockerfile).expanduser().absolute()
        context = (
            Path(runtime.docker_context).expanduser().absolute()
            if runtime.docker_context is not None
            else path.parent
        )
        return ("dockerfile", path, context)
    if default_image.strip():
        return ("image", default_image.strip(), None)
    return ("none", "", None)

"""Starting an attempt's container: the one place that chooses the Engine API or the CLI.

The container itself (image, mounts, hardening) is declared once, as a
:class:`~ksi.environments.container.ContainerSpec`; this module only sends
it, by one Engine API request when the daemon's socket is usable and the
spec can be said as an API body, else by ``docker run -d``. Either way a
container of the same attempt left by a killed run is replaced, and a
failure names the task and attempt.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from ksi.environments.container import ContainerSpec
from ksi.environments.docker_net import container_address
from ksi.environments.images import docker, exit_detail
from ksi.errors import EnvironmentFailure
from ksi.interfaces import AttemptContext

if TYPE_CHECKING:
    # Imported where used: http.client alone costs more than the rest of `ksi run --help`.
    from ksi.environments.engine_api import EngineAPI
    from ksi.environments.sandbox_net import TcpFront


def start_container(
    binary: str, api: EngineAPI | None, spec: ContainerSpec, ctx: AttemptContext
) -> None:
    """Start ``spec``'s container, detached (raises :class:`EnvironmentFailure`)."""
    body = None if api is None else spec.api_body()
    if api is not None and body is not None:
        _start_by_api(api, spec, body, ctx)
    else:
        _start_by_cli(binary, spec, ctx)


def _start_by_cli(binary: str, spec: ContainerSpec, ctx: AttemptContext) -> None:
    argv = spec.cli_args()
    res = docker(binary, *argv, timeout=300)
    if res.returncode != 0 and "already in use" in res.stderr:
        # A container of this very attempt survived a killed run: replace it.
        docker(binary, "rm", "-f", spec.name, timeout=120)
        res = docker(binary, *argv, timeout=300)
    if res.returncode != 0:
        docker(binary, "rm", "-f", spec.name, timeout=120)
        raise EnvironmentFailure(
            f"docker environment: starting a container of {spec.image!r} for task "
            f"{ctx.task.id!r} attempt {ctx.attempt} failed: {exit_detail(res)}"
        )


def _start_by_api(
    api: EngineAPI, spec: ContainerSpec, body: dict[str, Any], ctx: AttemptContext
) -> None:
    # start-up: listing components imports this module; this only when used
    import http.client

    from ksi.environments.engine_api import EngineAPIError

    try:
        try:
            api.run_detached(spec.name, body)
        except EngineAPIError as exc:
            if exc.status != 409:
                raise
            # A container of this very attempt survived a killed run: replace it.
            api.remove(spec.name)
            api.run_detached(spec.name, body)
    except (EngineAPIError, OSError, http.client.HTTPException) as exc:
        raise EnvironmentFailure(
            f"docker environment: starting a container of {spec.image!r} for task "
            f"{ctx.task.id!r} attempt {ctx.attempt} failed: {exc}"
        ) from exc


def relay_front(
    binary: str, api: EngineAPI | None, spec: ContainerSpec, ctx: AttemptContext, gateway: str
) -> TcpFront:
    """Where the attempt's relays listen (``gateway``) and whom they answer (the container).

    A container with no address on its network cannot reach the relay: it is
    removed and the attempt fails, saying which networks work instead.
    """
    # start-up: the relay module's asyncio costs `ksi run --help` ~20 ms.
    from ksi.environments.sandbox_net import TcpFront

    inspected: Any = None
    if api is not None:
        # start-up: listing components imports this module; this only when used
        import http.client

        from ksi.environments.engine_api import EngineAPIError

        with contextlib.suppress(EngineAPIError, OSError, http.client.HTTPException):
            inspected = api.request("GET", f"/containers/{spec.name}/json")
    else:
        res = docker(binary, "inspect", spec.name, timeout=60)
        try:
            listed = json.loads(res.stdout) if res.returncode == 0 else []
        except ValueError:
            listed = []
        inspected = listed[0] if isinstance(listed, list) and listed else None
    address = container_address(inspected, spec.network)
    if address is None:
        docker(binary, "rm", "-f", spec.name, timeout=120)
        raise EnvironmentFailure(
            f"docker environment: the container of task {ctx.task.id!r} attempt "
            f"{ctx.attempt} has no address on network {spec.network}, so its agent cannot "
            "reach the relay; use --network bridge or --network none"
        )
    return TcpFront(host=gateway, peer=address)

"""The entry point KSI loads: registers the ``ray`` executor (no import of ray here)."""

from __future__ import annotations

from ksi.hookspecs import Register, hookimpl
from ksi_ray.executor import RayExecutor


@hookimpl
def ksi_register_executors(register: Register) -> None:
    register(RayExecutor)

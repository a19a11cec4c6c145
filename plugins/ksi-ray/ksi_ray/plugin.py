"""The entry point KSI loads: registers the ``ray`` executor.

Nothing heavy is imported here (KSI loads every plugin module for ``ksi --help``):
the executor's module loads when KSI asks for executors, and ray itself only when
a run starts one.
"""

from __future__ import annotations

from ksi.hookspecs import Register, hookimpl


@hookimpl
def ksi_register_executors(register: Register) -> None:
    from ksi_ray.executor import RayExecutor

    register(RayExecutor)

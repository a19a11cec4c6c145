"""Installing the plugin costs nothing until a run uses it: no ray, no runner at load time."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import ksi_ray.plugin
assert not [m for m in sys.modules if m == "ray" or m.startswith("ray.")], "ray imported"
runner = ("ksi.attempt", "ksi.runs", "ksi.jobs")
assert not [m for m in sys.modules if m.startswith(runner)], "runner imported"
from ksi.plugins import registry
reg = registry("executor").get("ray")
assert reg.plugin == "ray", reg.plugin  # the entry point name
assert "ray" not in sys.modules, "looking the executor up imported ray"
print("ok")
"""


def test_loading_and_looking_up_the_executor_does_not_import_ray() -> None:
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"

"""What the sandbox must show for a Python agent CLI (mini, aider) installed in a venv.

A venv's interpreter is a link to the Python it was made with; when that
Python lives under a home directory (pyenv's ``/root/.pyenv``), the sandbox,
which hides ``/root`` and ``/home``, cannot start the CLI
(``bwrap: execvp mini: No such file or directory``). A user then passes
``--environment-option expose=<that Python's prefix>``, as these tests do.
"""

from __future__ import annotations

import shutil
from pathlib import Path

HIDDEN_ROOTS = (Path("/root"), Path("/home"))


def sandbox_expose_args(bin_dir: Path, binary: str) -> list[str]:
    """``--environment-option expose=...`` for ``binary``'s Python, when the sandbox hides it."""
    script = shutil.which(binary, path=str(bin_dir))
    if script is None:
        return []
    first = Path(script).resolve().read_bytes()[:256].split(b"\n", 1)[0]
    if not first.startswith(b"#!"):
        return []
    interpreter = Path(first[2:].decode().split()[0]).resolve()
    if not any(interpreter.is_relative_to(root) for root in HIDDEN_ROOTS):
        return []
    prefix = interpreter.parent.parent  # <prefix>/bin/python3.11 -> <prefix>
    return ["--environment-option", f"expose={prefix}"]

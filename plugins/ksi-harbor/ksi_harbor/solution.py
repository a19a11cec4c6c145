"""The ``oracle`` agent's view of a Harbor task: one shell command that runs ``solution/solve.sh``.

Harbor's oracle uploads ``solution/`` to ``/solution`` in the container and
runs ``bash /solution/solve.sh`` from the task's working directory. KSI's
``oracle`` agent runs ``task.solution.command``; to do the
same without ever putting the solution where another agent could see it
(no file in the seeded ``repo/``, nothing in the image), the command carries
the solution's files inside itself, base64-encoded in here-documents, writes
them to ``/solution``, and runs ``solve.sh`` with the task's
``[solution].env``. Only the oracle ever runs this command.

Linux caps one command-line argument at 128 KiB, so a solution directory
larger than :data:`MAX_EMBEDDED_BYTES` is not embedded; the task then has no
solution and ``oracle`` says so before the run starts.
"""

from __future__ import annotations

import base64
import shlex
from pathlib import Path

#: Total size of the encoded solution files the command may carry.
MAX_EMBEDDED_BYTES = 96 * 1024

SOLUTION_DIR_IN_ENV = "/solution"


class SolutionTooLarge(ValueError):
    """The solution directory cannot be carried by one command."""


def _files(solution_dir: Path) -> list[Path]:
    return sorted(p for p in solution_dir.rglob("*") if p.is_file() and not p.is_symlink())


def oracle_command(solution_dir: Path, *, workdir: str | None, env: dict[str, str]) -> str:
    """The shell command that puts ``solution_dir`` at ``/solution`` and runs ``solve.sh``."""
    lines = [
        "set -e",
        f"rm -rf {SOLUTION_DIR_IN_ENV}",
        f"mkdir -p {SOLUTION_DIR_IN_ENV}",
    ]
    total = 0
    for i, path in enumerate(_files(solution_dir)):
        rel = path.relative_to(solution_dir).as_posix()
        dest = shlex.quote(f"{SOLUTION_DIR_IN_ENV}/{rel}")
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        total += len(encoded)
        if total > MAX_EMBEDDED_BYTES:
            raise SolutionTooLarge(
                f"{solution_dir} holds more than {MAX_EMBEDDED_BYTES // 1024} KiB "
                "(base64), too much to pass the oracle as one command"
            )
        marker = f"KSI_HARBOR_FILE_{i}"
        lines.append(f'mkdir -p "$(dirname {dest})"')
        wrapped = "\n".join(encoded[j : j + 76] for j in range(0, len(encoded), 76))
        lines.append(f"base64 -d > {dest} <<'{marker}'\n{wrapped}\n{marker}")
        if path.stat().st_mode & 0o111:
            lines.append(f"chmod +x {dest}")
    if workdir:
        lines.append(f"cd {shlex.quote(workdir)}")
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    run = f"bash {SOLUTION_DIR_IN_ENV}/solve.sh"
    lines.append(f"env {exports} {run}" if exports else run)
    return "\n".join(lines) + "\n"

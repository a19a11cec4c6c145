"""How a host grade runs the agent's code: a scrubbed environment, optionally in bubblewrap.

The ``command`` evaluator runs on the host, as the task spec requires, but
its eval command imports what the agent wrote. So it gets what an agent gets
and no more:

* **environment**: the allow-list of :mod:`ksi.attempt.envscrub` (no
  API keys, tokens or cloud credentials) plus the variables the user names
  (``--eval-env NAME``), plus ``KSI_TASK_ID`` and ``KSI_EVAL_WORKDIR``;
* **isolation** ``sandbox`` (the default for a run whose agent ran isolated):
  the command line of the ``sandbox`` environment
  (:func:`ksi.environments.sandbox.bwrap_args`) with the eval directory as
  the only writable path: the host read-only, home directories hidden and
  ``HOME`` an empty directory in a private ``/tmp``, no network, its own PID
  namespace, killed with KSI. ``none`` runs the command as a plain host
  process (how KSI graded before; the agent's code can then write anywhere
  the user can and reach the network).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ksi.attempt.envscrub import passthrough_problems, scrubbed_env
from ksi.choices import EvalIsolation
from ksi.environments.sandbox import HIDDEN_VARS, bwrap_args, run_dirs_to_hide
from ksi.errors import UserInputError

#: How a host grade runs, once ``auto`` is decided: a plain host process, or inside bubblewrap.
ISOLATIONS = (EvalIsolation.NONE, EvalIsolation.SANDBOX)
#: ``HOME`` of a sandboxed eval command: an empty directory in its private /tmp.
SANDBOX_HOME = "/tmp/home"

_FIX = "install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap)"


def eval_process_env(
    task_id: str, workdir: Path, *, pass_env: Sequence[str], isolation: str
) -> dict[str, str]:
    """The eval command's environment: scrubbed, plus the names passed, plus KSI's two."""
    env = scrubbed_env(required=(), optional=(), passthrough=pass_env)
    if isolation == EvalIsolation.SANDBOX:
        # Host places the sandbox hides (TMPDIR, XDG dirs) would only mislead the command.
        env = {k: v for k, v in env.items() if k not in HIDDEN_VARS or k in pass_env}
        env["HOME"] = SANDBOX_HOME
    env.update({"KSI_TASK_ID": task_id, "KSI_EVAL_WORKDIR": str(workdir)})
    return env


def eval_argv(argv: Sequence[str], workdir: Path, *, isolation: str, binary: str) -> list[str]:
    """``argv`` as run on the host: unchanged, or inside bubblewrap with ``workdir`` writable."""
    if isolation != EvalIsolation.SANDBOX:
        return list(argv)
    workdir = workdir.resolve()
    # The eval directory sits in the run directory: the rest of it (other attempts' live
    # workspaces, the journal, seeds) is hidden as it is from a sandboxed agent.
    sandbox = bwrap_args(
        binary,
        workdir,
        network="none",
        hide_home=True,
        expose=(),
        cwd=workdir,
        hide=run_dirs_to_hide(workdir),
    )
    # The private /tmp exists by now (bwrap applies its options in order).
    return [*sandbox, "--dir", SANDBOX_HOME, "--", *argv]


def require_isolation(binary: str) -> str:
    """The bubblewrap executable to isolate host grades with, checked by running it.

    Raises :class:`UserInputError` before any run starts when bubblewrap is
    missing or cannot create a sandbox here, with both ways out.
    """
    found = shutil.which(binary)
    if found is None:
        raise UserInputError(
            f"grading on the host is isolated with bubblewrap because the agent runs isolated, "
            f"but {binary!r} was not found on PATH; {_FIX}, or pass --eval-isolation none to "
            "grade without isolation (the agent's code then runs with your user's access to "
            "files and network)"
        )
    with tempfile.TemporaryDirectory(prefix="ksi-eval-probe-") as tmp:
        argv = eval_argv(["true"], Path(tmp), isolation=EvalIsolation.SANDBOX, binary=found)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            detail = str(exc)
        else:
            if res.returncode == 0:
                return found
            detail = res.stderr.strip() or f"exit {res.returncode}"
    raise UserInputError(
        f"grading on the host is isolated with bubblewrap, but {found} cannot create a "
        f"sandbox here ({detail}); enable unprivileged user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also "
        "kernel.apparmor_restrict_unprivileged_userns=0), or pass --eval-isolation none"
    )


def check_pass_env(names: Sequence[str]) -> None:
    """Raise :class:`UserInputError` for an ``--eval-env`` name that is not a set variable."""
    problems = passthrough_problems("--eval-env", names, "the eval command")
    if problems:
        raise UserInputError("\n".join(problems))

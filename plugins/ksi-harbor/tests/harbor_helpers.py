"""Task directories written for the tests, and a real little container for the evaluator.

``BwrapHandle`` is an :class:`ksi.interfaces.EnvironmentHandle` whose
processes run under bubblewrap with a private, writable root directory
(the host's ``/usr`` and ``/etc`` mounted read-only): Harbor's absolute paths
(``/tests``, ``/logs/verifier``, ``/solution``, ``/app``) are real paths in
that root, so test.sh and solve.sh scripts written exactly as in Harbor run
unchanged, without Docker.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from ksi.interfaces import ExecResult, Invocation
from ksi.proc import run_process

GOOD_TOML = """\
version = "1.0"

[metadata]
author_name = "KSI tests"
difficulty = "easy"
category = "programming"
tags = ["trivial"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 512
storage_mb = 1024
"""

DOCKERFILE = """\
FROM ksi-test-base:latest
WORKDIR /app
RUN echo seed > /app/seed.txt
"""

# Harbor's usual verifier shape: check the container state, write the reward.
TEST_SH = """\
#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

SOLVE_SH = """\
#!/bin/bash
cp /solution/greeting.txt hello.txt
"""


def write(path: Path, text: str, *, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def make_task(
    root: Path,
    name: str = "hello-world",
    *,
    toml: str | None = GOOD_TOML,
    instruction: str | None = "Create /app/hello.txt containing exactly 'Hello, world!'.\n",
    dockerfile: str | None = DOCKERFILE,
    test_sh: str | None = TEST_SH,
    solve_sh: str | None = SOLVE_SH,
    extra: dict[str, str] | None = None,
) -> Path:
    """A Harbor task directory; pass ``None`` to leave a file out."""
    task = root / name
    task.mkdir(parents=True, exist_ok=True)
    if toml is not None:
        write(task / "task.toml", toml)
    if instruction is not None:
        write(task / "instruction.md", instruction)
    if dockerfile is not None:
        write(task / "environment" / "Dockerfile", dockerfile)
    if test_sh is not None:
        write(task / "tests" / "test.sh", test_sh, executable=True)
    if solve_sh is not None:
        write(task / "solution" / "solve.sh", solve_sh, executable=True)
        write(task / "solution" / "greeting.txt", "Hello, world!")
    for rel, text in (extra or {}).items():
        write(task / rel, text)
    return task


def have_bwrap() -> bool:
    return shutil.which("bwrap") is not None


class BwrapHandle:
    """One attempt's environment: a private root directory, processes run in it by bwrap."""

    def __init__(self, root: Path, host_workspace: Path) -> None:
        self.root = root
        self.host_workspace = host_workspace
        self.workspace_path = "/workspace"
        self.execs: list[Invocation] = []
        root.mkdir(parents=True, exist_ok=True)
        for link in ("bin", "lib", "lib64", "sbin"):
            if Path(f"/{link}").is_symlink() and not (root / link).is_symlink():
                (root / link).symlink_to(os.readlink(f"/{link}"))
        (root / "app").mkdir(exist_ok=True)

    def _host(self, env_path: str) -> Path:
        return self.root / env_path.lstrip("/")

    def exec(
        self,
        invocation: Invocation,
        *,
        timeout: float | None,
        stdout_path: Path,
        stderr_path: Path,
        log_cap_bytes: int,
    ) -> ExecResult:
        self.execs.append(invocation)
        cwd = invocation.cwd
        if not cwd.startswith("/"):
            cwd = f"{self.workspace_path}/{cwd}"
        argv = [
            "bwrap", "--bind", str(self.root), "/",
            "--bind", str(self.host_workspace), self.workspace_path,
            "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--proc", "/proc", "--dev", "/dev", "--chdir", cwd, "--",
            *invocation.argv,
        ]  # fmt: skip
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", **invocation.env}
        res = run_process(
            argv,
            cwd=self.host_workspace,
            env=env,
            timeout=timeout,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            stdin=invocation.stdin,
            log_cap_bytes=log_cap_bytes,
        )
        return ExecResult(
            exit_code=res.exit_code,
            duration_sec=res.duration_sec,
            timed_out=res.timed_out,
            spawn_error=res.spawn_error,
            stdout_path=str(stdout_path),
            stderr_path=str(stderr_path),
        )

    def copy_in(self, host_src: Path, env_dest: str) -> None:
        dest = self._host(env_dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if host_src.is_dir():
            shutil.copytree(host_src, dest, dirs_exist_ok=True)
        else:
            shutil.copy2(host_src, dest)

    def copy_out(self, env_src: str, host_dest: Path) -> bool:
        """As every KSI environment copies out (docker cp too): symlinks stay links."""
        src = self._host(env_src)
        if not src.exists() and not src.is_symlink():
            return False
        host_dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, host_dest, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, host_dest, follow_symlinks=False)
        return True

    def halt(self) -> None:
        """Nothing to end: each exec's process tree is gone when exec returns."""

    def stop(self) -> None:
        pass

    def run_shell(self, script: str, tmp: Path, cwd: str = "/app", **kw: Any) -> ExecResult:
        """Run ``script`` with sh in the environment (an agent's or the oracle's command)."""
        return self.exec(
            Invocation(argv=("sh", "-c", script), cwd=cwd, **kw),
            timeout=60,
            stdout_path=tmp / "out.txt",
            stderr_path=tmp / "err.txt",
            log_cap_bytes=1 << 20,
        )

"""Shared by the fake agent CLIs: record how they were called, pick a scenario.

Each fake stands in for a real coding-agent CLI that cannot run here (no LLM
is reachable). It writes its argv, stdin, cwd and environment as JSON to
``$FAKE_RECORD`` so a test can assert how KSI invoked it, checks the flags
the real CLI's docs require (exiting 2 with a usage error like the real CLI
would), and prints output in the real CLI's documented format for the
scenario named by ``$FAKE_SCENARIO`` (default ``success``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, NoReturn


def read_stdin() -> str:
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    try:
        return sys.stdin.read()
    except OSError:
        return ""


def record(stdin: str, **extra: Any) -> None:
    path = os.environ.get("FAKE_RECORD")
    if not path:
        return
    data = {
        "argv": sys.argv[1:],
        "stdin": stdin,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        **extra,
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


def scenario() -> str:
    return os.environ.get("FAKE_SCENARIO", "success")


def usage_error(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def require(condition: bool, message: str) -> None:
    if not condition:
        usage_error(message)


def flag_value(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            return argv[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def emit(obj: Any) -> None:
    print(json.dumps(obj), flush=True)


def hang() -> NoReturn:
    time.sleep(600)
    sys.exit(0)

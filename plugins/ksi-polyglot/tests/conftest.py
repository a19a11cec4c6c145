"""Helpers for the polyglot plugin's tests: the fixture checkout, toolchains, the real CLI.

The fixture checkout (``fixtures/polyglot-benchmark``) is laid out exactly as Aider's
polyglot-benchmark (``<language>/exercises/practice/<exercise>/``); its exercises were
written for these tests. Python and JavaScript are always required; the other languages
run where their toolchain is installed, and ``KSI_REQUIRE_POLYGLOT=cpp,go,...`` (set by
CI) turns a missing one into a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: The fixture exercises' own tests are graded by the plugin, never collected by this suite.
collect_ignore = ["fixtures"]

CHECKOUT = Path(__file__).resolve().parent / "fixtures" / "polyglot-benchmark"
LANGS = ("cpp", "go", "java", "javascript", "python", "rust")
#: The test environment's own bin directory first: its python3 has pytest.
PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

_TOOLS = {
    "python": ("python3",),
    "javascript": ("node", "npm"),
    "go": ("go",),
    "rust": ("cargo",),
    "cpp": ("cmake", "make", "g++"),
    "java": ("javac", "java"),
}
#: Java's test libraries come from Debian (junit5, libassertj-core-java), not from PATH.
JAVA_JARS = (
    "/usr/share/java/junit-platform-console-standalone.jar",
    "/usr/share/java/assertj-core.jar",
)


def missing_toolchain(language: str) -> list[str]:
    missing = [tool for tool in _TOOLS[language] if shutil.which(tool, path=PATH) is None]
    if language == "java":
        missing += [jar for jar in JAVA_JARS if not Path(jar).is_file()]
    return missing


def required(language: str) -> bool:
    wanted = os.environ.get("KSI_REQUIRE_POLYGLOT", "")
    return language in ("python", "javascript") or language in wanted.split(",")


def available_languages() -> list[str]:
    """Languages whose toolchain is here; a required one that is missing fails the test."""
    langs = []
    for lang in LANGS:
        missing = missing_toolchain(lang)
        if missing and required(lang):
            pytest.fail(f"{lang} toolchain missing ({', '.join(missing)}) but required here")
        if not missing:
            langs.append(lang)
    return langs


def exercise(language: str, name: str) -> Path:
    return CHECKOUT / language / "exercises" / "practice" / name


def ksi_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``ksi ARGS`` in a subprocess (the plugin found by its entry point)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("KSI_LOAD_PLUGINS", "KSI_DISABLE_PLUGINS")
    }
    env["PATH"] = PATH
    return subprocess.run(
        [sys.executable, "-m", "ksi", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def run_report(tmp_path: Path, tasks: Path, agent: str, *extra: str) -> dict[str, Any]:
    report = tmp_path / f"report-{agent}.json"
    res = ksi_cli(
        "run", str(tasks), "--task-source", "polyglot", "--agent", agent,
        "--run-dir", str(tmp_path / f"run-{agent}"), "--output-json", str(report), *extra,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def copy_checkout(dest: Path, languages: list[str]) -> Path:
    """A checkout holding only ``languages`` (the fixture's exercises)."""
    for lang in languages:
        shutil.copytree(CHECKOUT / lang, dest / lang)
    return dest


@pytest.fixture(autouse=True)
def _own_cache_dir(ksi_cache_dir: Path) -> None:
    """KSI's caches (`ksi run --help`'s flags) in this test's own directory (ksi.testing)."""

"""The docs' examples run for real and print what the docs say they print.

* Every ```python block of docs/python-api.md runs in a fresh interpreter from
  the repository root (unless marked ``<!-- doctest: skip ... -->``); the
  ```text block right after it is its exact expected stdout.
* Every ```console block of docs/*.md marked ``<!-- doctest: run -->`` runs,
  command by command (lines starting with ``$ ``), in a temporary directory
  holding a copy of examples/; each must exit 0 and print the lines shown.
  In expected output, ``...`` on a line of its own matches any number of
  lines, and inside a line any text.
* docs/cli.md is what scripts/gen_cli_docs.py generates from the CLI now.
* Every option of ``ksi run`` is explained in docs/running.md.
* Relative links (and their #anchors) in the docs this suite owns resolve.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PYTHON_API = DOCS / "python-api.md"
REGENERATE = "python scripts/gen_cli_docs.py"

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_MARKER = re.compile(r"<!--\s*doctest(?::\s*([\w-]+))?[^>]*-->\s*\Z")


def _blocks(path: Path) -> list[tuple[str, str, str | None, int, str | None]]:
    """``(language, body, marker, line, following text block)`` for each fenced block."""
    text = path.read_text(encoding="utf-8")
    found = []
    matches = list(_FENCE.finditer(text))
    for i, m in enumerate(matches):
        before = text[: m.start()].rstrip("\n")
        last_line = before.rsplit("\n", 1)[-1]
        marker_match = _MARKER.search(last_line)
        marker = (marker_match.group(1) or "run") if marker_match else None
        expected = None
        if i + 1 < len(matches):
            nxt = matches[i + 1]
            if nxt.group(1) == "text" and not text[m.end() : nxt.start()].strip():
                expected = nxt.group(2)
        line = text.count("\n", 0, m.start()) + 1
        found.append((m.group(1), m.group(2), marker, line, expected))
    return found


def _python_examples() -> list[Any]:
    params = []
    for lang, body, marker, line, expected in _blocks(PYTHON_API):
        if lang != "python" or marker == "skip":
            continue
        params.append(pytest.param(body, expected, id=f"python-api.md:{line}"))
    return params


def _console_examples() -> list[Any]:
    params = []
    for path in sorted(DOCS.glob("*.md")):
        for lang, body, marker, line, _ in _blocks(path):
            if lang == "console" and marker == "run":
                params.append(pytest.param(body, id=f"{path.name}:{line}"))
    return params


def _output_pattern(expected: str) -> re.Pattern[str]:
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            pieces = [re.escape(p) for p in line.rstrip().split("...")]
            parts.append(r"[^\n]*?".join(pieces) + r"[ \t]*\n")
    return re.compile("".join(parts))


def _normalize(output: str) -> str:
    return "\n".join(line.rstrip() for line in output.splitlines()) + "\n"


def test_python_api_has_runnable_examples() -> None:
    examples = _python_examples()
    assert len(examples) >= 3, "docs/python-api.md lost its runnable examples"
    for example in examples:
        assert example.values[1] is not None, (
            f"{example.id}: a runnable example needs its expected output in a ```text block "
            "right after it"
        )


@pytest.mark.parametrize(("code", "expected"), _python_examples())
def test_python_api_example(code: str, expected: str | None) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert _normalize(result.stdout) == _normalize(expected or ""), (
        "the example printed something other than what docs/python-api.md shows:\n"
        + "".join(
            difflib.unified_diff(
                _normalize(expected or "").splitlines(True),
                _normalize(result.stdout).splitlines(True),
                "documented",
                "printed",
            )
        )
    )


def _commands(block: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
    return [(cmd, "\n".join(out) + "\n" if out else "") for cmd, out in pairs]


def test_console_examples_exist() -> None:
    assert len(_console_examples()) >= 2, "docs/running.md lost its runnable shell examples"


@pytest.mark.parametrize("block", _console_examples())
def test_console_example(block: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    assert shutil.which("ksi", path=env["PATH"]), "the ksi command is not installed"
    for command, expected in _commands(block):
        result = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert result.returncode == 0, f"$ {command}\n{result.stdout}{result.stderr}"
        if expected:
            output = _normalize(result.stdout)
            assert _output_pattern(expected).fullmatch(output), (
                f"$ {command}\nthe docs show:\n{expected}\nit printed:\n{output}"
            )


def test_output_pattern_is_strict() -> None:
    """The matcher itself: '...' skips, anything else must be printed, in order."""
    pattern = _output_pattern("a\n...\nsolved: ...\nend\n")
    assert pattern.fullmatch("a\nx\ny\nsolved: 4/4\nend\n")
    assert pattern.fullmatch("a\nsolved: 1\nend\n")
    assert not pattern.fullmatch("a\nsolved: 4/4\nend\nextra\n")
    assert not pattern.fullmatch("b\nsolved: 4/4\nend\n")
    assert not pattern.fullmatch("a\nend\nsolved: 4/4\n")


def test_cli_reference_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--stdout"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    committed = (DOCS / "cli.md").read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(True),
            result.stdout.splitlines(True),
            "docs/cli.md",
            "generated",
        )
    )
    assert committed == result.stdout, (
        f"docs/cli.md is out of date; regenerate it with `{REGENERATE}`:\n{diff}"
    )


def test_every_run_option_is_explained_in_running_md() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ksi", "run", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "KSI_LOAD_PLUGINS": "", "COLUMNS": "200"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    options = set(re.findall(r"(?m)^\s+(--[a-z][a-z0-9-]*)", result.stdout)) - {"--help"}
    assert "--agent" in options and "--retries" in options
    guide = (DOCS / "running.md").read_text(encoding="utf-8")
    missing = sorted(o for o in options if not re.search(re.escape(o) + r"(?![a-z0-9-])", guide))
    assert not missing, f"ksi run options not explained in docs/running.md: {missing}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", text)}


@pytest.mark.parametrize("name", ["running.md", "python-api.md", "cli.md", "viewing.md"])
def test_links_resolve(name: str) -> None:
    path = DOCS / name
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            problems.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    assert not problems, f"broken links in docs/{name}:\n" + "\n".join(problems)

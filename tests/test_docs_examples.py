"""The docs' examples run for real and print what the docs say they print.

The convention (docs/README.md, "Code blocks run"), for every page under docs/:

* every fenced block names its language; ``python``, ``console``, ``sh``,
  ``bash`` and ``shell`` blocks are *run*, other languages (``text``,
  ``json``, ``toml``...) are data and output;
* the runnable blocks of a page run in order, in one temporary directory
  holding a copy of examples/, and of its contents at the top (so
  ``tasks.jsonl`` is the examples' tasks file), never the repository root,
  with the ``ksi`` of this checkout on PATH:
  - ``python``: the block in a fresh interpreter; when a ```text block
    follows it directly, that is its expected stdout (exactly);
  - ``console``: each ``$ command`` line runs in ``/bin/sh``; it must exit 0
    and print (on stdout) the lines shown under it, where ``...`` on a line of
    its own matches any number of lines and inside a line any text;
  - ``sh``/``bash``/``shell``: the block as one script (``set -e``);
* a block that cannot run offline, or is not a program (a signature, a
  fragment), is marked on the line above it with
  ``<!-- doctest: skip: REASON -->``; a block whose last command is meant to
  fail says ``<!-- doctest: exit=N -->``.

Besides: docs/cli.md, and the generated option lists of running.md and
python-api.md, are what scripts/gen_cli_docs.py generates from the code now;
every option of ``ksi run`` is explained in docs/running.md; relative links
(and their #anchors) in the docs this suite owns resolve.
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

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PYTHON_API = DOCS / "python-api.md"
REGENERATE = "python scripts/gen_cli_docs.py"

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_MARKER = re.compile(r"<!--\s*doctest(?::\s*(.*?))?\s*-->\s*\Z")
#: Languages whose blocks run; every other language is data or output.
RUNNABLE = ("python", "console", "sh", "bash", "shell")
PAGES = sorted(DOCS.rglob("*.md"))


@attrs.frozen
class Block:
    page: Path
    line: int
    lang: str
    body: str
    #: The marker above the block: "" (none), "run", "skip: why", "exit=N".
    marker: str
    #: The ```text block right after it (a python block's expected stdout).
    expected: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skipped(self) -> bool:
        return self.marker.startswith("skip")

    @property
    def skip_reason(self) -> str:
        return self.marker[4:].strip(" :()") if self.skipped else ""

    @property
    def exit_code(self) -> int:
        m = re.fullmatch(r"exit\s*=\s*(\d+)", self.marker)
        return int(m.group(1)) if m else 0


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, with its marker and following text block."""
    text = path.read_text(encoding="utf-8")
    found = []
    matches = list(_FENCE.finditer(text))
    for i, m in enumerate(matches):
        before = text[: m.start()].rstrip("\n")
        marker_match = _MARKER.search(before.rsplit("\n", 1)[-1])
        marker = (marker_match.group(1) or "run").strip() if marker_match else ""
        expected = None
        if i + 1 < len(matches):
            nxt = matches[i + 1]
            if nxt.group(1) == "text" and not text[m.end() : nxt.start()].strip():
                expected = nxt.group(2)
        line = text.count("\n", 0, m.start()) + 1
        found.append(Block(path, line, m.group(1), m.group(2), marker, expected))
    return found


def _runnable(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.lang in RUNNABLE and not b.skipped]


def test_every_block_names_its_language() -> None:
    untagged = [b.where for page in PAGES for b in blocks(page) if not b.lang]
    assert not untagged, (
        "fenced blocks without a language (tag them: console/python/sh run, text/json/toml "
        "are data; docs/README.md): " + ", ".join(untagged)
    )


def test_every_skip_says_why() -> None:
    silent = [b.where for page in PAGES for b in blocks(page) if b.skipped and not b.skip_reason]
    assert not silent, "<!-- doctest: skip: REASON --> needs a reason: " + ", ".join(silent)


def test_pages_have_runnable_examples() -> None:
    assert len(_runnable(PYTHON_API)) >= 3, "docs/python-api.md lost its runnable examples"
    assert sum(1 for b in _runnable(DOCS / "running.md") if b.lang == "console") >= 2
    for b in _runnable(PYTHON_API):
        assert b.expected is not None, (
            f"{b.where}: a runnable python example needs its expected output in a ```text "
            "block right after it"
        )


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("PYTHONPATH", None)  # the checkout is importable as installed, not from cwd
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240)


def _check_python(block: Block, cwd: Path) -> None:
    result = _run([sys.executable, "-c", block.body], cwd)
    assert result.returncode == block.exit_code, f"{block.where}:\n{result.stderr}"
    if block.expected is None:
        return
    assert _normalize(result.stdout) == _normalize(block.expected), (
        f"{block.where} printed something other than what the page shows:\n"
        + "".join(
            difflib.unified_diff(
                _normalize(block.expected).splitlines(True),
                _normalize(result.stdout).splitlines(True),
                "documented",
                "printed",
            )
        )
    )


def _check_console(block: Block, cwd: Path) -> None:
    pairs = _commands(block.body)
    for i, (command, expected) in enumerate(pairs):
        want = block.exit_code if i == len(pairs) - 1 else 0
        result = _run(["/bin/sh", "-c", command], cwd)
        assert result.returncode == want, (
            f"{block.where}: $ {command}\nexit {result.returncode}, expected {want}\n"
            f"{result.stdout}{result.stderr}"
        )
        if expected:
            output = _normalize(result.stdout + (result.stderr if want else ""))
            assert _output_pattern(expected).fullmatch(output), (
                f"{block.where}: $ {command}\nthe docs show:\n{expected}\nit printed:\n{output}"
            )


def _check_script(block: Block, cwd: Path) -> None:
    result = _run(["/bin/sh", "-ec", block.body], cwd)
    assert result.returncode == block.exit_code, (
        f"{block.where}:\n{block.body}\n{result.stdout}{result.stderr}"
    )


def _pages_with_examples() -> list[Any]:
    return [pytest.param(page, id=str(page.relative_to(DOCS))) for page in PAGES if _runnable(page)]


@pytest.mark.parametrize("page", _pages_with_examples())
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    """The page's runnable blocks, in order, in one temporary directory (not the repo)."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "examples", tmp_path, dirs_exist_ok=True)  # `tasks.jsonl` works too
    assert shutil.which("ksi", path=_env()["PATH"]), "the ksi command is not installed"
    _run_blocks(_runnable(page), tmp_path)


def _run_blocks(runnable: list[Block], cwd: Path) -> None:
    """Each block in order, in ``cwd``, the way its language says."""
    for block in runnable:
        if block.lang == "python":
            _check_python(block, cwd)
        elif block.lang == "console":
            _check_console(block, cwd)
        else:
            _check_script(block, cwd)


def test_readme_first_run_runs(tmp_path: Path) -> None:
    """The README walks a new user through a first run: its tagged blocks run, in an empty dir.

    (Its untagged blocks are the demo and test commands, which CI runs as a whole.)
    """
    runnable = _runnable(ROOT / "README.md")
    assert sum(1 for b in runnable if b.lang == "console") >= 3, "the README lost its first run"
    _run_blocks(runnable, tmp_path)


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


def _commands(block: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
    return [(cmd, "\n".join(out) + "\n" if out else "") for cmd, out in pairs]


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


def test_option_lists_in_the_guides_are_up_to_date() -> None:
    """running.md's option tables, resume rules and KSI_* variables, python-api.md's
    ksi.run() options: generated from the run options' declarations, never stale."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for page in ("running.md", "python-api.md"):
        assert "<!-- generated by scripts/gen_cli_docs.py: " in (DOCS / page).read_text()


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

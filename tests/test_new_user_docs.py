"""What the README and the plugin author's guide tell a new user is true (issue 28 #13)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from run_helpers import env_without_ksi_settings

from ksi.scaffold import create_plugin

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: Where a user reads commands: the README, docs/, the generated plugin's files.
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "ksi" / "scaffold_templates").rglob("*.tmpl")),
]


def _block(marker: str) -> str:
    return README.split(f"<!-- {marker} -->", 1)[1].split(f"<!-- /{marker} -->", 1)[0]


def test_the_demo_ends_with_the_line_the_readme_says(tmp_path: Path) -> None:
    demo = _block("demo-command")
    run_args = demo.split(".venv/bin/ksi run ", 1)[1].split("```", 1)[0].split()
    said = re.search(r"says `([^`]+)` and ends with `([^`]+)`", README)
    assert said, "the README no longer says what the demo prints"
    proc = subprocess.run(
        [sys.executable, "-m", "ksi", "run", *run_args[:-1], str(tmp_path / "demo")],
        cwd=ROOT,
        env=env_without_ksi_settings(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run_args[-2] == "--run-dir"
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith(said[1]) for line in lines), proc.stdout
    assert lines[-1] == said[2], proc.stdout


def test_the_readme_activates_the_venv_before_it_says_bare_ksi() -> None:
    first_bare = README.index("$ ksi ")
    activate = README.find("source .venv/bin/activate")
    assert 0 <= activate < first_bare, "a fresh shell says `ksi: command not found`"
    assert README.count("source .venv/bin/activate") == 1  # said once


def test_the_tutorial_lists_every_generated_file(tmp_path: Path) -> None:
    tutorial = (ROOT / "docs" / "plugins" / "tutorial.md").read_text(encoding="utf-8")
    tree = tutorial.split("plugins/ksi-capitals/\n", 1)[1].split("```", 1)[0]
    listed = {line.split()[0] for line in tree.splitlines() if line.strip()}
    _, target, written = create_plugin("capitals", tmp_path / "ksi-capitals")
    assert listed == {p.relative_to(target).as_posix() for p in written}
    assert f"({len(written)} files)" in tutorial


def test_compatibility_md_calls_public_every_module_the_docs_import() -> None:
    compat = (ROOT / "docs" / "plugins" / "compatibility.md").read_text(encoding="utf-8")
    public = compat.split("Import from the documented modules:", 1)[1].split("internal.", 1)[0]
    named = set(re.findall(r"`(ksi(?:\.[a-z_]+)+)`", public))
    imported = {
        module
        for page in PAGES
        for groups in re.findall(
            r"^\s*(?:from (ksi(?:\.[a-z_]+)+) import|import (ksi(?:\.[a-z_]+)+))",
            page.read_text(encoding="utf-8"),
            flags=re.MULTILINE,
        )
        for module in groups
        if module
    }
    assert imported, "no import found: the pattern is broken"
    assert imported <= named, sorted(imported - named)


def test_docs_give_the_tasks_path_one_way() -> None:
    """TASKS (the first argument) everywhere; `--tasks-path` only where called the old spelling."""
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            if "--tasks-path" in line:
                assert "older spelling" in line, f"{page.relative_to(ROOT)}: {line}"

"""Generate docs/cli.md, the reference of every ``ksi`` command, from the Typer app.

The page is built by walking the same command tree ``ksi --help`` prints, so
it cannot drift from the code: tests/test_docs_examples.py fails when the
committed file differs from what this script produces.

    python scripts/gen_cli_docs.py           # rewrite docs/cli.md
    python scripts/gen_cli_docs.py --check   # exit 1 if docs/cli.md is out of date
    python scripts/gen_cli_docs.py --stdout  # print the page

Only KSI's built-in commands are documented: third-party plugins are not
loaded (``KSI_LOAD_PLUGINS`` is set to the empty string), so the page does
not depend on what happens to be installed.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "cli.md"
REGENERATE = "python scripts/gen_cli_docs.py"

HEADER = f"""\
# Command-line reference

<!-- Generated from the Typer app by `{REGENERATE}`. Do not edit by hand:
     tests/test_docs_examples.py fails when this file is out of date. -->

Every `ksi` command with its arguments and options, exactly as `--help`
shows them. Guides: [running.md](running.md) (`ksi run`, `report`, `regrade`,
`check`), [viewing.md](viewing.md) (`ksi view`, `show`, `compare`, `report
--format`), [your-own-tasks.md](your-own-tasks.md) (`ksi tasks`),
[evaluators.md](evaluators.md) (`ksi grade`), [agents.md](agents.md)
(`ksi agents`), [plugins.md](plugins.md) (`ksi plugins`, `install`).
Commands that plugins add are not listed here; `ksi --help` shows them.

A `KsiError` (bad input, a refused resume...) prints `error: ...` lines on
stderr and exits with code 2, with no traceback.
"""


def _cell(text: str) -> str:
    """Text that fits in one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _paragraphs(doc: str | None) -> str:
    text = inspect.cleandoc(doc or "").replace("\b\n", "")
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n") if p.strip())


def _slug(path: list[str]) -> str:
    return "-".join(path)


def _walk(command: Any, ctx: Any, path: list[str]) -> list[tuple[list[str], Any, Any]]:
    """Every visible command below ``command``, depth first, in registration order."""
    found = []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or getattr(sub, "hidden", False):
            continue
        sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
        found.append(([*path, name], sub, sub_ctx))
        if hasattr(sub, "list_commands"):
            found.extend(_walk(sub, sub_ctx, [*path, name]))
    return found


def _section(path: list[str], command: Any, ctx: Any) -> list[str]:
    level = "#" * min(len(path) + 1, 4)
    title = " ".join(path)
    out = [f"{level} {title}", ""]
    usage = " ".join([title, *command.collect_usage_pieces(ctx)])
    out += ["```text", usage, "```", ""]
    body = _paragraphs(command.help)
    if body:
        out += [body, ""]
    arguments: list[str] = []
    options: list[str] = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False) or (param.name == "help" and len(path) > 1):
            continue  # --help is on every command; listed once, for `ksi`
        record = param.get_help_record(ctx)
        if record is None:
            continue
        decl, help_text = record
        row = f"| `{_cell(decl)}` | {_cell(help_text)} |"
        (options if param.param_type_name == "option" else arguments).append(row)
    if arguments:
        out += ["| argument | description |", "|---|---|", *arguments, ""]
    if options:
        out += ["| option | description |", "|---|---|", *options, ""]
    if hasattr(command, "list_commands"):
        subs = [(name, command.get_command(ctx, name)) for name in command.list_commands(ctx)]
        out += ["| command | what it does |", "|---|---|"]
        for name, sub in subs:
            if sub is None or getattr(sub, "hidden", False):
                continue
            anchor = _slug([*path, name])
            summary = _paragraphs(sub.help).split("\n\n")[0] if sub.help else ""
            out.append(f"| [`{title} {name}`](#{anchor}) | {_cell(summary)} |")
        out.append("")
    return out


def render() -> str:
    """The complete text of docs/cli.md for the app as it is now."""
    os.environ["KSI_LOAD_PLUGINS"] = ""  # built-in commands only, whatever is installed
    import typer.main

    from ksi.cli import build_app

    root = typer.main.get_command(build_app())
    ctx = root.make_context("ksi", [], resilient_parsing=True)
    lines = [HEADER]
    lines += _section(["ksi"], root, ctx)
    for path, command, sub_ctx in _walk(root, ctx, ["ksi"]):
        lines += _section(path, command, sub_ctx)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale")
    mode.add_argument("--stdout", action="store_true", help="print instead of writing")
    args = parser.parse_args(argv)
    text = render()
    if args.stdout:
        sys.stdout.write(text)
        return 0
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"docs/cli.md is out of date; regenerate it with: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

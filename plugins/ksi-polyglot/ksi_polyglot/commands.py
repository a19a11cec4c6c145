"""``ksi polyglot ...``: building the language images."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Annotated

import typer

from ksi.errors import UserInputError
from ksi_polyglot.images import BUILD_SCRIPT

polyglot_app = typer.Typer(help="Aider's polyglot benchmark: build the language images.")


@polyglot_app.command("build-images")
def build_images(
    languages: Annotated[
        list[str] | None, typer.Argument(help="Languages to build (default: all six).")
    ] = None,
    checkout: Annotated[
        Path | None,
        typer.Option(help="The polyglot-benchmark checkout (the javascript image needs it)."),
    ] = None,
) -> None:
    """Build ksi-polyglot/<language>:latest from Debian packages on a local debootstrap base.

    Needs root, Docker and debootstrap; no registry is used. Runs the plugin's
    images/build-images.sh, which can also be run by hand.
    """
    from ksi_polyglot.languages import LANGUAGES  # here: `ksi --help` need not import attrs

    names = [n.lower() for n in languages or []]
    unknown = [n for n in names if n not in LANGUAGES]
    if unknown:
        raise UserInputError(
            f"unknown language(s) {', '.join(unknown)}; choose from {', '.join(sorted(LANGUAGES))}"
        )
    argv = ["bash", str(BUILD_SCRIPT)]
    if checkout is not None:
        argv += ["--checkout", str(checkout.resolve())]
    code = subprocess.call([*argv, *names])
    if code:
        raise typer.Exit(code)

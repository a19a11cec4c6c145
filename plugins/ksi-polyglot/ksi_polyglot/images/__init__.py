"""The language images: Debian packages only, on a local Debian base (no registry needed).

``Dockerfile.<language>`` files sit beside this module; ``build-images.sh``
makes the base with ``debootstrap`` and ``docker import``, then builds each
language's image from it. ``ksi polyglot build-images`` runs the script.
"""

from __future__ import annotations

from pathlib import Path

#: The local base every language image starts from (made by build-images.sh).
BASE_IMAGE = "ksi-polyglot/debian-base:bookworm"
HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build-images.sh"


def image_name(language: str) -> str:
    """The image a language's exercises run and are graded in."""
    return f"ksi-polyglot/{language}:latest"


def dockerfile(language: str) -> Path:
    return HERE / f"Dockerfile.{language}"

"""Shared fixtures: a clean plugin state for each test, and the example paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ksi.plugins import reset_plugins

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test loads plugins anew, with KSI_* plugin variables unset unless it sets them."""
    for var in ("KSI_LOAD_PLUGINS", "KSI_DISABLE_PLUGINS", "KSI_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    reset_plugins()
    yield
    reset_plugins()

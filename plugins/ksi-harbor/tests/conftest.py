"""Fixtures: the harbor plugin registered in-process, with a clean plugin state per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ksi_harbor.plugin
import pytest

from ksi.plugins import register_plugin, reset_plugins


@pytest.fixture
def harbor_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """KSI with only its built-ins plus this plugin (whether or not ksi-harbor is installed)."""
    monkeypatch.setenv("KSI_LOAD_PLUGINS", "")
    monkeypatch.delenv("KSI_DISABLE_PLUGINS", raising=False)
    reset_plugins()
    unregister = register_plugin(ksi_harbor.plugin, name="ksi-harbor")
    yield
    unregister()
    reset_plugins()


@pytest.fixture(autouse=True)
def _own_cache_dir(ksi_cache_dir: Path) -> None:
    """KSI's caches (`ksi run --help`'s flags) in this test's own directory (ksi.testing)."""

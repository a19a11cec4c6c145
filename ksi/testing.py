"""pytest fixtures for testing KSI plugins, shipped with KSI.

Enabled automatically through KSI's ``pytest11`` entry point; in a project
that predates it, add ``pytest_plugins = ["ksi.testing"]`` to a test module or
the top-level ``conftest.py``.

* ``ksi_fresh_plugins``: plugin state loaded anew for the test (and thrown
  away after it), with ``KSI_LOAD_PLUGINS``, ``KSI_DISABLE_PLUGINS`` and
  ``KSI_STRICT_PLUGINS`` unset.
* ``ksi_plugin``: a function ``register(obj, name=None)`` that registers an
  in-process plugin (a module, class or object with ``ksi_*`` hook functions)
  for the duration of the test and returns ``obj``::

      def test_my_source(ksi_plugin, tmp_path):
          ksi_plugin(my_plugin_module)
          source = ksi.plugins.registry("task source").get("my-source").obj()
          ...

* ``ksi_cache_dir``: ``KSI_CACHE_DIR`` set to a new empty directory of the
  test's own (returned), so a CLI the test runs (in-process or in a
  subprocess) neither reads nor writes the user's ``~/.cache/ksi``, nor
  another test's cache (``ksi run --help`` caches the flags of ``ksi run``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ksi.plugins import register_plugin, reset_plugins

T = TypeVar("T")

PLUGIN_ENV_VARS = ("KSI_LOAD_PLUGINS", "KSI_DISABLE_PLUGINS", "KSI_STRICT_PLUGINS")


@pytest.fixture
def ksi_fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plugins are loaded anew on first use in this test, and forgotten after it."""
    for var in PLUGIN_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture
def ksi_cache_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A cache directory of this test's own, in ``KSI_CACHE_DIR``."""
    path = tmp_path_factory.mktemp("ksi-cache")
    monkeypatch.setenv("KSI_CACHE_DIR", str(path))
    return path


@pytest.fixture
def ksi_plugin() -> Iterator[Callable[..., Any]]:
    """``register(obj, name=None) -> obj``: a plugin that exists for this test only."""
    undo: list[Callable[[], None]] = []

    def register(obj: T, name: str | None = None) -> T:
        undo.append(register_plugin(obj, name))
        return obj

    yield register
    for unregister in reversed(undo):
        unregister()

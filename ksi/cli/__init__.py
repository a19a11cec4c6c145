"""The ``ksi`` command line: one module per command (``<command>_cmd.py``), assembled in ``app``.

User errors (:class:`ksi.errors.KsiError`) print one line per problem on
stderr and exit with the error's code (2 for bad input); anything else is a
bug, reported in one line (``ksi --debug`` shows its traceback).
"""

from __future__ import annotations

from ksi.cli.app import build_app, main

__all__ = ["build_app", "main"]

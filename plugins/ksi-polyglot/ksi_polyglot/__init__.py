"""KSI plugin for Aider's Polyglot benchmark.

Registers the ``polyglot`` task source, the ``polyglot`` evaluator and the
``ksi polyglot`` commands through the ``ksi`` entry-point group; KSI itself
never imports this package.
"""

from __future__ import annotations

__version__ = "0.1.0"

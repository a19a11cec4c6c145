"""KSI plugin for Harbor task directories (the Terminal-Bench 2 format).

Registers the ``harbor`` task source and the ``harbor`` evaluator through the
``ksi`` entry-point group; KSI itself never imports this package.
"""

from __future__ import annotations

__version__ = "0.1.0"

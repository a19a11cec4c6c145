"""KSI plugin for ARC-AGI tasks (ARC-AGI-1 and ARC-AGI-2).

Registers the ``arc`` task source and the ``arc`` evaluator through the
``ksi`` entry-point group; KSI itself never imports this package.
"""

from __future__ import annotations

__version__ = "0.1.0"

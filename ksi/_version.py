"""KSI's version, alone in a leaf module: reading it imports nothing else.

The package metadata reads it too (``[tool.hatch.version]`` in pyproject.toml).
"""

__version__ = "0.1.0"

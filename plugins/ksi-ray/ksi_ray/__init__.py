"""KSI's ``ray`` executor: attempts run on the nodes of a Ray cluster, each exactly once."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ksi-ray")
except PackageNotFoundError:  # imported from a checkout that is not installed
    __version__ = "0.0.0+checkout"

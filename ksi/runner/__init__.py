"""Deprecated: the modules that lived here moved in KSI 0.2 (see CHANGELOG.md).

``ksi.runner.X`` still imports, with a :class:`DeprecationWarning` naming the new
module, for one release: :mod:`ksi._moved` has the table.
"""

from ksi._moved import install as _install_moved

_install_moved()

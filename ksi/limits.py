"""Bounds on values users give KSI, in a module light enough for the CLI to import."""

from __future__ import annotations

#: The longest timeout KSI accepts where a user gives one (7 days). ``poll`` takes
#: milliseconds in a C int, so a wait of more than ~24.8 days cannot be asked for
#: in one call; every place a timeout enters refuses more than this.
MAX_TIMEOUT_SEC = 7 * 24 * 3600.0

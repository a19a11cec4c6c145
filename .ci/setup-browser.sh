#!/usr/bin/env bash
# Headless Chromium (Debian's package) and Playwright for Python, for the `ksi view` browser
# tests (tests/test_view_browser.py). Playwright drives the system Chromium through
# executable_path: its own browser downloads are never used (`playwright install` is not run).
# Usage: bash .ci/setup-browser.sh [VENV ...]: Playwright goes into each VENV (made if missing,
# so the README's test command, which makes .venv, finds it there).
# Idempotent: each step is skipped when what it installs is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
if ! command -v chromium >/dev/null; then
    # Another apt user (unattended upgrades) may hold the lock for a while: wait for it.
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
chromium --version
for venv in "$@"; do
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -c 'import playwright' 2>/dev/null || "$venv/bin/pip" install -q playwright
done

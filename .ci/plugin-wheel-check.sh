#!/usr/bin/env bash
# Install one of the repository's plugins the way a third-party user would, and use it
# through its entry point: build KSI and PLUGIN_DIR into wheels, install both into a fresh
# virtual environment, check that `ksi plugins` lists the plugin with no load error, then run
# the plugin's own end-to-end check, .ci/wheel-check/<plugin>.sh, against that venv.
#
# Usage: .ci/plugin-wheel-check.sh PLUGIN_DIR    (from the repository root), e.g.
#        .ci/plugin-wheel-check.sh plugins/ksi-arc
# The plugin's check gets: ROOT (the repository), PLUGIN_DIR, WORK (a scratch directory,
# removed afterwards), VENV (the fresh venv), KSI (its ksi command).
# KSI_WHEEL_DIR, if set, holds KSI's wheel built once for several checks (.ci/run runs them
# at once): it is built there only if none is there yet.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
[ $# -eq 1 ] || { echo "usage: $0 PLUGIN_DIR" >&2; exit 2; }
PLUGIN_DIR="$(cd "$1" && pwd)"
NAME="$(basename "$PLUGIN_DIR")"
CHECK="$ROOT/.ci/wheel-check/$NAME.sh"
[ -f "$CHECK" ] || { echo "error: no end-to-end check for $NAME ($CHECK)" >&2; exit 2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log() { echo "[wheel-check $NAME] $*"; }

log "building wheels"
mkdir -p "$WORK/dist"
if [ -n "${KSI_WHEEL_DIR:-}" ]; then
    ls "$KSI_WHEEL_DIR"/ksi-*.whl >/dev/null 2>&1 \
        || "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$KSI_WHEEL_DIR" "$ROOT"
    cp "$KSI_WHEEL_DIR"/ksi-*.whl "$WORK/dist/"
else
    "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" "$ROOT"
fi
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" "$PLUGIN_DIR"
ls "$WORK/dist"

log "installing them into a fresh virtual environment"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet "$WORK"/dist/*.whl
VENV="$WORK/venv"
KSI="$VENV/bin/ksi"

log "ksi plugins"
"$KSI" plugins
"$KSI" plugins --json > "$WORK/plugins.json"
"$VENV/bin/python" - "$WORK/plugins.json" "$NAME" <<'PY'
import json, sys
data, name = json.load(open(sys.argv[1])), sys.argv[2]
found = [p for p in data["plugins"] if p["distribution"] == name]
assert len(found) == 1, f"{name} is not among the loaded plugins: {data['plugins']}"
assert not data["errors"], data["errors"]
print(f"{name} registered:", found[0]["components"])
PY

export ROOT PLUGIN_DIR WORK VENV KSI
bash "$CHECK"
log "ok"

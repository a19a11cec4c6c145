#!/usr/bin/env bash
# The `ray` executor plugin (plugins/ksi-ray), the way its users get it:
#
# 1. install it (and ray, its dependency, from PyPI) into the repository's .venv and run its
#    tests on a simulated 3-node Ray cluster: once, on Python 3.11 (they take a few minutes);
#    KSI_REQUIRE_RAY=1 makes a missing ray a failure, never a skip;
# 2. lint and type-check it;
# 3. its wheel, through .ci/plugin-wheel-check.sh like every in-repo plugin
#    (.ci/wheel-check/ksi-ray.sh: the executor registers without importing ray, then
#    docs/scale.md on one machine: `ray start --head`, `ksi run --executor ray`, `ray stop`).
#
# Usage: .ci/ray-plugin-check.sh   (from the repository root, after the README's test command
#        has made .venv). Idempotent: pip finds what is installed already.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
log() { echo "[ray-plugin-check] $*"; }

log "installing plugins/ksi-ray (and ray) into .venv"
"$VENV/bin/pip" install --quiet -e "$ROOT/plugins/ksi-ray"

log "plugin tests on a simulated 3-node cluster"
(cd "$ROOT" && KSI_REQUIRE_RAY=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    plugins/ksi-ray/tests)

log "ruff and mypy"
"$VENV/bin/ruff" check "$ROOT/plugins/ksi-ray"
"$VENV/bin/mypy" "$ROOT/plugins/ksi-ray/ksi_ray"

bash "$ROOT/.ci/plugin-wheel-check.sh" "$ROOT/plugins/ksi-ray"

#!/usr/bin/env bash
# The `ray` executor plugin (plugins/ksi-ray), the way its users get it:
#
# 1. install it (and ray, its dependency, from PyPI) into the repository's .venv and run its
#    tests on a simulated 3-node Ray cluster: once, on Python 3.11 (they take a few minutes);
#    KSI_REQUIRE_RAY=1 makes a missing ray a failure, never a skip;
# 2. lint and type-check it;
# 3. build KSI and the plugin into wheels, install both into a fresh virtual environment,
#    check the entry point registers the executor without importing ray, then follow
#    docs/scale.md on one machine: `ray start --head`, `ksi run ... --executor ray
#    --executor-option address=auto`, `ray stop`.
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

WORK="$(mktemp -d)"
started_ray=""
cleanup() {
    if [ -n "$started_ray" ]; then "$WORK/venv/bin/ray" stop --force >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

log "building wheels and installing them into a fresh virtual environment"
"$VENV/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" \
    "$ROOT" "$ROOT/plugins/ksi-ray"
"$VENV/bin/python" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet "$WORK"/dist/ksi-*.whl "$WORK"/dist/ksi_ray-*.whl
PY="$WORK/venv/bin/python"

"$WORK/venv/bin/ksi" plugins --json > "$WORK/plugins.json"
"$PY" - "$WORK/plugins.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
[plugin] = [p for p in data["plugins"] if p["distribution"] == "ksi-ray"]
assert plugin["components"].get("executor") == ["ray"], plugin
assert not data["errors"], data["errors"]
from ksi.plugins import registry
registry("executor").get("ray")
assert "ray" not in sys.modules, "loading the plugin imported ray"
print("ksi-ray registered, ray not imported:", plugin["components"])
PY

log "docs/scale.md on one machine: ray start --head, ksi run --executor ray, ray stop"
started_ray=1
"$WORK/venv/bin/ray" start --head --num-cpus 1 --resources '{"ksi_slot": 2}' \
    --disable-usage-stats >/dev/null
"$WORK/venv/bin/ksi" run "$ROOT/examples/tasks.jsonl" --agent oracle --executor ray \
    --executor-option address=auto --run-dir "$WORK/run" --output-json "$WORK/report.json"
"$PY" - "$WORK/report.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))["summary"]
assert summary["solved_tasks"] == summary["n_tasks"] > 0, summary
print(f"oracle solved {summary['solved_tasks']}/{summary['n_tasks']} through the ray executor")
PY
log "ok"

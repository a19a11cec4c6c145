#!/usr/bin/env bash
# Install the ksi-harbor plugin the way a third-party user would, and use it through its
# entry point: build KSI and plugins/ksi-harbor into wheels, install both into a fresh
# virtual environment, list plugins, validate the example tasks, and run the `oracle`
# agent on them in Docker, graded by the plugin's `harbor` evaluator.
#
# Usage: .ci/harbor-wheel-check.sh   (from the repository root; needs Docker and the
#        locally built ksi-test/busybox image, which .ci/build-test-images.sh makes)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log() { echo "[harbor-wheel-check] $*"; }

log "building wheels"
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" "$ROOT" "$ROOT/plugins/ksi-harbor"
ls "$WORK/dist"

log "installing them into a fresh virtual environment"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet "$WORK"/dist/ksi-*.whl "$WORK"/dist/ksi_harbor-*.whl
KSI="$WORK/venv/bin/ksi"

log "ksi plugins"
"$KSI" plugins
"$KSI" plugins --json > "$WORK/plugins.json"
"$WORK/venv/bin/python" - "$WORK/plugins.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
[harbor] = [p for p in data["plugins"] if p["distribution"] == "ksi-harbor"]
assert harbor["components"].get("task source") == ["harbor"], harbor
assert harbor["components"].get("evaluator") == ["harbor"], harbor
assert not data["errors"], data["errors"]
print("ksi-harbor registered:", harbor["components"])
PY

log "validating the example tasks"
"$KSI" tasks validate "$ROOT/plugins/ksi-harbor/examples" --task-source harbor

log "running the oracle on the example tasks in docker"
bash "$ROOT/.ci/build-test-images.sh"
"$KSI" run --task-source harbor --tasks-path "$ROOT/plugins/ksi-harbor/examples" \
    --agent oracle --environment docker --environment-option user=image --network none \
    --run-dir "$WORK/run" --output-json "$WORK/report.json"
"$WORK/venv/bin/python" - "$WORK/report.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
summary = report["summary"]
assert summary["solved_tasks"] == 2 and summary["n_tasks"] == 2, summary
by_task = {a["task_id"]: a for a in report["attempts"]}
for task_id, score_from in (("hello-world", "reward.txt"), ("partial-credit", "reward.json:reward")):
    ev = by_task[task_id]["eval"]
    assert by_task[task_id]["score"] == 1.0, by_task[task_id]
    assert ev["details"]["score_from"] == score_from, ev
assert by_task["partial-credit"]["eval"]["details"]["rewards"] == {
    "reward": 1.0, "a_correct": 1.0, "b_correct": 1.0
}
print("both example tasks solved through the entry point; rewards:",
      by_task["partial-credit"]["eval"]["details"]["rewards"])
PY
log "the nop agent on the same tasks: the verifiers must fail it"
"$KSI" run --task-source harbor --tasks-path "$ROOT/plugins/ksi-harbor/examples" \
    --agent nop --environment docker --environment-option user=image --network none \
    --run-dir "$WORK/run-nop" --output-json "$WORK/report-nop.json" >/dev/null
"$WORK/venv/bin/python" - "$WORK/report-nop.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
scores = sorted(a["score"] for a in report["attempts"])
assert scores == [0.0, 0.0], scores
print("nop scored", scores)
PY
log "ok"

#!/usr/bin/env bash
# ksi-harbor from its wheel (called by .ci/plugin-wheel-check.sh, which sets ROOT, WORK,
# VENV, KSI): validate the example tasks, run the `oracle` agent on them in Docker graded by
# the `harbor` evaluator, and the `nop` agent, which the verifiers must fail.
# Needs Docker and the locally built ksi-test/busybox image (.ci/build-test-images.sh).
set -euo pipefail
log() { echo "[wheel-check ksi-harbor] $*"; }

"$VENV/bin/python" - "$WORK/plugins.json" <<'PY'
import json, sys
[harbor] = [p for p in json.load(open(sys.argv[1]))["plugins"] if p["distribution"] == "ksi-harbor"]
assert harbor["components"].get("task source") == ["harbor"], harbor
assert harbor["components"].get("evaluator") == ["harbor"], harbor
PY

log "validating the example tasks"
"$KSI" tasks validate "$ROOT/plugins/ksi-harbor/examples" --task-source harbor

log "running the oracle on the example tasks in docker"
# Containers start and stop from here on: under the host-mounts lock, as the tests marked
# docker run (tests/host_mounts.py), so a bubblewrap sandbox another suite starts meanwhile
# never meets a mount appearing (.ci/run runs this check beside others). Released at exit.
lock="${TMPDIR:-/tmp}/ksi-tests-host-mounts.lock"
[ -e "$lock" ] || : > "$lock"
exec 9< "$lock"
flock 9
bash "$ROOT/.ci/build-test-images.sh"
"$KSI" run --task-source harbor --tasks-path "$ROOT/plugins/ksi-harbor/examples" \
    --agent oracle --environment docker --environment-option user=image --network none \
    --run-dir "$WORK/run" --output-json "$WORK/report.json"
"$VENV/bin/python" - "$WORK/report.json" <<'PY'
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
"$VENV/bin/python" - "$WORK/report-nop.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
scores = sorted(a["score"] for a in report["attempts"])
assert scores == [0.0, 0.0], scores
print("nop scored", scores)
PY

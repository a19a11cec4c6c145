#!/usr/bin/env bash
# ksi-polyglot from its wheel (called by .ci/plugin-wheel-check.sh, which sets ROOT, WORK,
# VENV, KSI): on the fixture checkout (Aider's layout, exercises written for KSI's tests),
# the oracle solves every exercise of every language whose toolchain is here and nop none,
# graded on the host. Python's tests need pytest for the `python3` on PATH: the venv's.
set -euo pipefail
log() { echo "[wheel-check ksi-polyglot] $*"; }
CHECKOUT="$ROOT/plugins/ksi-polyglot/tests/fixtures/polyglot-benchmark"
"$VENV/bin/pip" install --quiet pytest
export PATH="$VENV/bin:$PATH"

langs=python,javascript
command -v cmake >/dev/null && command -v g++ >/dev/null && langs="$langs,cpp"
command -v go >/dev/null && langs="$langs,go"
command -v cargo >/dev/null && langs="$langs,rust"
[ -f /usr/share/java/junit-platform-console-standalone.jar ] && command -v javac >/dev/null \
    && langs="$langs,java"
log "languages with a toolchain here: $langs"
"$KSI" tasks validate "$CHECKOUT" --task-source polyglot

check() {  # report.json, expected score of every attempt, languages
    "$VENV/bin/python" - "$@" <<'PY'
import json, sys
report, want, langs = json.load(open(sys.argv[1])), float(sys.argv[2]), sys.argv[3].split(",")
scores = {a["task_id"]: a["score"] for a in report["attempts"]}
expected = {f"{lang}.{name}" for lang in langs for name in ("digit-sum", "word-reverse")}
assert set(scores) == expected, (sorted(scores), sorted(expected))
assert set(scores.values()) == {want}, scores
print(f"{len(scores)} exercises, every one scored {want}")
PY
}
for agent in oracle nop; do
    log "$agent"
    "$KSI" run "$CHECKOUT" --task-source polyglot --language "$langs" --agent "$agent" \
        --run-dir "$WORK/$agent" --output-json "$WORK/$agent.json" >/dev/null
    [ "$agent" = oracle ] && want=1.0 || want=0.0
    check "$WORK/$agent.json" "$want" "$langs"
done

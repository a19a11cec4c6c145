#!/usr/bin/env bash
# Install the real agent CLIs the end-to-end tests run, at the versions KSI was tested with
# (the table in ksi/agents/tested_versions.py, read here so there is one list), into one
# directory of their own so they pollute neither the system nor the test venv:
#
#   $KSI_AGENT_CLIS_DIR/node/        npm CLIs (npm install -g --prefix)
#   $KSI_AGENT_CLIS_DIR/py/<pkg>/    one venv per Python CLI (aider and mini pin different deps)
#   $KSI_AGENT_CLIS_DIR/bin/<binary> a link to each CLI: put this directory on PATH
#
# The default directory is /opt/ksi-agent-clis, outside any home directory, because the
# sandbox environment hides /root and /home from the agent. Idempotent: a CLI already at its
# pinned version is left alone, so a second run costs a few seconds.
#
# Usage: .ci/install-agent-clis.sh [AGENT...]   (default: every CLI in the table)
set -euo pipefail
cd "$(dirname "$0")/.."

DIR="${KSI_AGENT_CLIS_DIR:-/opt/ksi-agent-clis}"
PYTHON="${KSI_AGENT_CLIS_PYTHON:-python3}"
log() { echo "[install-agent-clis] $*"; }

want=" $* "
mkdir -p "$DIR/bin" "$DIR/node" "$DIR/py"

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ] || ! command -v npm >/dev/null 2>&1; then
    echo "error: the agent CLIs need Node.js >= 20 with npm (found: $(node --version 2>&1 || echo none))" >&2
    exit 1
fi

link() {  # link BINARY TARGET
    ln -sfn "$2" "$DIR/bin/$1"
}

while IFS=$'\t' read -r registry package version binary agent; do
    if [ "$#" -gt 0 ] && [[ "$want" != *" $agent "* ]]; then
        continue
    fi
    case "$registry" in
    npm)
        manifest="$DIR/node/lib/node_modules/$package/package.json"
        have=$(node -p "require('$manifest').version" 2>/dev/null || true)
        if [ "$have" = "$version" ]; then
            log "$package $version already installed"
        else
            log "installing $package@$version (npm)"
            npm install -g --silent --no-fund --no-audit --prefix "$DIR/node" \
                "$package@$version" >/dev/null
        fi
        link "$binary" "$DIR/node/bin/$binary"
        ;;
    pypi)
        venv="$DIR/py/$package"
        have=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$package'))" \
            2>/dev/null || true)
        if [ "$have" = "$version" ]; then
            log "$package $version already installed"
        else
            log "installing $package==$version (PyPI, venv $venv)"
            rm -rf "$venv"
            "$PYTHON" -m venv "$venv"
            "$venv/bin/pip" install -q --disable-pip-version-check "$package==$version" 2>&1 \
                | { grep -v "^WARNING: Location" || true; }
        fi
        link "$binary" "$venv/bin/$binary"
        ;;
    *)
        echo "error: unknown registry $registry for $package" >&2
        exit 1
        ;;
    esac
    [ -x "$DIR/bin/$binary" ] \
        || { echo "error: $package installed no executable $binary" >&2; exit 1; }
done < <(python3 ksi/agents/tested_versions.py)

log "ready: $DIR/bin"

#!/usr/bin/env bash
# Build ksi-test/agent-clis, the image the docker real-CLI tests run agents in, without a
# registry (Docker Hub is not reachable in CI): the busybox root of build-test-images.sh plus
# the real CLIs that .ci/install-agent-clis.sh installed, copied from $KSI_AGENT_CLIS_DIR:
#
#   /usr/local/bin/codex   Codex's own static (musl) binary from its npm package, which the
#                          package's node launcher (bin/codex.js) would exec: no node needed
#   /usr/local/bin/rg      the ripgrep Codex ships next to it
#   /usr/local/bin/claude  Claude Code's native binary (bin/claude.exe in its npm package),
#                          linked against glibc: the host's loader and the libraries `ldd`
#                          lists come along, as do bash (Claude Code's Bash tool wants bash
#                          or zsh, busybox has neither) and the libraries bash needs
#   /usr/local/bin/gemini  Gemini CLI, a node program: its npm package (a bundle, ~100 MB)
#                          and the host's node binary with the libraries `ldd` lists
#
# The tag is a hash of every file copied and of this recipe, so a repeated CI step finds the
# image and does nothing; ksi-test/agent-clis:latest points at the current one.
#
# Usage: .ci/build-agent-cli-image.sh   (after .ci/install-agent-clis.sh; needs node on PATH)
set -euo pipefail

DOCKER="${KSI_DOCKER_BINARY:-docker}"
BUSYBOX="${KSI_TEST_BUSYBOX:-/bin/busybox}"
DIR="${KSI_AGENT_CLIS_DIR:-/opt/ksi-agent-clis}"
NAME=ksi-test/agent-clis
RECIPE_VERSION=2

log() { echo "[build-agent-cli-image] $*"; }
source "$(dirname "$0")/busybox-root.sh"
check_busybox

modules="$DIR/node/lib/node_modules"
codex_vendor="$modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl"
codex="$codex_vendor/bin/codex"
rg="$codex_vendor/codex-path/rg"
claude="$modules/@anthropic-ai/claude-code/bin/claude.exe"
gemini_pkg="$modules/@google/gemini-cli"
bash_bin=$(command -v bash)
node_bin=$(command -v node || true)
for f in "$codex" "$rg" "$claude" "$gemini_pkg/bundle/gemini.js" "$node_bin"; do
    [ -n "$f" ] && [ -e "$f" ] || {
        echo "error: ${f:-node} is missing; run .ci/install-agent-clis.sh codex claude-code gemini-cli" >&2
        exit 1
    }
done

# Every shared library the glibc programs load, and their loader, as the host has them.
mapfile -t libs < <(ldd "$claude" "$bash_bin" "$node_bin" | grep -o '/[^ ]*\.so[^ ]*' | sort -u)

started=$(date +%s)
hash=$( { sha256sum "$BUSYBOX" "$codex" "$rg" "$claude" "$bash_bin" "$node_bin" "${libs[@]}" \
              | cut -d' ' -f1
          (cd "$gemini_pkg" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
          echo "recipe $RECIPE_VERSION"; } | sha256sum | cut -c1-12)
tag="$NAME:$hash"

if "$DOCKER" image inspect "$tag" >/dev/null 2>&1; then
    log "$tag already built"
else
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    busybox_root "$root"
    mkdir -p "$root/usr/local/bin"
    cp "$codex" "$rg" "$root/usr/local/bin/"
    cp "$claude" "$root/usr/local/bin/claude"
    rm -f "$root/bin/bash" && cp "$bash_bin" "$root/bin/bash"
    # Node programs start with `#!/usr/bin/env node`; busybox has env in /bin only.
    mkdir -p "$root/usr/bin" "$root/usr/local/lib/node_modules/@google"
    ln -s /bin/busybox "$root/usr/bin/env"
    cp "$node_bin" "$root/usr/local/bin/node"
    cp -r "$gemini_pkg" "$root/usr/local/lib/node_modules/@google/"
    ln -s ../lib/node_modules/@google/gemini-cli/bundle/gemini.js "$root/usr/local/bin/gemini"
    for lib in "${libs[@]}"; do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . \
        | "$DOCKER" import -c 'ENV PATH=/usr/local/bin:/bin' -c 'CMD ["/bin/sh"]' - "$tag" >/dev/null
    log "built $tag in $(( $(date +%s) - started ))s"
fi
"$DOCKER" tag "$tag" "$NAME:latest"
log "$NAME:latest -> $tag"

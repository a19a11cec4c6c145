#!/usr/bin/env bash
# Build the polyglot language images from Debian packages only, without any registry:
#
#   1. ksi-polyglot/debian-base:bookworm: a minimal Debian 12 root made by debootstrap
#      from the Debian mirror, loaded with `docker import` (skipped when it exists);
#   2. ksi-polyglot/<language>:latest for each language asked for, FROM that base,
#      installing the language's Debian packages (Dockerfile.<language> beside this script).
#
# Usage: build-images.sh [--checkout DIR] [LANGUAGE...]    (default: all six languages)
#   --checkout DIR: the polyglot-benchmark checkout; the javascript image installs the npm
#                   packages of its exercises' package.json (else the one given by
#                   KSI_POLYGLOT_PACKAGE_JSON).
# Needs: root, a running Docker engine, debootstrap (apt-get install debootstrap).
# Mirror: KSI_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DOCKER="${KSI_DOCKER_BINARY:-docker}"
MIRROR="${KSI_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE=ksi-polyglot/debian-base:bookworm
checkout=""
languages=()
while [ $# -gt 0 ]; do
    case "$1" in
        --checkout) checkout="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) languages+=("$1"); shift ;;
    esac
done
[ ${#languages[@]} -gt 0 ] || languages=(python javascript go rust cpp java)
log() { echo "[polyglot-images] $*"; }

if "$DOCKER" image inspect "$BASE" >/dev/null 2>&1; then
    log "$BASE already built"
else
    command -v debootstrap >/dev/null || {
        echo "error: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    log "debootstrap bookworm from $MIRROR (a few minutes)"
    debootstrap --variant=minbase bookworm "$root" "$MIRROR" >/dev/null
    echo "deb $MIRROR bookworm main" > "$root/etc/apt/sources.list"
    tar --numeric-owner -C "$root" -cf - . \
        | "$DOCKER" import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            -c 'ENV DEBIAN_FRONTEND=noninteractive' -c 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
    rm -rf "$root"
    trap - EXIT
    log "built $BASE"
fi

for lang in "${languages[@]}"; do
    file="$HERE/Dockerfile.$lang"
    [ -f "$file" ] || { echo "error: no Dockerfile for language '$lang' ($file)" >&2; exit 2; }
    context=$(mktemp -d)
    # The host's extra CA certificates go into the build context (an image that downloads
    # through an intercepting proxy needs them); the directory exists even when empty.
    mkdir -p "$context/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$context/ca-certificates/" 2>/dev/null || true
    if [ "$lang" = javascript ]; then
        pkg="${KSI_POLYGLOT_PACKAGE_JSON:-}"
        if [ -z "$pkg" ] && [ -n "$checkout" ]; then
            pkg=$(ls "$checkout"/javascript/exercises/practice/*/package.json 2>/dev/null | head -n 1)
        fi
        [ -n "$pkg" ] && [ -f "$pkg" ] || {
            echo "error: the javascript image needs an exercise's package.json: --checkout DIR" >&2
            exit 2; }
        cp "$pkg" "$context/package.json"
    fi
    log "building ksi-polyglot/$lang:latest"
    "$DOCKER" build -q -t "ksi-polyglot/$lang:latest" -f "$file" "$context" >/dev/null
    rm -rf "$context"
    log "built ksi-polyglot/$lang:latest"
done

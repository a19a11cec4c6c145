#!/usr/bin/env bash
# Build the images the docker tests and benchmark use, without a registry (Docker Hub is not
# reachable in CI): a root filesystem made from the static busybox binary, loaded with
# `docker import`. The tag carries a hash of the binary and of this recipe, so a repeated CI
# step finds the image and does nothing; `ksi-test/busybox:latest` points at the current one.
#
#   ksi-test/busybox   /bin/sh and ~300 busybox applets (sleep, kill, nc, wget, id...), ~2 MB
#
# Usage: .ci/build-test-images.sh   (needs a running Docker engine and /bin/busybox)
set -euo pipefail

DOCKER="${KSI_DOCKER_BINARY:-docker}"
BUSYBOX="${KSI_TEST_BUSYBOX:-/bin/busybox}"
NAME=ksi-test/busybox
RECIPE_VERSION=1

log() { echo "[build-test-images] $*"; }

source "$(dirname "$0")/busybox-root.sh"
check_busybox
hash=$( { sha256sum "$BUSYBOX" | cut -d' ' -f1; echo "recipe $RECIPE_VERSION"; } \
    | sha256sum | cut -c1-12)
tag="$NAME:$hash"

if "$DOCKER" image inspect "$tag" >/dev/null 2>&1; then
    log "$tag already built"
else
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    busybox_root "$root"
    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . \
        | "$DOCKER" import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - "$tag" >/dev/null
    log "built $tag"
fi
"$DOCKER" tag "$tag" "$NAME:latest"
log "$NAME:latest -> $tag"

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

if [ ! -x "$BUSYBOX" ] || ! "$BUSYBOX" --list >/dev/null 2>&1; then
    echo "error: $BUSYBOX is missing; install busybox-static (apt-get install busybox-static)" >&2
    exit 1
fi
hash=$( { sha256sum "$BUSYBOX" | cut -d' ' -f1; echo "recipe $RECIPE_VERSION"; } \
    | sha256sum | cut -c1-12)
tag="$NAME:$hash"

if "$DOCKER" image inspect "$tag" >/dev/null 2>&1; then
    log "$tag already built"
else
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,root,workspace}
    chmod 1777 "$root/tmp"
    cp "$BUSYBOX" "$root/bin/busybox"
    for applet in $("$root/bin/busybox" --list); do
        [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' \
        > "$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . \
        | "$DOCKER" import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - "$tag" >/dev/null
    log "built $tag"
fi
"$DOCKER" tag "$tag" "$NAME:latest"
log "$NAME:latest -> $tag"

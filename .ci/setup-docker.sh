#!/usr/bin/env bash
# Install and start what the docker and sandbox tests need, on a fresh Debian 12 as root:
# the Docker engine (docker.io), bubblewrap, and busybox-static (the test image's only binary).
# Idempotent: installs only what is missing and starts dockerd only when it is not answering.
set -euo pipefail

log() { echo "[setup-docker] $*"; }

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 || need+=(busybox-static)
if [ "${#need[@]}" -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
    log "dockerd already running"
else
    log "starting dockerd (log: /tmp/dockerd.log)"
    # setsid: dockerd must outlive this script and not get the CI shell's signals.
    setsid dockerd >/tmp/dockerd.log 2>&1 < /dev/null &
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        log "dockerd did not come up within 60s; last log lines:"
        tail -n 30 /tmp/dockerd.log >&2 || true
        exit 1
    fi
fi
log "docker $(docker version --format '{{.Server.Version}}') ready; $(bwrap --version)"

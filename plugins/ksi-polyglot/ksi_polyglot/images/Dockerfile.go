# Go exercises: Debian's Go toolchain (no module downloads: GOPROXY=off in the test command).
FROM ksi-polyglot/debian-base:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends golang-go ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /workspace

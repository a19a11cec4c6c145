# C++ exercises: g++, CMake and make from Debian.
FROM ksi-polyglot/debian-base:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends g++ cmake make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /workspace

# JavaScript exercises: node and npm from Debian; jest and babel installed once in
# /npm-install from the package.json of the benchmark's exercises (copied into the build
# context by build-images.sh), linked into each exercise by the test command.
FROM ksi-polyglot/debian-base:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
    && rm -rf /var/lib/apt/lists/*
# The host's extra CA certificates (build-images.sh copies /usr/local/share/ca-certificates),
# for an npm registry reached through an intercepting proxy; usually none.
COPY ca-certificates/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
COPY package.json /npm-install/package.json
RUN cd /npm-install && npm install --no-audit --no-fund --loglevel=error
WORKDIR /workspace

# Java exercises: a JDK, JUnit 5 and AssertJ, all from Debian (the tests run through JUnit's
# console launcher: see ksi_polyglot/languages.py for why not ./gradlew).
FROM ksi-polyglot/debian-base:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends default-jdk-headless junit5 \
        libassertj-core-java \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /workspace

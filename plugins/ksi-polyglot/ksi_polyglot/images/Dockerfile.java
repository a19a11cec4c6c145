# Java exercises: a JDK and Gradle from Debian, with JUnit 5 and AssertJ from Debian too
# (the exercises' own gradlew would download Gradle and Maven Central jars, which an
# offline image cannot; see the plugin README for what this means for the java exercises).
FROM ksi-polyglot/debian-base:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends default-jdk-headless gradle \
        junit5 libassertj-core-java \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /workspace

"""The benchmark's six languages: how each one's tests run, as Aider's benchmark runs them.

Each test command runs in the exercise directory (the graded copy of
``repo/``) with a POSIX shell, on the host or in the language's image:

* python: ``pytest``;
* javascript: ``npm run test`` (the exercise's ``package.json`` says what:
  ``jest ./*``) with a shared ``node_modules`` linked in, as Aider's
  ``npm-test.sh`` does (the evaluator links it on the host; the image holds
  one at ``/npm-install/node_modules``);
* go: ``go test ./...``;
* rust: ``cargo test -- --include-ignored`` (the benchmark runs ignored tests too);
* cpp: ``cmake`` then ``make`` (the exercises' CMake files run the tests as a
  build step) then ``ctest``, in a fresh ``build/``;
* java: the tests compiled with ``javac`` and run by the JUnit 5 console
  launcher, with JUnit 5 and AssertJ from Debian (``/usr/share/java``), tests'
  ``@Disabled`` annotations removed first, as Aider does. Aider runs
  ``./gradlew test``, whose wrapper downloads Gradle and the tests' jars from
  Maven Central; Debian's Gradle (4.4) cannot run JUnit 5 and nothing may be
  downloaded here, so the same tests run through JUnit's own launcher.

Every command first checks that its toolchain is there and exits with
:data:`NO_TOOLCHAIN_EXIT` when it is not: that attempt is unscored (the
machine's fault), never a 0 (the agent's). Output goes to stdout only
(``exec 2>&1``), in order, because the whole of it is what a second try is shown.
"""

from __future__ import annotations

import re
import shlex

import attrs

#: Exit status of a test command whose toolchain is missing (not a test failure).
NO_TOOLCHAIN_EXIT = 97
#: Seconds a test command may run (Aider's limit: 3 minutes).
TEST_TIMEOUT_SEC = 180.0


def _need(check: str, what: str) -> str:
    message = shlex.quote(
        f"ksi-polyglot: {what} is not installed here; install it or grade in the language image"
    )
    return f"{check} || {{ echo {message} >&2; exit {NO_TOOLCHAIN_EXIT}; }}"


@attrs.frozen
class Language:
    name: str
    #: The shell command that runs the exercise's tests (exit 0: all pass).
    test_command: str
    #: Debian packages that provide the toolchain (what the language's image installs).
    debian_packages: tuple[str, ...]

    def unskip(self, rel_path: str, text: str) -> str:
        """A test file's text with the tests the exercise skips turned on (Aider does this)."""
        if self.name == "javascript" and rel_path.endswith(".js"):
            return re.sub(r"\bxtest\(", "test(", text)
        if self.name == "java" and rel_path.endswith(".java"):
            return re.sub(r"@Disabled\([^)]*\)\s*\n", "", text)
        return text


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            "python",
            "exec 2>&1; "
            + _need("python3 -c 'import pytest' 2>/dev/null", "pytest (for python3)")
            + "; python3 -m pytest",
            ("python3", "python3-pytest"),
        ),
        Language(
            "javascript",
            "exec 2>&1; "
            + _need("command -v npm >/dev/null", "npm")
            + "; if [ ! -e node_modules ] && [ -d /npm-install/node_modules ]; then "
            "ln -s /npm-install/node_modules node_modules; fi; "
            + _need("[ -d node_modules ]", "node_modules (jest)")
            + "; npm run test",
            ("nodejs", "npm"),
        ),
        Language(
            "go",
            "exec 2>&1; "
            + _need("command -v go >/dev/null", "go")
            + "; GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=off go test ./...",
            ("golang-go",),
        ),
        Language(
            "rust",
            "exec 2>&1; "
            + _need("command -v cargo >/dev/null", "cargo")
            + "; cargo test --offline -- --include-ignored",
            ("cargo",),
        ),
        Language(
            "cpp",
            "exec 2>&1; "
            + _need("command -v cmake >/dev/null && command -v make >/dev/null", "cmake/make")
            + "; rm -rf build && mkdir build && cd build && cmake -G 'Unix Makefiles' .. "
            "&& make && ctest --output-on-failure",
            ("g++", "cmake", "make"),
        ),
        Language(
            "java",
            "exec 2>&1; "
            + _need("command -v javac >/dev/null", "javac (a JDK)")
            + "; J=/usr/share/java; "
            + _need(
                '[ -f "$J/junit-platform-console-standalone.jar" ]', "JUnit 5 (Debian's junit5)"
            )
            + "; "
            + _need('[ -f "$J/assertj-core.jar" ]', "AssertJ (libassertj-core-java)")
            + "; rm -rf build/ksi-classes && mkdir -p build/ksi-classes && "
            'javac -d build/ksi-classes -cp "$J/junit-jupiter-api.jar:$J/assertj-core.jar:'
            '$J/apiguardian.jar" $(find src -name "*.java") && '
            'java -jar "$J/junit-platform-console-standalone.jar" --class-path '
            '"build/ksi-classes:$J/assertj-core.jar" --scan-class-path --disable-banner '
            "--details=tree --fail-if-no-tests",
            ("default-jdk-headless", "junit5", "libassertj-core-java"),
        ),
    )
}

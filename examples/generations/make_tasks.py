"""Writes tasks.jsonl and forum-tasks.jsonl for the generations demo (run it after
editing the tasks below).

Each task's tests check a detail the prompt does not give (the house
greeting, the gateway's port, the log level...): a first attempt guesses,
fails, and only the eval output says what was expected. The `version` task
is guessed right at once.

The forum demo's tasks share a convention, the house date format: the
`release-date` tests say what they wanted (``'2024-01-02' != '2024/01/02'``),
but the `changelog` tests compare a hash and say only that the heading is
not written the house way. Its own notes never tell the `changelog` task the
format; a forum post carried across tasks does.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def _test(module: str, name: str, check: str) -> str:
    return (
        f'"""Checks for {module}.py (run: python3 -m unittest -q test_{module})."""\n\n'
        "import unittest\n\n"
        f"import {module}\n\n\n"
        "class Check(unittest.TestCase):\n"
        f"    def test_{name}(self) -> None:\n"
        f"        {check}\n"
    )


TASKS = [
    (
        "greet",
        "Implement greet(name) in greet.py: it returns the house greeting for `name`.",
        "greet",
        '"""The house greeting."""\n\n\ndef greet(name: str) -> str:\n'
        "    raise NotImplementedError\n",
        'self.assertEqual(greet.greet("Ada"), "Howdy, Ada!")',
        '"""The house greeting."""\n\n\ndef greet(name: str) -> str:\n'
        '    return f"Howdy, {name}!"\n',
    ),
    (
        "gateway-port",
        "Set PORT in config.py to the port the gateway listens on.",
        "config",
        '"""Service settings."""\n\nPORT = None\n',
        "self.assertEqual(config.PORT, 8443)",
        '"""Service settings."""\n\nPORT = 8443\n',
    ),
    (
        "log-level",
        "Set LEVEL in logging_conf.py to the log level production runs at.",
        "logging_conf",
        '"""Logging settings."""\n\nLEVEL = None\n',
        'self.assertEqual(logging_conf.LEVEL, "warning")',
        '"""Logging settings."""\n\nLEVEL = "warning"\n',
    ),
    (
        "version",
        "Set VERSION in version.py to the first release, 1.0.0.",
        "version",
        '"""The release."""\n\nVERSION = None\n',
        'self.assertEqual(version.VERSION, "1.0.0")',
        '"""The release."""\n\nVERSION = "1.0.0"\n',
    ),
]


_HEADING = "1.0.0 (2024/01/02)"
_HASHED = (
    "import hashlib\n\n"
    "        digest = hashlib.sha256(changelog.HEADING.encode()).hexdigest()\n"
    f'        self.assertTrue(digest == "{hashlib.sha256(_HEADING.encode()).hexdigest()}", '
    '"HEADING is not written the house way")'
)

FORUM_TASKS = [
    (
        "release-date",
        "Set RELEASED in release.py to the release date, 2 January 2024, written the house way.",
        "release",
        '"""The release."""\n\nRELEASED = None\n',
        'self.assertEqual(release.RELEASED, "2024/01/02")',
        '"""The release."""\n\nRELEASED = "2024/01/02"\n',
    ),
    (
        "changelog",
        "Set HEADING in changelog.py to the changelog heading of release 1.0.0, dated "
        "2 January 2024 and written the house way: the version, then the date in brackets.",
        "changelog",
        '"""The changelog."""\n\nHEADING = None\n',
        _HASHED,
        f'"""The changelog."""\n\nHEADING = "{_HEADING}"\n',
    ),
    (
        "license",
        "Set LICENSE in meta.py to the project's licence, MIT.",
        "meta",
        '"""Project metadata."""\n\nLICENSE = None\n',
        'self.assertEqual(meta.LICENSE, "MIT")',
        '"""Project metadata."""\n\nLICENSE = "MIT"\n',
    ),
]


def _write(name: str, tasks: list[tuple[str, str, str, str, str, str]]) -> None:
    lines = []
    for task_id, prompt, module, stub, check, solution in tasks:
        record = {
            "task_id": task_id,
            "prompt": prompt,
            "files": {f"{module}.py": stub, f"test_{module}.py": _test(module, "value", check)},
            "eval": {"command": f"python3 -m unittest -q test_{module}", "timeout_sec": 60},
            "solution": {"files": {f"{module}.py": solution}},
        }
        lines.append(json.dumps(record))
    Path(__file__).with_name(name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    _write("tasks.jsonl", TASKS)
    _write("forum-tasks.jsonl", FORUM_TASKS)


if __name__ == "__main__":
    main()

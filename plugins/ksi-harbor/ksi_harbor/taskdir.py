"""Reading one Harbor task directory, and saying precisely what is wrong with a bad one.

A Harbor task is a directory::

    my-task/
      instruction.md        the prompt (required, non-empty)
      task.toml             timeouts, resources, metadata (required)
      environment/          Dockerfile (required unless [environment].docker_image is set)
      tests/test.sh         the verifier; writes /logs/verifier/reward.txt or reward.json
      solution/solve.sh     optional reference solution (used by the ``oracle`` agent)

Every problem in a directory is collected (never only the first), each naming
the file and, for ``task.toml``, the ``$.section.key`` path, so a user can fix
a whole dataset in one pass. Keys KSI does not know are ignored, as Harbor
ignores them; deprecated spellings (``version``, ``memory = "4G"``,
``storage = "10G"``) are read as Harbor reads them. A symlink anywhere in the
directory that leads out of it is a problem, and nothing of such a task is
read: its instruction, tests or solution would be whatever host file it names.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from ksi.models import Problem
from ksi.nesting import toml_depth_problem
from ksi.tasks.workspace_rules import link_problems

#: Harbor's defaults when task.toml leaves a value out.
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0
DEFAULT_AGENT_TIMEOUT_SEC = 600.0
DEFAULT_BUILD_TIMEOUT_SEC = 600.0
DEFAULT_CPUS = 1
DEFAULT_MEMORY_MB = 2048
DEFAULT_STORAGE_MB = 10240

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
#: Files or folders whose presence marks a directory as (meant to be) a Harbor task.
TASK_MARKERS = ("task.toml", "instruction.md", "environment", "tests", "solution")


@attrs.frozen
class HarborTask:
    """One parsed, valid Harbor task directory."""

    task_dir: Path
    id: str
    instruction: str
    schema_version: str
    #: ``[task].name`` (schema 1.1+), e.g. ``org/name``; ``None`` in older tasks.
    name: str | None
    #: ``[metadata]``, free-form (difficulty, category, tags...).
    metadata: dict[str, Any]
    verifier_timeout_sec: float
    verifier_env: dict[str, str]
    verifier_user: str | None
    agent_timeout_sec: float
    agent_user: str | None
    solution_env: dict[str, str]
    build_timeout_sec: float
    docker_image: str | None
    dockerfile: Path | None
    cpus: float
    memory_mb: int
    storage_mb: int
    gpus: int
    allow_internet: bool
    #: The agent's working directory in the container (the Dockerfile's last
    #: WORKDIR), or ``None`` when only the image knows it.
    workdir: str | None
    tests_dir: Path
    solution_dir: Path | None


def looks_like_task_dir(path: Path) -> bool:
    """True for a directory holding any Harbor task file or folder."""
    return path.is_dir() and any((path / m).exists() for m in TASK_MARKERS)


class _Checker:
    """Collects problems for one task directory."""

    def __init__(self, task_dir: Path) -> None:
        self.task_dir = task_dir
        self.task_id = task_dir.name
        self.problems: list[Problem] = []

    def add(self, rel: str, message: str, field: str = "", location: str = "") -> None:
        self.problems.append(
            Problem(
                file=str(self.task_dir / rel),
                message=message,
                location=location,
                task_id=self.task_id,
                field=field,
            )
        )

    # -- typed getters for task.toml values; each returns the default on a problem --
    def table(self, data: dict[str, Any], key: str) -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            self.add("task.toml", f"must be a table ([{key}]), got {_kind(value)}", f"$.{key}")
            return {}
        return value

    def number(
        self,
        table: dict[str, Any],
        section: str,
        key: str,
        default: float,
        *,
        integer: bool = False,
    ) -> float:
        if key not in table:
            return default
        value = table[key]
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
        if ok and integer and float(value) != int(value):
            ok = False
        if not ok:
            what = "a whole number > 0" if integer else "a number > 0"
            self.add("task.toml", f"must be {what}, got {value!r}", f"$.{section}.{key}")
            return default
        return float(value)

    def string(self, table: dict[str, Any], section: str, key: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.add(
                "task.toml", f"must be a non-empty string, got {value!r}", f"$.{section}.{key}"
            )
            return None
        return value

    def boolean(self, table: dict[str, Any], section: str, key: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            self.add("task.toml", f"must be true or false, got {value!r}", f"$.{section}.{key}")
            return default
        return value

    def env(self, table: dict[str, Any], section: str) -> dict[str, str]:
        value = table.get("env", {})
        if not isinstance(value, dict):
            self.add(
                "task.toml",
                f'must be a table of strings (env = {{ KEY = "value" }}), got {_kind(value)}',
                f"$.{section}.env",
            )
            return {}
        result: dict[str, str] = {}
        for key, val in value.items():
            if not isinstance(val, str):
                self.add("task.toml", f"must be a string, got {val!r}", f"$.{section}.env.{key}")
            else:
                result[key] = val
        return result

    def size_mb(self, table: dict[str, Any], key_mb: str, key_legacy: str, default: int) -> int:
        """``memory_mb = 2048``, or Harbor's deprecated ``memory = "2G"``."""
        if key_mb in table:
            return int(self.number(table, "environment", key_mb, default, integer=True))
        if key_legacy not in table:
            return default
        value = table[key_legacy]
        mb = _parse_size_mb(value)
        if mb is None:
            self.add(
                "task.toml",
                f'must be a size such as "512M" or "4G" (or use {key_mb} = <MiB>), got {value!r}',
                f"$.environment.{key_legacy}",
            )
            return default
        return mb


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def _parse_size_mb(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if not isinstance(value, str):
        return None
    match = _SIZE.match(value)
    if match is None or float(match.group(1)) <= 0:
        return None
    factor = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}[match.group(2).lower()]
    return max(1, int(float(match.group(1)) * factor))


def dockerfile_workdir(text: str) -> str | None:
    """The final stage's WORKDIR, when the Dockerfile says it plainly.

    ``None`` when the final stage sets none (it inherits the base image's, which
    only the image knows) or when the path uses a build variable.
    """
    stage_workdirs: dict[str, str | None] = {}
    alias: str | None = None
    current: str | None = None
    # Join continuation lines so `WORKDIR \` + path still parses.
    joined = re.sub(r"\\\r?\n", " ", text)
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        parts = [p for p in rest.split() if not p.startswith("--")]
        if word == "FROM":
            # A stage built FROM an earlier stage inherits its WORKDIR; an image's is unknown.
            current = stage_workdirs.get(parts[0].lower()) if parts else None
            alias = parts[2].lower() if len(parts) >= 3 and parts[1].lower() == "as" else None
        elif word == "WORKDIR":
            path = rest.strip()
            if path.startswith("[") and path.endswith("]"):
                path = path[1:-1].strip()
            path = path.strip("\"'")
            if not path or "$" in path:
                current = None
            elif path.startswith("/"):
                current = str(PurePosixPath(path))
            elif current is not None:
                current = str(PurePosixPath(current) / path)
        if alias is not None:
            stage_workdirs[alias] = current
    return current


def read_task_dir(task_dir: Path) -> tuple[HarborTask | None, list[Problem]]:
    """Parse ``task_dir``; return the task (``None`` when anything is wrong) and every problem."""
    c = _Checker(task_dir)
    links = link_problems(task_dir, "the task directory", task_id=c.task_id)
    if links:
        return None, links

    # instruction.md
    instruction = ""
    instr = task_dir / "instruction.md"
    if not instr.is_file():
        c.add("instruction.md", "missing: every Harbor task needs the agent's instruction here")
    else:
        try:
            instruction = instr.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            c.add("instruction.md", f"is not UTF-8 text ({exc.reason} at byte {exc.start})")
        else:
            if not instruction.strip():
                c.add("instruction.md", "is empty: write the agent's instruction in it")

    # task.toml
    data: dict[str, Any] = {}
    toml_path = task_dir / "task.toml"
    if not toml_path.is_file():
        c.add(
            "task.toml",
            "missing: every Harbor task needs one (at least [verifier] and [agent] timeout_sec)",
        )
    else:
        text = ""
        try:
            text = toml_path.read_text(encoding="utf-8")
            data = tomllib.loads(text)
        except RecursionError:
            deep = toml_depth_problem(text)
            c.add("task.toml", deep.message, deep.field, location=f"{deep.line}")
        except UnicodeDecodeError as exc:
            c.add("task.toml", f"is not UTF-8 text ({exc.reason} at byte {exc.start})")
        except tomllib.TOMLDecodeError as exc:
            msg = str(exc)
            m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
            location = f"{m.group(1)}:{m.group(2)}" if m else ""
            msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
            c.add("task.toml", f"is not valid TOML: {msg}", location=location)

    version = data.get("schema_version", data.get("version", "1.0"))
    if not isinstance(version, str):
        key = "schema_version" if "schema_version" in data else "version"
        c.add("task.toml", f'must be a string such as "1.0", got {version!r}', f"$.{key}")
        version = "1.0"

    task_table = c.table(data, "task")
    name = c.string(task_table, "task", "name")
    metadata = c.table(data, "metadata")

    verifier = c.table(data, "verifier")
    verifier_timeout = c.number(verifier, "verifier", "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_SEC)
    verifier_env = c.env(verifier, "verifier")
    verifier_user = c.string(verifier, "verifier", "user")

    agent = c.table(data, "agent")
    agent_timeout = c.number(agent, "agent", "timeout_sec", DEFAULT_AGENT_TIMEOUT_SEC)
    agent_user = c.string(agent, "agent", "user")

    solution_table = c.table(data, "solution")
    solution_env = c.env(solution_table, "solution")

    env = c.table(data, "environment")
    build_timeout = c.number(env, "environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_SEC)
    docker_image = c.string(env, "environment", "docker_image")
    cpus = c.number(env, "environment", "cpus", DEFAULT_CPUS)
    memory_mb = c.size_mb(env, "memory_mb", "memory", DEFAULT_MEMORY_MB)
    storage_mb = c.size_mb(env, "storage_mb", "storage", DEFAULT_STORAGE_MB)
    gpus = 0
    if "gpus" in env:
        value = env["gpus"]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            gpus = value
        else:
            c.add("task.toml", f"must be a whole number >= 0, got {value!r}", "$.environment.gpus")
    allow_internet = c.boolean(env, "environment", "allow_internet", True)

    # environment/
    env_dir = task_dir / "environment"
    for compose in COMPOSE_FILES:
        if (env_dir / compose).is_file():
            c.add(
                f"environment/{compose}",
                "multi-container tasks are not supported by KSI's docker environment; "
                "only a single environment/Dockerfile (or [environment].docker_image) is",
            )
    dockerfile: Path | None = env_dir / "Dockerfile"
    workdir: str | None = None
    if dockerfile is not None and dockerfile.is_file():
        try:
            workdir = dockerfile_workdir(dockerfile.read_text(encoding="utf-8", errors="replace"))
        except OSError as exc:
            c.add("environment/Dockerfile", f"cannot be read: {exc}")
    else:
        dockerfile = None
        if docker_image is None:
            c.add(
                "environment/Dockerfile",
                "missing: add environment/Dockerfile or set [environment].docker_image "
                "in task.toml",
            )

    # tests/
    tests_dir = task_dir / "tests"
    if not (tests_dir / "test.sh").is_file():
        c.add(
            "tests/test.sh",
            "missing: the verifier script that writes /logs/verifier/reward.txt (or reward.json)",
        )

    # solution/ (optional, but a solution/ without solve.sh is a mistake)
    solution_dir: Path | None = task_dir / "solution"
    if solution_dir is not None and solution_dir.is_dir():
        if not (solution_dir / "solve.sh").is_file():
            c.add("solution/solve.sh", "missing: solution/ exists but has no solve.sh")
    else:
        solution_dir = None

    if c.problems:
        return None, c.problems
    return (
        HarborTask(
            task_dir=task_dir,
            id=task_dir.name,
            instruction=instruction,
            schema_version=str(version),
            name=name,
            metadata=dict(metadata),
            verifier_timeout_sec=verifier_timeout,
            verifier_env=verifier_env,
            verifier_user=verifier_user,
            agent_timeout_sec=agent_timeout,
            agent_user=agent_user,
            solution_env=solution_env,
            build_timeout_sec=build_timeout,
            docker_image=docker_image,
            dockerfile=dockerfile,
            cpus=cpus,
            memory_mb=memory_mb,
            storage_mb=storage_mb,
            gpus=gpus,
            allow_internet=allow_internet,
            workdir=workdir,
            tests_dir=tests_dir,
            solution_dir=solution_dir,
        ),
        [],
    )

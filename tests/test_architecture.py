"""The package's shape: no import circle, and the core never imports the layers above it.

Read from the source with :mod:`ast`, so every import counts: module-level,
inside a function, and under ``if TYPE_CHECKING:`` (a circle there still
means two modules that cannot be understood apart). An import by name only
(``importlib.import_module(f"ksi.cli.{name}")``) is not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

KSI = Path(__file__).resolve().parent.parent / "ksi"

#: What runs attempts and runs, and the command line: the core never imports these.
UPPER = (
    "ksi.attempt",
    "ksi.runs",
    "ksi.rundir",
    "ksi.generations",
    "ksi.reporting",
    "ksi.cli",
)
#: The core, besides ksi/*.py: the packages a task, a note or the original API is made of.
CORE_PACKAGES = ("ksi.tasks", "ksi.knowledge", "ksi.compat")
#: Top-level modules that are not core: the package's door (lazy names), ``python -m
#: ksi``, the executor contract (it names the attempt it runs), and the old paths.
NOT_CORE = {"ksi", "ksi.__main__", "ksi.jobs", "ksi._moved"}
#: Core imports of an upper layer's names for annotations only (under TYPE_CHECKING), and why.
ANNOTATIONS_ONLY = {
    ("ksi.interfaces", "ksi.attempt.job"): "the executor protocol names the job it moves",
    ("ksi.records", "ksi.rundir.config"): "observers' RunInfo holds the run's typed settings",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(KSI.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(KSI.rglob("*.py"))}


def _imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """``(ksi module imported, line)`` for every import statement anywhere in ``path``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # ``from ksi.cli import app`` imports a module; ``from ksi.cli import main``
                # runs the package's __init__.
                sub = f"{base}.{alias.name}"
                target = sub if sub in known else base
                if target in known:
                    yield target, node.lineno


def _graph() -> dict[str, dict[str, int]]:
    known = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges = graph.setdefault(name, {})
        for target, line in _imports(name, path, known):
            if target != name:
                edges.setdefault(target, line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_no_import_circle() -> None:
    graph = _graph()
    report = []
    for component in _cycles(graph):
        members = set(component)
        report.append(
            " <-> ".join(component)
            + "\n"
            + "\n".join(
                f"    {src}:{line} imports {dst}"
                for src in component
                for dst, line in sorted(graph[src].items())
                if dst in members
            )
        )
    assert not report, "import circles:\n" + "\n".join(report)


def test_the_core_imports_nothing_above_it() -> None:
    graph = _graph()
    core = [
        name
        for name, path in _modules().items()
        if (path.parent == KSI and name not in NOT_CORE) or _within(name, CORE_PACKAGES)
    ]
    assert "ksi.models" in core and "ksi.tasks.custom" in core
    climbs = [
        f"{src}:{line} imports {dst}"
        for src in sorted(core)
        for dst, line in sorted(graph[src].items())
        if _within(dst, UPPER) and (src, dst) not in ANNOTATIONS_ONLY
    ]
    assert not climbs, "the core imports a layer above it:\n" + "\n".join(climbs)
    for src, dst in ANNOTATIONS_ONLY:
        assert dst in _annotation_imports(_modules()[src]), f"{src} imports {dst} at run time"


def _annotation_imports(path: Path) -> set[str]:
    """Modules imported under ``if TYPE_CHECKING:`` in ``path``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    found.add(inner.module)
    return found


def test_the_checks_see_a_circle_and_a_climb(tmp_path: Path) -> None:
    # The graph must hold the kinds of import the two tests rely on.
    graph = _graph()
    assert "ksi.models" in graph["ksi.tasks.custom"]  # from-import at module level
    assert "ksi.cli.app" in graph["ksi.cli"]  # a package's __init__
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {}}) == [["a", "b", "c"]]
    lazy = tmp_path / "lazy.py"
    lazy.write_text(
        "def f():\n    import json\n\n"
        "def g():\n    # start-up: only when asked\n    import json\n\n    from os import sep\n"
    )
    assert [hit.rpartition(":")[0] for hit in _lazy_imports_without_reason(lazy)] == [f"{lazy}:2"]


#: What a function-level import may be for; its comment says which.
LAZY_REASONS = ("start-up", "optional", "heavy")


def _in_import_run(line: str) -> bool:
    text = line.strip()
    return not text or text.startswith(("import ", "from ", ")"))


def _lazy_imports_without_reason(path: Path) -> Iterator[str]:
    """``file:line`` of each import inside a function with no comment giving its reason.

    The comment sits at the end of the import's line or on the line above the
    imports it heads (one comment may head several consecutive imports, blank
    lines between them included).
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            own = lines[node.lineno - 1 : node.end_lineno]
            above = node.lineno - 2
            while above >= 0 and (
                not lines[above].strip()
                or lines[above].strip().startswith(("import ", "from ", ")"))
            ):
                above -= 1
            heading = lines[above] if above >= 0 else ""
            comments = [line.partition("#")[2] for line in [*own, heading] if "#" in line]
            if not any(reason in c for c in comments for reason in LAZY_REASONS):
                where = path.relative_to(KSI.parent) if path.is_relative_to(KSI.parent) else path
                yield f"{where}:{node.lineno}: {own[0].strip()}"


def test_every_function_level_import_says_why() -> None:
    missing = [hit for path in _modules().values() for hit in _lazy_imports_without_reason(path)]
    assert not missing, (
        "an import inside a function is only for start-up time or a heavy optional "
        "dependency, and says which in a comment (# start-up: ..., # optional: ...):\n"
        + "\n".join(missing)
    )


#: Most lines a class in ksi/ may span (issue 24: past it, a class holds several ideas).
MAX_CLASS_LINES = 300
#: Classes allowed past it, and why splitting them would make them worse.
LONG_CLASSES: dict[str, str] = {}


def _class_lengths(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """``(qualified name, lines)`` of every class in ``path``, nested ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                yield name, (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, f"{name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, f"{module}.")


def _long_classes(paths: dict[str, Path]) -> dict[str, int]:
    return {
        name: lines
        for module, path in paths.items()
        for name, lines in _class_lengths(module, path)
        if lines > MAX_CLASS_LINES
    }


def test_no_class_over_300_lines() -> None:
    found = _long_classes(_modules())
    over = [f"{name}: {lines} lines" for name, lines in found.items() if name not in LONG_CLASSES]
    assert not over, (
        f"classes over {MAX_CLASS_LINES} lines (split them by idea, or say in LONG_CLASSES "
        "why this one holds one idea that splitting would make worse):\n" + "\n".join(over)
    )
    stale = sorted(set(LONG_CLASSES) - set(found))
    assert not stale, f"LONG_CLASSES names classes that are no longer long: {stale}"


def test_the_class_check_sees_a_long_class(tmp_path: Path) -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (tmp_path / "big.py").write_text(
        f"def f():\n    class Inner:\n{body}\n\n\nclass Small:\n    y = 1\n"
    )
    found = _long_classes({"big": tmp_path / "big.py"})
    assert list(found) == ["big.Inner"] and found["big.Inner"] == MAX_CLASS_LINES + 1

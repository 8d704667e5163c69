"""The shape of the code: no import cycle anywhere in broker/ or protocol/ (module-level,
function-local and type-checking imports alike: each is a dependency), protocol/ never imports
the broker, and nothing imports the top layer (broker/broker.py, broker/cli/, broker/testing/)
except the top layer itself. A new cycle or an upward import fails here, naming the modules."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("broker", "protocol")
TOP = ("broker.broker", "broker.cli", "broker.__main__", "broker.testing")


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            is_package = path.name == "__init__.py"
            found[name.removesuffix(".__init__")] = (path, is_package)
    return found


def _imports(name: str, path: pathlib.Path, is_package: bool, modules) -> set[str]:
    """The modules of ours that ``name`` imports anywhere in its file."""
    base = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                prefix = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:   # a name inside a module: the module
                target = target.rpartition(".")[0]
            if isinstance(node, ast.ImportFrom) and node.level and not target:
                raise AssertionError(f"{name}: relative import beyond its package at line "
                                     f"{node.lineno}")
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, is_package, modules)
            for name, (path, is_package) in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _in_top(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in TOP)


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_protocol_does_not_import_the_broker():
    graph = _graph()
    assert {name: sorted(t for t in targets if t.startswith("broker"))
            for name, targets in graph.items()
            if name.startswith("protocol") and any(t.startswith("broker") for t in targets)} == {}


def test_nothing_below_imports_the_top_layer():
    graph = _graph()
    upward = {name: sorted(t for t in targets if _in_top(t))
              for name, targets in graph.items() if not _in_top(name)}
    assert {name: targets for name, targets in upward.items() if targets} == {}

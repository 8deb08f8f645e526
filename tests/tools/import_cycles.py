"""Import cycles between the modules of recommender/.

``python -m tests.tools.import_cycles`` prints each one (a strongly connected set of
modules, with the imports inside it) and exits 1 when a cycle is not one of
``ONE_MODULE``. Every import counts: top-level, inside a function, or under
``TYPE_CHECKING`` (a reader follows them all)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import recommender

SOURCE = Path(recommender.__file__).parent

# Modules that import each other on purpose: each set is one module split in files.
ONE_MODULE: tuple[frozenset[str], ...] = (
    # An AggregateSet reads and writes its checkpoints and takes its OOMs; the two
    # modules hold those halves of its methods and type their argument with it.
    frozenset(
        {
            "recommender.engine.aggregation",
            "recommender.engine.checkpoint",
            "recommender.engine.oom",
        }
    ),
    # Django models with foreign keys both ways and their query sets: one schema.
    frozenset(
        {
            "recommender.models.fleet",
            "recommender.models.policy",
            "recommender.models.provisioning",
            "recommender.models.recommendation",
        }
    ),
    # The simulated cluster and its nodes' layout, drawn from its fleet.
    frozenset({"recommender.cluster.simulated", "recommender.cluster.simulated_nodes"}),
    # Prometheus's client and its throttling query, a method of the client.
    frozenset(
        {"recommender.sources.prometheus", "recommender.sources.prometheus_throttling"}
    ),
)


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``root``'s package it imports (migrations left out)."""
    paths = {
        module_name(path, root): path
        for path in sorted(root.rglob("*.py"))
        if "migrations" not in path.relative_to(root).parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    base = package.split(".")[
                        : len(package.split(".")) - node.level + 1
                    ]
                    module = ".".join([*base, *([module] if module else [])])
                # ``from package import module`` imports the module itself.
                candidates = [module, *(f"{module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            found.update(c for c in candidates if c in paths and c != name)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected sets of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for below in sorted(graph.get(name, set())):
            if below not in index:
                visit(below)
                low[name] = min(low[name], low[below])
            elif below in stack:
                low[name] = min(low[name], index[below])
        if low[name] == index[name]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == name:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for name in sorted(graph):
            if name not in index:
                visit(name)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def unexpected_cycles(root: Path, under: tuple[str, ...] = ("",)) -> list[list[str]]:
    """Cycles with a module under one of ``under`` (dotted prefixes below the package,
    "" for all) that are not one of ``ONE_MODULE``."""
    package = root.name
    prefixes = tuple(f"{package}.{u}".rstrip(".") for u in under)
    return [
        members
        for members in cycles(import_graph(root))
        if frozenset(members) not in ONE_MODULE
        and any(m == p or m.startswith(f"{p}.") for m in members for p in prefixes)
    ]


def main() -> int:
    graph = import_graph(SOURCE)
    found = cycles(graph)
    for members in found:
        named = " (one module on purpose)" if frozenset(members) in ONE_MODULE else ""
        print(f"cycle{named}:")
        for name in members:
            inside = sorted(graph[name] & set(members))
            print(f"  {name} imports {', '.join(inside)}")
    unexpected = unexpected_cycles(SOURCE)
    print(f"{len(found)} cycles, {len(unexpected)} not named in ONE_MODULE")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

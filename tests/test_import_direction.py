"""Dependencies point one way (docs/architecture.md), checked on the whole tree:
interfaces (web, api, webhook, tasks, management, admin) → services → engine, sources,
cluster, models (``ALLOWED``); inside services, use case packages import only the ones
below them (``SERVICES_ALLOWED``, a table with no cycle); vpaweb/, benchmarks/ and
tools/ import only the parts of recommender ``OUTSIDE_ALLOWED`` gives them. The
engine's own rule (numpy and the standard library only) is in
tests/engine/test_engine_is_pure.py. A new module fails until someone places it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import recommender

SOURCE = Path(recommender.__file__).parent

BOTTOM = {"errors", "roles", "apps", "text"}
# What each part of recommender may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "engine": set(),
    "errors": set(),
    "roles": set(),
    # Its ready() connects the signals.
    "apps": {"signals"},
    "text": set(),
    "models": {"engine", *BOTTOM},
    "cluster": {"engine", *BOTTOM},
    "sources": {"cluster", "engine", *BOTTOM},
    "metrics": {"models", "engine", *BOTTOM},
    "services": {"cluster", "sources", "engine", "models", "metrics", *BOTTOM},
    "tasks": {"services", "models", "engine", "metrics", *BOTTOM},
    "admin": {"services", "models", "metrics", *BOTTOM},
    # The user model's signals: every path that changes an account revokes.
    "signals": {"services", *BOTTOM},
    "web": {"services", "tasks", "models", "engine", "metrics", *BOTTOM},
    "api": {"services", "tasks", "models", "engine", "metrics", *BOTTOM},
    # What a client may hold of the webhook's server: its connections, no domain.
    "webhook_connections": set(),
    "webhook": {
        "services",
        "models",
        "engine",
        "metrics",
        "webhook_connections",
        *BOTTOM,
    },
    "management": {
        "services",
        "tasks",
        "models",
        "engine",
        "cluster",
        "sources",
        "metrics",
        "webhook",
        *BOTTOM,
    },
}


# What each package (or root module) of recommender/services may import (besides
# itself), lowest first. connections.py is the composition root: the one place a
# Cluster row becomes an adapter, a usage source or a writer.
SERVICES_ALLOWED: dict[str, set[str]] = {
    "access": set(),
    "readmodels": set(),
    "policy": {"access", "readmodels"},
    "advice": {"access", "policy", "readmodels"},
    "admission": {"advice", "readmodels"},
    "connections": {"admission"},
    "operations": {"connections", "readmodels"},
    "actuation": {"access", "advice", "connections", "policy", "readmodels"},
    "dashboard": {"advice", "connections", "policy", "readmodels"},
    "refresh": {
        "access",
        "admission",
        "advice",
        "connections",
        "operations",
        "policy",
        "readmodels",
    },
    "replay": {"access", "advice", "connections", "policy", "refresh"},
}
# What the directories beside recommender/ may import of it.
OUTSIDE_ALLOWED: dict[str, set[str]] = {
    # Settings, URLs, the Celery app and gunicorn's hooks: the interfaces' wiring.
    "vpaweb": {"api", "web", "metrics", "services"},
    # Benchmarks drive the layers below the interfaces (and the webhook's server, and
    # the Celery tasks a worker runs).
    "benchmarks": {
        "tasks",
        "engine",
        "models",
        "roles",
        "errors",
        "services",
        "sources",
        "cluster",
        "metrics",
        "webhook",
    },
    # The deploy and screenshot tools talk to a running vpaweb, never import it.
    "tools": set(),
}


def part_of(module: str) -> str | None:
    """``recommender.services.refresh.cycle`` -> ``services``; None outside the app."""
    names = module.split(".")
    if names[0] != "recommender":
        return None
    return names[1] if len(names) > 1 else ""


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, imported part) for every import of the project in ``path``."""
    here = part_of(".".join(path.relative_to(root.parent).with_suffix("").parts))
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                # Relative imports stay inside the package they are written in.
                found.append((node.lineno, here or ""))
                continue
            part = part_of(node.module or "")
            if part == "":
                # from recommender import models, tasks
                found += [(node.lineno, alias.name) for alias in node.names]
            elif part is not None:
                found.append((node.lineno, part))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                part = part_of(alias.name)
                if part:
                    found.append((node.lineno, part))
    return found


def violations(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] == "migrations" or relative == Path("__init__.py"):
            continue
        here = relative.parts[0].removesuffix(".py")
        if here not in ALLOWED:
            bad.append(f"{relative}: {here!r} is not placed in ALLOWED")
            continue
        for line, part in imports_of(path, root):
            if part != here and part not in ALLOWED[here]:
                bad.append(f"{relative}:{line}: {here} imports {part}")
    return bad


def services_part_of(module: str) -> str | None:
    """``recommender.services.refresh.cycle`` -> ``refresh``; None outside services."""
    names = module.split(".")
    if names[:2] != ["recommender", "services"]:
        return None
    return names[2] if len(names) > 2 else ""


def services_violations(services: Path) -> list[str]:
    bad = []
    for path in sorted(services.rglob("*.py")):
        relative = path.relative_to(services)
        if relative == Path("__init__.py"):
            continue
        here = relative.parts[0].removesuffix(".py")
        if here not in SERVICES_ALLOWED:
            bad.append(f"{relative}: {here!r} is not placed in SERVICES_ALLOWED")
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and not node.level:
                part = services_part_of(node.module or "")
                parts = [alias.name for alias in node.names] if part == "" else [part]
            elif isinstance(node, ast.Import):
                parts = [services_part_of(alias.name) for alias in node.names]
            else:
                continue
            for part in parts:
                if part and part != here and part not in SERVICES_ALLOWED[here]:
                    bad.append(f"{relative}:{node.lineno}: {here} imports {part}")
    return bad


def outside_violations(repository: Path) -> list[str]:
    bad = []
    for directory, allowed in OUTSIDE_ALLOWED.items():
        for path in sorted((repository / directory).rglob("*.py")):
            relative = path.relative_to(repository)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and not node.level:
                    part = part_of(node.module or "")
                    parts = (
                        [alias.name for alias in node.names] if part == "" else [part]
                    )
                elif isinstance(node, ast.Import):
                    parts = [part_of(alias.name) for alias in node.names]
                else:
                    continue
                for part in parts:
                    if part is not None and part not in allowed:
                        bad.append(
                            f"{relative}:{node.lineno}: {directory} imports "
                            f"recommender.{part}".rstrip(".")
                        )
    return bad


def cycle_in(table: dict[str, set[str]]) -> list[str]:
    """A cycle of ``table`` (a list of names, first repeated last), or []."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = "open"
        path.append(name)
        for below in sorted(table.get(name, set())):
            if state.get(below) == "open":
                return [*path[path.index(below) :], below]
            if below not in state and (found := visit(below)):
                return found
        state[name] = "done"
        path.pop()
        return []

    for name in sorted(table):
        if name not in state and (found := visit(name)):
            return found
    return []


def test_every_import_points_down():
    assert violations(SOURCE) == []


def test_services_packages_import_only_the_ones_below_them():
    assert services_violations(SOURCE / "services") == []
    assert cycle_in(SERVICES_ALLOWED) == []


def test_vpaweb_benchmarks_and_tools_import_only_their_parts_of_recommender():
    assert outside_violations(SOURCE.parent) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [
        "a",
        "b",
        "c",
        "a",
    ]


def test_the_checker_finds_an_upward_import_and_an_unplaced_module(tmp_path):
    package = tmp_path / "recommender"
    (package / "services").mkdir(parents=True)
    (package / "services" / "bad.py").write_text(
        "from recommender.web.views import overview\n"
        "from recommender import api\n"
        "from recommender.models import Workload\n"
    )
    (package / "engine").mkdir()
    (package / "engine" / "impure.py").write_text("import recommender.models\n")
    (package / "gadget.py").write_text("x = 1\n")
    assert violations(package) == [
        "engine/impure.py:1: engine imports models",
        "gadget.py: 'gadget' is not placed in ALLOWED",
        "services/bad.py:1: services imports web",
        "services/bad.py:2: services imports api",
    ]


def test_the_services_checker_finds_an_upward_import_and_an_unplaced_package(tmp_path):
    services = tmp_path / "recommender" / "services"
    (services / "advice").mkdir(parents=True)
    (services / "advice" / "bad.py").write_text(
        "from recommender.services.refresh.cycle import refresh_cluster\n"
        "from recommender.services import dashboard\n"
        "from recommender.services.policy.validation import parse_container_policies\n"
        "import recommender.services.connections\n"
    )
    (services / "gadgets").mkdir()
    (services / "gadgets" / "x.py").write_text("x = 1\n")
    assert services_violations(services) == [
        "advice/bad.py:1: advice imports refresh",
        "advice/bad.py:2: advice imports dashboard",
        "advice/bad.py:4: advice imports connections",
        "gadgets/x.py: 'gadgets' is not placed in SERVICES_ALLOWED",
    ]


def test_the_outside_checker_finds_a_forbidden_import(tmp_path):
    for directory in OUTSIDE_ALLOWED:
        (tmp_path / directory).mkdir()
    (tmp_path / "tools" / "shot.py").write_text("from recommender.models import Pod\n")
    (tmp_path / "vpaweb" / "urls.py").write_text(
        "from recommender.web import health\nfrom recommender import engine\n"
    )
    (tmp_path / "benchmarks" / "bench_x.py").write_text(
        "from recommender.engine import batch\nimport recommender.api.views\n"
    )
    assert outside_violations(tmp_path) == [
        "vpaweb/urls.py:2: vpaweb imports recommender.engine",
        "benchmarks/bench_x.py:2: benchmarks imports recommender.api",
        "tools/shot.py:1: tools imports recommender.models",
    ]


def test_no_import_cycle_inside_services_engine_or_models():
    # ``python -m tests.tools.import_cycles`` prints every cycle of the tree.
    from tests.tools.import_cycles import unexpected_cycles

    assert unexpected_cycles(SOURCE, ("services", "engine", "models")) == []


def test_the_cycle_finder_finds_module_cycles_but_not_the_named_ones(tmp_path):
    from tests.tools.import_cycles import unexpected_cycles

    package = tmp_path / "recommender"
    for folder in ("services/admission", "engine", "cluster"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "services" / "admission" / "decision.py").write_text(
        "from recommender.services.admission.patch import build_patch\n"
    )
    (package / "services" / "admission" / "patch.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .decision import PodContainerRef\n"
    )
    # The engine's named cycle, through a function-local import.
    (package / "engine" / "aggregation.py").write_text(
        "from .oom import record_ooms\nfrom .checkpoint import x\n"
    )
    (package / "engine" / "oom.py").write_text("from . import aggregation\n")
    (package / "engine" / "checkpoint.py").write_text(
        "def f():\n    from recommender.engine.aggregation import AggregateSet\n"
    )
    (package / "cluster" / "a.py").write_text("from recommender.cluster import b\n")
    (package / "cluster" / "b.py").write_text("import recommender.cluster.a\n")
    assert unexpected_cycles(package, ("services", "engine")) == [
        [
            "recommender.services.admission.decision",
            "recommender.services.admission.patch",
        ]
    ]
    assert unexpected_cycles(package) == [
        ["recommender.cluster.a", "recommender.cluster.b"],
        [
            "recommender.services.admission.decision",
            "recommender.services.admission.patch",
        ],
    ]

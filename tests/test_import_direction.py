"""Dependencies point one way (ARCHITECTURE.md, STYLE.md §2), checked on the whole tree:
interfaces (web, api, webhook, tasks, management, admin) → services → engine, sources,
cluster, models. The engine's own rule (numpy and the standard library only) is in
tests/engine/test_engine_is_pure.py; here it must import nothing of the project.

Every part of ``recommender`` is listed in ``ALLOWED``: a new top-level module fails
this test until someone decides where it sits.
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
    "apps": set(),
    "text": set(),
    "models": {"engine", *BOTTOM},
    "cluster": {"engine", *BOTTOM},
    "sources": {"cluster", "engine", *BOTTOM},
    "metrics": {"models", "engine", *BOTTOM},
    "services": {"cluster", "sources", "engine", "models", "metrics", *BOTTOM},
    "tasks": {"services", "models", "engine", "metrics", *BOTTOM},
    "admin": {"services", "models", "metrics", *BOTTOM},
    "web": {"services", "tasks", "models", "engine", "metrics", *BOTTOM},
    "api": {"services", "tasks", "models", "engine", "metrics", *BOTTOM},
    "webhook": {"services", "models", "engine", "metrics", *BOTTOM},
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


def test_every_import_points_down():
    assert violations(SOURCE) == []


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

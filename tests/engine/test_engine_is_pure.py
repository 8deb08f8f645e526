"""The engine imports only numpy and the standard library (docs/architecture.md)."""

import ast
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "recommender" / "engine"


def imported_modules(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: stays inside recommender.engine
                yield "recommender.engine"
            else:
                yield node.module or ""


def test_engine_imports_only_numpy_and_stdlib():
    files = sorted(ENGINE.glob("*.py"))
    assert files, ENGINE
    bad = []
    for path in files:
        for name in imported_modules(path):
            top = name.split(".")[0]
            if name == "recommender.engine" or name.startswith("recommender.engine."):
                continue
            if top == "numpy" or top in sys.stdlib_module_names or top == "__future__":
                continue
            bad.append(f"{path.name}: {name}")
    assert bad == []


def test_checker_catches_django_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from django.db import models\nimport recommender.services\n")
    assert list(imported_modules(bad)) == ["django.db", "recommender.services"]

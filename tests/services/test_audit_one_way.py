"""One way to audit: only services/access/audit.py builds ``AuditEvent`` rows
(``record_audit``, ``audit_row``); every other module of recommender goes through it."""

from __future__ import annotations

import ast
from pathlib import Path

import recommender

SOURCE = Path(recommender.__file__).parent
AUDIT = Path("services/access/audit.py")


def audit_rows_built(source: Path) -> list[str]:
    """``path:line`` of every ``AuditEvent(...)`` or ``AuditEvent.objects.create(...)``
    outside the audit module (models and migrations define the table)."""
    found = []
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        if relative == AUDIT or relative.parts[0] in ("models", "migrations"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            if called in ("AuditEvent", "AuditEvent.objects.create"):
                found.append(f"{relative}:{node.lineno}")
    return found


def test_only_the_audit_module_builds_audit_rows():
    assert audit_rows_built(SOURCE) == []


def test_the_check_finds_a_row_built_elsewhere(tmp_path):
    (tmp_path / "services" / "access").mkdir(parents=True)
    (tmp_path / "services" / "access" / "audit.py").write_text("AuditEvent(x=1)\n")
    (tmp_path / "services" / "control.py").write_text(
        "AuditEvent.objects.create(x=1)\nrows = [AuditEvent(x=2)]\n"
    )
    assert audit_rows_built(tmp_path) == [
        "services/control.py:1",
        "services/control.py:2",
    ]

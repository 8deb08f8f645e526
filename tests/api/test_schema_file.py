"""The schema file `make schema` writes: valid, without warnings, every operation in it.

It needs no database (the command runs in its own process, on its defaults), so it is
not repeated in the PostgreSQL run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from django.conf import settings


def test_schema_validates_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "openapi.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "spectacular",
            "--validate",
            "--fail-on-warn",
            "--file",
            str(out),
        ],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={"SECRET_KEY": "schema-test", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr
    operations = sum(
        len(item) for item in yaml.safe_load(out.read_text())["paths"].values()
    )
    assert operations >= 20

"""The repository stands alone: nothing in tests/, benchmarks/ or tools/ (nor the app)
reads a file outside the clone, so a clone in any directory passes ``make test``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("tests", "benchmarks", "tools", "recommender", "vpaweb", "deploy", "docs")
SUFFIXES = {".py", ".sh", ".md", ".yaml", ".yml", ".toml", ".cfg", ".json", ".txt"}

# A path that climbs out of the clone: the sibling folder beside it, a sibling spelt as
# a path part next to a parent, ROOT.parent, or an absolute path into the work area.
# (Spelt in pieces, so this file names no such path itself.)
SIBLING = "sh" + "ared"
WORK = "wo" + "rk"
PARENT = "par" + "ent"
OUTSIDE = re.compile(
    rf"\.\./{SIBLING}|/{WORK}/|parents\[\d\]\s*/\s*\"{SIBLING}\"|ROOT\.{PARENT}\s*/"
    rf"|\.\.\s*/\s*\"{SIBLING}\""
)


def checked_files() -> list[Path]:
    """Every text file of the checked folders but the recordings themselves."""
    fixtures = ROOT / "tests" / "fixtures"
    return [
        path
        for folder in CHECKED
        for path in (ROOT / folder).rglob("*")
        if path.suffix in SUFFIXES and path.is_file() and fixtures not in path.parents
    ]


def test_nothing_reads_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in checked_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert offenders == []


def test_the_check_sees_a_path_that_climbs_out() -> None:
    for line in (
        f'WIRE = Path(__file__).resolve().parents[3] / "{SIBLING}" / "k8s-wire"',
        f'PROVEN = ROOT.{PARENT} / "{SIBLING}" / "rbac.yaml"',
        f"see ../{SIBLING}/k8s-wire/README.md",
    ):
        assert OUTSIDE.search(line), line

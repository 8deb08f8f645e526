"""Mode names are spelt once: upstream's update and container scaling modes are
constants in recommender/engine/capping.py (``Policy.Mode`` is built from them); no
other module under recommender/ or vpaweb/ writes one as a string literal, and no
template compares a mode to one (``Policy.in_acting_mode``, ``Policy.is_off``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from recommender.engine import capping

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS = Path("recommender/engine/capping.py")
NAMES = {
    capping.MODE_AUTO,
    capping.MODE_OFF,
    capping.MODE_INITIAL,
    capping.MODE_RECREATE,
    capping.MODE_IN_PLACE_OR_RECREATE,
    capping.MODE_IN_PLACE,
}
TEMPLATE_COMPARISON = re.compile(
    r"""mode\s*(?:==|!=|in)\s*["'](?:""" + "|".join(sorted(NAMES)) + r""")["']"""
)


def mode_literals(root: Path) -> list[str]:
    """``path:line`` of every mode name written as a literal outside the constants."""
    found = []
    for tree in ("recommender", "vpaweb"):
        for path in sorted((root / tree).rglob("*.py")):
            relative = path.relative_to(root)
            if relative == CONSTANTS or "migrations" in relative.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and node.value in NAMES:
                    found.append(f"{relative.as_posix()}:{node.lineno}")
    for path in sorted((root / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if TEMPLATE_COMPARISON.search(line):
                found.append(f"{path.relative_to(root).as_posix()}:{number}")
    return found


def test_mode_names_are_spelt_only_in_the_engines_constants():
    assert mode_literals(ROOT) == []


def test_the_check_finds_mode_literals(tmp_path):
    files = {
        "recommender/engine/capping.py": 'MODE_OFF = "Off"\n',
        "recommender/api/views.py": (
            '"""Switch to Initial."""\nexample = {"mode": "Initial"}\n'
        ),
        "recommender/migrations/0001_initial.py": 'choices = [("Off", "Off")]\n',
        "vpaweb/settings.py": 'ENUM = ["Auto", "Off"]\n',
        "templates/page.html": (
            "In mode {{ policy.mode }}.\n"
            '{% if policy.mode == "Recreate" %}acts{% endif %}\n'
        ),
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert mode_literals(tmp_path) == [
        "recommender/api/views.py:2",
        "vpaweb/settings.py:1",
        "vpaweb/settings.py:1",
        "templates/page.html:2",
    ]

"""The values table of deploy/helm/vpaweb/README.md, made from values.yaml's comments.

A key documented with a `# -- text` line just above it gets a row: its dotted path, its
type and default (read from the parsed file) and the text. The table sits between the
README's `values-table` markers.

    python tools/helm_values_table.py          # rewrite the README's table
    python tools/helm_values_table.py --check  # exit 1 when it is not current
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "deploy" / "helm" / "vpaweb"
START = "<!-- values-table:start (tools/helm_values_table.py) -->"
END = "<!-- values-table:end -->"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):")
DOC = re.compile(r"^ *# -- (?P<text>.+)$")


def documented_keys(text: str) -> list[tuple[str, str]]:
    """(dotted path, description) of every key with a `# --` line above it, in order."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    pending: str | None = None
    for line in text.splitlines():
        if doc := DOC.match(line):
            pending = doc["text"]
            continue
        key = KEY.match(line)
        if key is None:
            continue
        indent = len(key["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key["key"]))
        if pending is not None:
            found.append((".".join(k for _, k in stack), pending))
            pending = None
    return found


def _lookup(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for part in path.split("."):
        node = node[part]
    return node


def _type(value: Any) -> str:
    names = {bool: "bool", int: "int", float: "float", str: "string", dict: "object"}
    return names.get(type(value), "list")


def table(values_text: str) -> str:
    """The Markdown table of the documented keys."""
    values = yaml.safe_load(values_text)
    rows = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for path, text in documented_keys(values_text):
        value = _lookup(values, path)
        default = json.dumps(value, separators=(", ", ": ")).replace("|", "\\|")
        rows.append(f"| `{path}` | {_type(value)} | `{default}` | {text} |")
    return "\n".join(rows)


def with_table(readme: str, values_text: str) -> str:
    """The README with its table made again from values.yaml."""
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{table(values_text)}\n{END}{after}"


def main(argv: list[str]) -> int:
    readme_path = CHART / "README.md"
    readme = readme_path.read_text()
    wanted = with_table(readme, (CHART / "values.yaml").read_text())
    if "--check" in argv:
        if wanted != readme:
            print(f"{readme_path}: the values table is stale; run {sys.argv[0]}")
            return 1
        return 0
    readme_path.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

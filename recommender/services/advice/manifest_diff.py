"""A unified diff of right-sizing against the text the caller posted.

The diff edits the posted text itself, so it applies to the caller's file with
``git apply`` or ``patch -p1``: each changed quantity that the text already holds is
replaced where it stands (its quote style kept; JSON strings stay JSON strings),
located through the YAML composer's marks (JSON is read as YAML), an HPA's target too.
A change that adds a field the text does not have yet (a missing ``requests.memory``)
cannot be placed by replacing a value: its whole document is written again as the
rendered manifest says it, or, when the object sits inside a List or a top-level array,
the whole body.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml

from recommender.services.advice.rightsize import (
    POD_SPEC_PATHS,
    STATUS_RIGHTSIZED,
    RightsizeResult,
)

_Edit = tuple[int, int, str]  # start index, end index, replacement


class _NotInText(Exception):
    """A change the posted text has no value for."""


def _loader(text: str) -> type:
    # libyaml's marks count bytes, Python's count characters: the C loader (much
    # faster on big bodies) only where the two agree.
    c_loader = getattr(yaml, "CSafeLoader", None)
    return c_loader if c_loader is not None and text.isascii() else yaml.SafeLoader


def _composed(text: str) -> list[tuple[yaml.Node, bool]] | None:
    """The manifests' nodes in the order ``load_manifests`` lists them, each with
    whether it is a document of its own (not an item of a top-level array); None
    when the text cannot be composed again (it was parsed before, so this is rare)."""
    try:
        roots = list(yaml.compose_all(text, Loader=_loader(text)))
    except yaml.YAMLError:
        return None
    nodes: list[tuple[yaml.Node, bool]] = []
    for root in roots:
        if root is None or root.tag == "tag:yaml.org,2002:null":
            continue
        if isinstance(root, yaml.SequenceNode):
            nodes.extend((item, False) for item in root.value)
        else:
            nodes.append((root, True))
    return nodes


def _get(node: yaml.Node, key: str) -> yaml.Node:
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value  # type: ignore[no-any-return]  # PyYAML's untyped value
    raise _NotInText(key)


def _node_at(node: yaml.Node, path: str) -> yaml.Node:
    """The node of ``documents[i].items[j]…`` below the manifest node ``node``."""
    for part in path.split(".")[1:]:
        key, index = part.rstrip("]").split("[")
        sequence = _get(node, key)
        if not isinstance(sequence, yaml.SequenceNode):
            raise _NotInText(path)
        node = sequence.value[int(index)]
    return node


def _container_node(document: yaml.Node, kind: str, name: str) -> yaml.Node:
    spec = document
    for key in POD_SPEC_PATHS[kind]:
        spec = _get(spec, key)
    for key in ("containers", "initContainers"):
        try:
            items = _get(spec, key)
        except _NotInText:
            continue
        for item in items.value if isinstance(items, yaml.SequenceNode) else []:
            try:
                if _get(item, "name").value == name:
                    return item  # type: ignore[no-any-return]
            except _NotInText:
                continue
    raise _NotInText(name)


def _replacement(node: yaml.ScalarNode, value: str, is_json: bool) -> str:
    if is_json or node.style == '"':
        return json.dumps(value)
    if node.style == "'":
        return f"'{value}'"
    return value


def _hpa_edit(node: yaml.Node, change: dict[str, Any], is_json: bool) -> _Edit:
    """The edit of one HPA target kept in step: its value replaced where it stands
    when the target keeps its type; a new type (Utilization to AverageValue) has
    another key, so its document is written again."""
    before, after = change["before"], change["after"]
    if before.get("type") != after.get("type"):
        raise _NotInText(change["field"])
    index = int(change["field"].split("[")[1].split("]")[0])
    metrics = _get(_get(node, "spec"), "metrics")
    if not isinstance(metrics, yaml.SequenceNode) or index >= len(metrics.value):
        raise _NotInText(change["field"])
    metric = metrics.value[index]
    is_pod = _get(metric, "type").value == "Resource"
    source = "resource" if is_pod else "containerResource"
    key = "averageUtilization" if after["type"] == "Utilization" else "averageValue"
    value = _get(_get(_get(metric, source), "target"), key)
    if not isinstance(value, yaml.ScalarNode):
        raise _NotInText(change["field"])
    new = after[key]
    # A percent is an integer in YAML and JSON alike; a quantity a string.
    text = str(new) if isinstance(new, int) else _replacement(value, new, is_json)
    return (value.start_mark.index, value.end_mark.index, text)


def _document_edits(
    node: yaml.Node, entry: dict[str, Any], is_json: bool
) -> list[_Edit]:
    edits = [_hpa_edit(node, c, is_json) for c in entry.get("hpa_changes") or ()]
    for container in entry["containers"]:
        if not container["changes"]:
            continue
        item = _container_node(node, entry["kind"], container["name"])
        for change in container["changes"]:
            value = item
            for key in ("resources", *change["field"].split(".", 1)):
                value = _get(value, key)
            if not isinstance(value, yaml.ScalarNode):
                raise _NotInText(change["field"])
            replacement = _replacement(value, change["after"], is_json)
            edits.append((value.start_mark.index, value.end_mark.index, replacement))
    return edits


def _dump(manifest: Any, is_json: bool) -> str:
    if is_json:
        return json.dumps(manifest, indent=2)
    return yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True).rstrip("\n")


def edited_text(text: str, result: RightsizeResult, *, is_json: bool) -> str:
    """The posted text with the right-sized values written into it."""
    nodes = _composed(text)
    if nodes is None or len(nodes) != len(result.manifests):
        return _whole(result, is_json)
    edits: list[_Edit] = []
    rewritten: set[int] = set()
    for entry in result.documents:
        index = int(entry["path"].split(".")[0].split("[")[1].rstrip("]"))
        if entry["status"] != STATUS_RIGHTSIZED or index in rewritten:
            continue
        root, is_own_document = nodes[index]
        try:
            node = _node_at(root, entry["path"])
            edits.extend(_document_edits(node, entry, is_json))
        except _NotInText:
            if not is_own_document:
                return _whole(result, is_json)
            # Write the whole document (its List too) as the rendered manifest.
            start, end = root.start_mark.index, root.end_mark.index
            written = _dump(result.manifests[index], is_json)
            if text[start:end].endswith("\n"):
                written += "\n"
            edits = [e for e in edits if not start <= e[0] < end]
            edits.append((start, end, written))
            rewritten.add(index)
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _whole(result: RightsizeResult, is_json: bool) -> str:
    if is_json:
        return json.dumps(result.manifests, indent=2) + "\n"
    return yaml.safe_dump_all(result.manifests, sort_keys=False, allow_unicode=True)


def manifest_diff(
    text: str, result: RightsizeResult, *, is_json: bool, file_name: str
) -> str:
    """A unified diff (``a/<file_name>`` → ``b/<file_name>``); "" when nothing
    changed."""
    after = edited_text(text, result, is_json=is_json)
    lines = difflib.unified_diff(
        text.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{file_name}",
        tofile=f"b/{file_name}",
    )
    out = []
    for line in lines:
        out.append(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        )
    return "".join(out)

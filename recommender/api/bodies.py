"""Bounded parsing of every request body (JSON and YAML), the one place bodies are
read."""
# A body is checked against ``BodyLimits`` *while* it is scanned, before anything is
# built from it, so a hostile body costs at most the limits' worth of work:
#
# - ``max_documents``: YAML documents in the stream (and manifests, Lists opened);
# - ``max_nodes``: values and keys of all documents together, YAML aliases expanded (an
#   alias to a 1,000-node mapping counts 1,000 each time it is used);
# - ``max_depth``: nesting of mappings and sequences (aliases included), far below
#   Python's recursion limit, so no parser or serializer ever recurses too deep;
# - ``max_keys``: keys of one mapping;
# - ``max_scalar_chars``: characters of one string.
#
# A breach is a ``TooLarge`` (413) naming the limit and its setting. YAML is scanned
# with libyaml's event parser (the C loader) where PyYAML has it, and loaded with the
# same safe loader; JSON is scanned by a linear tokenizer, then decoded by ``json``. The
# body size itself is limited before this, by ``formats.read_limited``.

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml
from django.conf import settings

from recommender.errors import InvalidInput, Malformed, TooLarge

JSON_MEDIA_TYPES = ("application/json",)

# The C loader when PyYAML was built with libyaml (the wheels are), else pure Python.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """Safe YAML without timestamps: Kubernetes reads `2024-01-01` as text, so do we."""


ManifestLoader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp)
        for tag, regexp in resolvers
        if tag != "tag:yaml.org,2002:timestamp"
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True)
class BodyLimits:
    """How much structure one body may have (settings ``API_MAX_*``)."""

    max_documents: int
    max_nodes: int
    max_depth: int
    max_keys: int
    max_scalar_chars: int

    @classmethod
    def from_settings(cls) -> BodyLimits:
        """The limits configured for this process (README, docs/api.md)."""
        return cls(
            max_documents=settings.API_MAX_DOCUMENTS,
            max_nodes=settings.API_MAX_NODES,
            max_depth=settings.API_MAX_DEPTH,
            max_keys=settings.API_MAX_KEYS,
            max_scalar_chars=settings.API_MAX_SCALAR_CHARS,
        )


def _too_large(what: str, limit: int, variable: str) -> TooLarge:
    return TooLarge(
        f"the body has {what} than {limit} (the limit {variable}); "
        "split it into smaller requests",
        field="body",
    )


class _Budget:
    """Counts what a scan has seen and raises as soon as a limit is passed."""

    def __init__(self, limits: BodyLimits) -> None:
        self.limits = limits
        self.nodes = 0

    def add_nodes(self, count: int) -> None:
        self.nodes += count
        if self.nodes > self.limits.max_nodes:
            raise _too_large(
                "more values (aliases expanded)",
                self.limits.max_nodes,
                "VPAWEB_API_MAX_NODES",
            )

    def check_depth(self, depth: int) -> None:
        if depth > self.limits.max_depth:
            raise _too_large(
                "deeper nesting", self.limits.max_depth, "VPAWEB_API_MAX_DEPTH"
            )

    def check_keys(self, keys: int) -> None:
        if keys > self.limits.max_keys:
            raise _too_large(
                "a mapping with more keys", self.limits.max_keys, "VPAWEB_API_MAX_KEYS"
            )

    def check_scalar(self, chars: int) -> None:
        if chars > self.limits.max_scalar_chars:
            raise _too_large(
                "a longer string (in characters)",
                self.limits.max_scalar_chars,
                "VPAWEB_API_MAX_SCALAR_CHARS",
            )

    def check_documents(self, documents: int) -> None:
        if documents > self.limits.max_documents:
            raise _too_large(
                "more documents",
                self.limits.max_documents,
                "VPAWEB_API_MAX_DOCUMENTS",
            )


def decode_text(data: bytes) -> str:
    """The body as text; InvalidInput when it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(
            f"the body is not UTF-8 text: {exc.reason}", field="body"
        ) from None


# One JSON token: a string (possessive, so an unterminated one ends the scan instead of
# being retried from every later position), a bracket, a colon, or a bare scalar.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+("?)|[\[\]{}:]|[^\s\[\]{}:,"]+')


def _scan_json(text: str, budget: _Budget) -> None:
    """Check ``text`` against the limits in one linear pass (no value is built)."""
    keys: list[int] = []  # per open container: keys so far, -1 for arrays
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first in "{[":
            budget.add_nodes(1)
            keys.append(0 if first == "{" else -1)
            budget.check_depth(len(keys))
        elif first in "}]":
            if keys:
                keys.pop()
        elif first == ":":
            if keys and keys[-1] >= 0:
                keys[-1] += 1
                budget.check_keys(keys[-1])
        else:
            budget.add_nodes(1)
            if first == '"':
                if not match.group(1):
                    return  # unterminated: json.loads says where
                budget.check_scalar(len(token) - 2)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def load_json(data: bytes, limits: BodyLimits | None = None) -> Any:
    """Decode a JSON body within the limits (no NaN or Infinity).

    Raises InvalidInput (400) for a body that is not JSON, TooLarge (413) for one past
    a limit.
    """
    text = decode_text(data)
    _scan_json(text, _Budget(limits or BodyLimits.from_settings()))
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise Malformed(f"the body is not valid JSON: {exc}", field="body") from None


class _Frame:
    """An open YAML collection during the scan."""

    __slots__ = ("anchor", "children", "height", "is_mapping", "size")

    def __init__(self, anchor: str | None, is_mapping: bool) -> None:
        self.anchor = anchor
        self.is_mapping = is_mapping
        self.size = 1
        self.height = 1
        self.children = 0


def _yaml_error(exc: yaml.YAMLError) -> Malformed:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return Malformed(
            f"the body is not valid YAML{where}: {exc.problem}", field="body"
        )
    return Malformed(f"the body is not valid YAML: {exc}", field="body")


def _scan_yaml(text: str, budget: _Budget) -> None:
    """Walk the YAML event stream once, checking every limit as events arrive.

    An anchored node's expanded size and height are remembered, so each alias costs
    what its expansion would cost, without expanding anything.
    """
    loader = ManifestLoader(text)
    try:
        documents = 0
        stack: list[_Frame] = []
        # anchor -> (expanded size, height); None while the anchored node is open.
        anchors: dict[str, tuple[int, int] | None] = {}

        def finish(size: int, height: int) -> None:
            if stack:
                parent = stack[-1]
                parent.size += size
                parent.height = max(parent.height, height + 1)
                parent.children += 1
                if parent.is_mapping and parent.children % 2 == 0:
                    budget.check_keys(parent.children // 2)

        while True:
            event = loader.get_event()
            if isinstance(event, yaml.StreamEndEvent):
                return
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                budget.check_documents(documents)
                anchors = {}
            elif isinstance(event, yaml.ScalarEvent):
                budget.add_nodes(1)
                budget.check_depth(len(stack) + 1)
                budget.check_scalar(len(event.value))
                if event.anchor:
                    anchors[event.anchor] = (1, 1)
                finish(1, 1)
            elif isinstance(event, yaml.AliasEvent):
                known = anchors.get(event.anchor or "", (1, 1))
                if known is None:
                    raise InvalidInput(
                        f"the YAML alias *{event.anchor} refers to a node that "
                        "contains it; manifests cannot be recursive",
                        field="body",
                    )
                size, height = known
                budget.add_nodes(size)
                budget.check_depth(len(stack) + height)
                finish(size, height)
            elif isinstance(event, yaml.CollectionStartEvent):
                budget.add_nodes(1)
                stack.append(
                    _Frame(event.anchor, isinstance(event, yaml.MappingStartEvent))
                )
                budget.check_depth(len(stack))
                if event.anchor:
                    anchors[event.anchor] = None
            elif isinstance(event, yaml.CollectionEndEvent):
                frame = stack.pop()
                if frame.anchor:
                    anchors[frame.anchor] = (frame.size, frame.height)
                finish(frame.size, frame.height)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from None
    finally:
        loader.dispose()


def load_yaml_documents(data: bytes, limits: BodyLimits | None = None) -> list[Any]:
    """Every document of a YAML body, within the limits, as plain JSON values.

    Aliases are expanded into independent copies (changing one container cannot change
    another); values JSON cannot carry (binary, NaN) are refused with the document's
    index.
    """
    text = decode_text(data)
    _scan_yaml(text, _Budget(limits or BodyLimits.from_settings()))
    try:
        loaded = list(yaml.load_all(text, Loader=ManifestLoader))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from None
    return [_plain(document, index) for index, document in enumerate(loaded)]


def _plain(document: Any, index: int) -> Any:
    try:
        return json.loads(json.dumps(document, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(
            f"documents[{index}] holds a value JSON cannot represent: {exc}",
            field=f"documents[{index}]",
        ) from None


def load_manifests(*, body: bytes, media_type: str) -> list[Any]:
    """The manifests of a YAML or JSON body; a top-level list counts as its items.

    Raises InvalidInput naming the body (with the line of a YAML error) or a document,
    and TooLarge naming the limit passed.
    """
    limits = BodyLimits.from_settings()
    if not decode_text(body).strip():
        raise InvalidInput("the body holds no manifests", field="body")
    if media_type in JSON_MEDIA_TYPES:
        loaded = [load_json(body, limits)]
    else:
        loaded = load_yaml_documents(body, limits)
    documents: list[Any] = []
    for item in loaded:
        if item is None:
            continue  # an empty document between two "---"
        if isinstance(item, list):
            documents.extend(item)
        else:
            documents.append(item)
    if not documents:
        raise InvalidInput("the body holds no manifests", field="body")
    _Budget(limits).check_documents(len(documents))
    return documents

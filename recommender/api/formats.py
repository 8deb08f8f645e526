"""API parsers and renderers: bounded bodies, CSV, YAML, manifests, streamed rows.

Every parser reads at most ``API_MAX_BODY_BYTES`` and answers a larger body with a 413
before parsing anything, whatever the Content-Length says; what it reads is parsed by
``bodies`` within the structure limits (documents, values, depth, keys, string length).
Renderers neutralise what a reader's tool would execute: CSV cells that a spreadsheet
reads as a formula, and line breaks in the comment lines of manifests.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from django.conf import settings
from rest_framework import parsers, renderers
from rest_framework.utils.encoders import JSONEncoder

from recommender.api.bodies import load_json
from recommender.errors import TooLarge
from recommender.services.advice.drift import junit_xml
from recommender.services.advice.patches import answer_text
from recommender.text import csv_cell


def read_limited(stream: Any, parser_context: Mapping[str, Any] | None) -> bytes:
    """The whole body, or RequestTooLarge once it passes ``API_MAX_BODY_BYTES``."""
    limit = settings.API_MAX_BODY_BYTES
    request = (parser_context or {}).get("request")
    meta = getattr(request, "META", {}) if request is not None else {}
    try:
        declared = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise TooLarge(
            f"the request body has {declared} bytes; the limit is {limit} bytes "
            "(VPAWEB_API_MAX_BODY_BYTES)"
        )
    if stream is None:
        return b""
    data: bytes = stream.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(
            f"the request body is larger than {limit} bytes (VPAWEB_API_MAX_BODY_BYTES)"
        )
    return data


class JSONParser(parsers.BaseParser):
    """Strict JSON (no NaN or Infinity), size- and structure-limited (``bodies``)."""

    media_type = "application/json"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        """Decode the body as JSON."""
        return load_json(read_limited(stream, parser_context))


class FormParser(parsers.FormParser):
    """``application/x-www-form-urlencoded``, size-limited like every other body.

    Django's own limits then hold too: at most ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields
    (a breach is a 400 naming it).
    """

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        """Decode the form fields."""
        data = read_limited(stream, parser_context)
        return super().parse(io.BytesIO(data), media_type, parser_context)


@dataclass(frozen=True)
class RawBody:
    """A body kept as bytes for the service to parse (manifests), and its type."""

    data: bytes
    media_type: str


class ManifestYAMLParser(parsers.BaseParser):
    """Manifests as YAML (one or many documents); parsed by the rightsize service."""

    media_type = "application/yaml"

    def parse(  # type: ignore[override]  # the raw bytes, parsed by the view
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> RawBody:
        """Return the raw bytes, size-limited."""
        return RawBody(read_limited(stream, parser_context), self.media_type)


class ManifestXYAMLParser(ManifestYAMLParser):
    """``application/x-yaml``, as older tools send YAML."""

    media_type = "application/x-yaml"


class ManifestTextYAMLParser(ManifestYAMLParser):
    """``text/yaml``."""

    media_type = "text/yaml"


class ManifestPlainTextParser(ManifestYAMLParser):
    """``text/plain``: what ``curl --data-binary`` sends when no type is given is form
    data, but many CI tools default to text/plain."""

    media_type = "text/plain"


class ManifestJSONParser(ManifestYAMLParser):
    """Manifests as JSON (an object, a List, or an array of objects)."""

    media_type = "application/json"


MANIFEST_PARSERS = [
    ManifestYAMLParser,
    ManifestXYAMLParser,
    ManifestTextYAMLParser,
    ManifestPlainTextParser,
    ManifestJSONParser,
]


def _plain(data: Any) -> Any:
    """Serializer output (ReturnDict, Decimal, datetime) as plain JSON types."""
    return json.loads(json.dumps(data, cls=JSONEncoder))


# libyaml's C dumper when PyYAML was built with it (faster than the Python one).
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def yaml_text(plain: Any) -> str:
    """The one YAML dump of an answer (plain JSON types): block style, keys in their
    order, UTF-8 text. A list dumped a chunk of items at a time is the same text as
    dumped whole (``stream_rows``)."""
    text: str = yaml.dump(
        plain, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True
    )
    return text


class YAMLRenderer(renderers.BaseRenderer):
    """Any response as YAML (``?format=yaml``): the one YAML renderer."""

    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        """Dump the data as one YAML document."""
        if data is None:
            return b""
        return yaml_text(_plain(data)).encode()


class CSVRenderer(renderers.BaseRenderer):
    """A list of flat rows as CSV (``?format=csv``); the view names the columns."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        """Write a header row and one row per item."""
        view = (renderer_context or {}).get("view")
        columns = list(getattr(view, "csv_columns", []))
        rows = data if isinstance(data, list) else [data]
        if not columns and rows and isinstance(rows[0], dict):
            columns = list(rows[0])
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: csv_cell(v) for k, v in dict(row).items()})
        return out.getvalue().encode()


# Rows written per chunk of a streamed answer: few enough to keep memory flat, enough
# that a chunk is not a write per row.
STREAM_ROWS_PER_CHUNK = 500


def _chunks(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The first row alone (it leaves as soon as it is read), then full chunks."""
    chunk: list[dict[str, Any]] = []
    for number, row in enumerate(rows):
        chunk.append(row)
        if number == 0 or len(chunk) >= STREAM_ROWS_PER_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def stream_rows(
    rows: Iterable[dict[str, Any]], *, format: str, columns: list[str]
) -> Iterator[bytes]:
    """Flat rows as the bytes the renderer of ``format`` (csv, json, yaml) would
    write for the whole list, produced a chunk of rows at a time: memory holds one
    chunk, however many rows there are, and the first bytes go out at once."""
    if format == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        # The header goes before the first row is read: the answer starts at once,
        # however long the database takes to find the first rows.
        yield out.getvalue().encode()
        out.seek(0)
        out.truncate()
        for chunk in _chunks(rows):
            for row in chunk:
                writer.writerow({k: csv_cell(v) for k, v in row.items()})
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()
    elif format == "yaml":
        # A sequence dumped an item at a time is the same text as dumped whole.
        is_empty = True
        for chunk in _chunks(rows):
            is_empty = False
            yield yaml_text(chunk).encode()
        if is_empty:
            yield b"[]\n"
    else:
        # DRF's JSONRenderer's output: compact, UTF-8, no NaN.
        encoder = JSONEncoder(
            ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
        yield b"["  # before the first row is read, as the CSV header
        separator = ""
        for chunk in _chunks(rows):
            parts = []
            for row in chunk:
                parts.append(separator)
                parts.append(encoder.encode(row))
                separator = ","
            yield "".join(parts).encode()
        yield b"]"


class ManifestsYAMLRenderer(YAMLRenderer):
    """Only the right-sized manifests, as multi-document YAML for ``kubectl apply``;
    any other answer (an error) as :class:`YAMLRenderer` writes it."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        """Comment lines naming each change, then the manifests."""
        plain = _plain(data)
        if not isinstance(plain, dict) or "manifests" not in plain:
            return super().render(data, accepted_media_type, renderer_context)
        return answer_text(plain).encode()


class JUnitXMLRenderer(renderers.BaseRenderer):
    """The drift check as JUnit XML (``?format=junit``), for CI test reports."""

    media_type = "application/xml"
    format = "junit"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        """A test case per container; anything else (the browsable form) as JSON."""
        plain = _plain(data)
        if not isinstance(plain, dict) or "containers" not in plain:
            return json.dumps(plain).encode()
        return junit_xml(plain).encode()

"""JSON columns that repeat across a fleet, read as text and parsed once per text.

Discovery compares, every cycle, the resources of every container and live pod with
the stored ones (``Container.template_resources`` and ``resource_sources``,
``WorkloadPod.containers``). Their values repeat from row to row (the pods of a
workload carry the same resources, the sources are a handful of words), so parsing
each distinct text once per process, instead of each row every cycle, removes most of
the JSON decoding of a steady cycle. The values are shared: read them,
never change them. ``load``: a text that rarely repeats (labels, selectors), parsed
each time, kept nowhere.
"""

from __future__ import annotations

from typing import Any

import msgspec
from django.db.models import TextField
from django.db.models.functions import Cast

# Distinct texts kept; past it the memo starts again (a fleet whose rows all differ
# would only cost memory here).
LIMIT = 20_000

_PARSED: dict[str, Any] = {}


def as_text(column: str) -> Cast:
    """The column (a JSONField) read as its JSON text."""
    return Cast(column, TextField())


def parse(text: str | None) -> Any:
    """The value of a JSON text read with ``as_text`` (shared: do not change it)."""
    if text is None:
        return None
    try:
        return _PARSED[text]
    except KeyError:
        pass
    value = _decode(text)
    if len(_PARSED) >= LIMIT:
        _PARSED.clear()
    _PARSED[text] = value
    return value


def load(text: str | None) -> Any:
    """The value of a JSON text read with ``as_text``, parsed afresh (the caller's)."""
    return None if text is None else _decode(text)


# The texts are PostgreSQL's or SQLite's JSON: msgspec parsed 130,000 label texts in
# 0.14 s against json.loads's 0.46 s (load 1.2).
_decode = msgspec.json.decode

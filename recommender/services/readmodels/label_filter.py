"""Workloads narrowed by a label selector in the Kubernetes text form
(``team=payments,tier!=batch``, ``env in (a,b)``, ``key``, ``!key``), as the
workloads list, the rollups, the API list and the export take it.

The selector is parsed by ``cluster/label_selector.py`` (the parser the namespace
opt-in uses) and matched in SQL against ``Workload.labels`` (a JSON object), so
paging and counting stay in the database on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import re
from typing import TypeVar

from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.lookups import In

from recommender.cluster import label_selector
from recommender.errors import InvalidInput

# The longest selector taken (Cluster.namespace_selector's bound).
MAX_SELECTOR = 1000
FIELD = "label_selector"

# What a selector may be, as one regular expression the OpenAPI schema also carries (so
# a schema-valid value is never refused): the parser's syntax with plain spaces around
# operators and commas, and a label prefix of up to three DNS labels. Every string it
# matches parses; a string it does not match is refused even where the parser would
# read it (``parsed_selector``), so the API, its schema and the dashboard take the same.
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_KEY = rf"(?:{_DNS_LABEL}(?:\.{_DNS_LABEL}){{0,2}}/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_TERM = (
    rf"(?:{_KEY} *(?:==|!=|=) *{_VALUE}"
    rf"|{_KEY} +(?:in|notin) +\( *{_VALUE}(?: *, *{_VALUE})* *\)"
    rf"|!{_KEY}|{_KEY})"
)
PATTERN = rf"^{_TERM}(?: *, *{_TERM})*$"

_Q = TypeVar("_Q", bound=QuerySet)  # type: ignore[type-arg]


def parsed_selector(
    text: str, *, field: str = FIELD
) -> tuple[label_selector.Requirement, ...]:
    """The requirements of ``text``; ``InvalidInput`` naming ``field`` and what is
    wrong (an empty selector has none)."""
    if len(text) > MAX_SELECTOR:
        raise InvalidInput(
            f"the label selector is longer than {MAX_SELECTOR} characters",
            field=field,
        )
    try:
        requirements = label_selector.parse(text)
    except ValueError as exc:
        raise InvalidInput(str(exc), field=field) from None
    if requirements and re.fullmatch(PATTERN, text) is None:
        raise InvalidInput(
            f"label selector {text[:100]!r}: write requirements as key=value, "
            "key!=value, key in (a,b), key notin (a,b), key or !key, separated by "
            "commas, with no space before or after the selector and no label prefix "
            "of more than three DNS labels",
            field=field,
        )
    return requirements


def selector_q(requirements: tuple[label_selector.Requirement, ...]) -> Q:
    """A filter on ``labels`` that holds where every requirement does."""
    q = Q()
    for requirement in requirements:
        has_key = Q(labels__has_key=requirement.key)
        value_in = Q(
            In(KeyTextTransform(requirement.key, "labels"), list(requirement.values))
        )
        if requirement.operator == "exists":
            q &= has_key
        elif requirement.operator == "!":
            q &= ~has_key
        elif requirement.operator == "in":
            q &= has_key & value_in
        else:
            # notin: a missing label is not one of the values (NOT IN on the NULL
            # of a missing key would be NULL, so the key's absence is its own term).
            q &= ~has_key | (has_key & ~value_in)
    return q


def with_labels(queryset: _Q, selector: str) -> _Q:
    """``queryset`` (of workloads) narrowed to those whose labels match
    ``selector``; ``InvalidInput`` for a malformed one."""
    requirements = parsed_selector(selector)
    if not requirements:
        return queryset
    return queryset.filter(selector_q(requirements))

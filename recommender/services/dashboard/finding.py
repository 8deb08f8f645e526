"""Finding workloads: a label selector in the Kubernetes syntax and a search term
(``namespace/name`` as the list writes names, or part of either) as ``Q`` filters on
``Workload``, shared by the workloads list and the API. A bad selector is an
``InvalidInput`` naming ``field``."""

from __future__ import annotations

from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.lookups import In

from recommender.cluster import label_selector
from recommender.errors import InvalidInput

# A whole selector as a pattern, for the API's schema.
SELECTOR_PATTERN = label_selector.SELECTOR_PATTERN


def label_selector_q(text: str, *, field: str = "label_selector") -> Q:
    """The workloads whose labels ``text`` selects (``team=payments,tier!=batch``,
    ``env in (a,b)``, ``key``, ``!key``); ``Q()`` for an empty selector."""
    try:
        requirements = label_selector.parse(text)
    except ValueError as exc:
        raise InvalidInput(str(exc), field=field) from None
    selected = Q()
    for requirement in requirements:
        has_key = Q(labels__has_key=requirement.key)
        value_in = Q(
            In(KeyTextTransform(requirement.key, "labels"), requirement.values)
        )
        if requirement.operator == "exists":
            selected &= has_key
        elif requirement.operator == "!":
            selected &= ~has_key
        elif requirement.operator == "in":
            selected &= has_key & value_in
        else:  # notin: no such label, or a value not listed
            selected &= ~has_key | (has_key & ~value_in)
    return selected


def search_q(term: str) -> Q:
    """Workloads whose name or namespace contains ``term``; ``namespace/name`` (as
    the list writes them) matches both parts."""
    matches = Q(name__icontains=term) | Q(namespace__icontains=term)
    namespace, slash, name = term.partition("/")
    if slash:
        # "catalog/bill", "catalog/" or "/bill": each side given narrows its part.
        both = Q()
        if namespace:
            both &= Q(namespace__icontains=namespace)
        if name:
            both &= Q(name__icontains=name)
        matches |= both
    return matches

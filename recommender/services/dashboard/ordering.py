"""The one vocabulary for sorting workloads, shared by the dashboard and the API.

``ordering=`` takes comma-separated keys, ``-`` for descending (``-savings_monthly``,
``-risk,-savings_monthly``); ties are broken by id, so pages never overlap. The
dashboard's older ``sort=`` values stay accepted as aliases (``LEGACY_SORTS``).
"""

from __future__ import annotations

import re

# Sort keys and the fields they order by (``-key`` for descending).
WORKLOAD_ORDERING = {
    "name": "name",
    "namespace": "namespace",
    "cluster": "cluster__name",
    "kind": "kind",
    "replicas": "replicas",
    "savings_monthly": "savings",
    "risk": "risk",
    "recent_ooms": "recent_ooms",
    "shortfall_percent": "shortfall",
    "id": "pk",
}
DEFAULT_WORKLOAD_ORDERING = ["cluster__name", "namespace", "kind", "name", "pk"]
_KEY = "-?(?:" + "|".join(WORKLOAD_ORDERING) + ")"
ORDERING_PATTERN = f"^{_KEY}(?:,{_KEY})*$"
MAX_ORDERING = 400
ORDERING_ERROR = (
    "not a list of sort keys: give comma-separated keys from "
    + ", ".join(WORKLOAD_ORDERING)
    + " (prefix - for descending)"
)
# The dashboard's ``sort=`` values before it spoke ``ordering=``, and their orderings.
LEGACY_SORTS = {
    "name": "",
    "savings": "-savings_monthly",
    "risk": "-risk,-savings_monthly",
}
# Fields of Workload.objects.with_provisioning's annotations (the facts).
FACT_FIELDS = ("savings", "risk", "recent_ooms", "shortfall")


def parse_ordering(value: str) -> list[str] | None:
    """The keys of an ``ordering=`` value, a key given again dropped; None when it is
    not one (an empty value is the default order, ``[]``)."""
    if value == "":
        return []
    if len(value) > MAX_ORDERING or re.fullmatch(ORDERING_PATTERN, value) is None:
        return None
    keys: list[str] = []
    for key in value.split(","):
        if key.lstrip("-") not in {k.lstrip("-") for k in keys}:
            keys.append(key)
    return keys


def workload_order(ordering: list[str] | None) -> list[str]:
    """The ``order_by`` of parsed ordering keys; ties by id."""
    if not ordering:
        return DEFAULT_WORKLOAD_ORDERING
    fields = []
    for key in ordering:
        field = WORKLOAD_ORDERING[key.lstrip("-")]
        fields.append(f"-{field}" if key.startswith("-") else field)
    if "pk" not in {f.lstrip("-") for f in fields}:
        fields.append("pk")
    return fields


def orders_by_facts(ordering: list[str] | None) -> bool:
    """Whether the ordering reads the provisioning facts."""
    return any(
        WORKLOAD_ORDERING[key.lstrip("-")] in FACT_FIELDS for key in ordering or []
    )

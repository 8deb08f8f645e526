"""A namespace's LimitRanges as stored by discovery (``NamespaceLimitRange``), for the
capping of recommendations.

Discovery combines each namespace's Container items and its Pod items as upstream
does (``engine.capping.combine_limit_ranges``: lowest Max, highest Min, last Default,
lowest maxLimitRequestRatio)
and stores them as JSON in the fields of ``engine.capping.LimitRangeItem``; these
functions give them back as ``LimitRangeItem`` values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import Resources
from recommender.models import NamespaceLimitRange

# (the combined Container item, the combined Pod item); None where the namespace has
# no item of that type.
LimitRangePair = tuple[LimitRangeItem | None, LimitRangeItem | None]
# maxLimitRequestRatio is stored in the same shape, as MilliValues
# (``LimitRangeItem.max_limit_request_ratio``); rows stored before it read as none.
ITEM_FIELDS = ("max", "min", "default", "default_request", "max_limit_request_ratio")


def item_to_dict(item: LimitRangeItem | None) -> dict[str, Any] | None:
    """A ``LimitRangeItem`` as stored JSON (None stays None)."""
    if item is None:
        return None
    result: dict[str, Any] = {"type": item.type}
    for name in ITEM_FIELDS:
        amounts: Resources = getattr(item, name)
        result[name] = {
            "cpu_millicores": amounts.cpu_millicores,
            "memory_bytes": amounts.memory_bytes,
        }
    return result


def item_from_dict(data: dict[str, Any] | None) -> LimitRangeItem | None:
    """Stored JSON (or an adapter's LimitRange item) as a ``LimitRangeItem``.

    Raises ValueError naming the field for a malformed amount (LimitRangeItem checks).
    """
    if data is None:
        return None
    amounts = {}
    for name in ITEM_FIELDS:
        raw = data.get(name) or {}
        amounts[name] = Resources(raw.get("cpu_millicores"), raw.get("memory_bytes"))
    return LimitRangeItem(type=data["type"], **amounts)


def limit_ranges_for(*, cluster_id: int, namespace: str) -> LimitRangePair:
    """The combined (Container, Pod) LimitRange items of one namespace."""
    row = NamespaceLimitRange.objects.filter(
        cluster_id=cluster_id, namespace=namespace
    ).first()
    if row is None:
        return None, None
    return item_from_dict(row.container_item), item_from_dict(row.pod_item)


def limit_ranges_by_namespace(
    *, cluster_id: int, namespaces: Iterable[str]
) -> dict[str, LimitRangePair]:
    """``limit_ranges_for`` of many namespaces in one query (for lists); namespaces
    without LimitRanges are left out."""
    rows = NamespaceLimitRange.objects.filter(
        cluster_id=cluster_id, namespace__in=list(namespaces)
    )
    return {
        row.namespace: (
            item_from_dict(row.container_item),
            item_from_dict(row.pod_item),
        )
        for row in rows
    }

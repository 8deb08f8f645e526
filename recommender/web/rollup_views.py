"""The rollups page: totals by cluster, namespace, team label or kind, and the
savings trend chart (drawn by static/js/rollups.js from a json_script tag)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from recommender.errors import InvalidInput
from recommender.models import Cluster, ProvisioningStatus
from recommender.roles import Role
from recommender.services.readmodels.provisioning import Prices
from recommender.services.readmodels.rollups import (
    BY_CHOICES,
    NO_LABEL,
    Rollup,
    RollupGroup,
    default_label_key,
    rollup,
)
from recommender.services.readmodels.savings_trend import savings_trend
from recommender.web.access import require_role

TREND_DAYS = (7, 30, 90, 365)
# A week: hourly points, so a new install's trend shows from its first hours.
DEFAULT_TREND_DAYS = 7


def list_query(result: Rollup, group: RollupGroup) -> str:
    """The workloads list's query string showing ``group``'s workloads: the
    rollup's cluster and label selector, narrowed by the group (a team's
    ``key=value``; ``!key`` for the workloads without the label)."""
    query: dict[str, str] = {}
    selector = [result.label_selector] if result.label_selector else []
    cluster = result.cluster
    if result.by == "cluster":
        cluster = group.name
    elif result.by == "namespace":
        cluster = group.cluster
        query["namespace"] = group.name
    elif result.by == "kind":
        query["kind"] = group.name
    elif group.name == NO_LABEL:
        selector.append(f"!{result.key}")
    else:
        selector.append(f"{result.key}={group.name}")
    if cluster:
        query["cluster"] = cluster
    if selector:
        query["label_selector"] = ",".join(selector)
    return urlencode(query)


@require_GET
@require_role(Role.VIEWER)
def rollups(request: HttpRequest) -> HttpResponse:
    """``?by=cluster|namespace|label|kind`` (``&key=`` for a label, ``&cluster=``,
    ``&days=`` of trend); an unknown ``by`` or a bad key is a 400 saying so."""
    by = request.GET.get("by", "") or "namespace"
    key = request.GET.get("key", "").strip()
    cluster = request.GET.get("cluster", "").strip()
    selector = request.GET.get("label_selector", "").strip()
    raw_days = request.GET.get("days", "") or str(DEFAULT_TREND_DAYS)
    days = (
        int(raw_days)
        if raw_days.isdigit() and int(raw_days) in TREND_DAYS
        else DEFAULT_TREND_DAYS
    )
    now = timezone.now()
    context: dict[str, object] = {
        "page": "rollups",
        "by": by,
        "key": key or default_label_key(),
        "cluster": cluster,
        "label_selector": selector,
        "days": days,
        "trend_days": TREND_DAYS,
        "by_choices": BY_CHOICES.items(),
        "clusters": list(
            Cluster.objects.filter(is_enabled=True)
            .order_by("name")
            .values_list("name", flat=True)
        ),
        "statuses": ProvisioningStatus.CHOICES,
    }
    status = 200
    try:
        result = rollup(
            by=by,
            key=key if by == "label" else "",
            cluster=cluster,
            label_selector=selector,
            now=now,
            prices=Prices.from_settings(),
        )
    except InvalidInput as exc:
        context["error"] = exc.message
        status = 400
    else:
        context["rollup"] = result
        context["rows"] = [
            (group, list_query(result, group)) for group in result.groups
        ]
    trend = savings_trend(now=now, days=days, cluster=cluster)
    context["trend"] = trend
    context["trend_data"] = {
        "resolution": trend.resolution,
        "at": [point.at.isoformat() for point in trend.points],
        "savings": [round(point.savings_monthly, 2) for point in trend.points],
        "realized": [
            round(point.realized_savings_monthly, 2) for point in trend.points
        ],
        "requested_cpu": [point.requested_cpu_millicores for point in trend.points],
        "recommended_cpu": [point.recommended_cpu_millicores for point in trend.points],
        "requested_memory": [point.requested_memory_bytes for point in trend.points],
        "recommended_memory": [
            point.recommended_memory_bytes for point in trend.points
        ],
    }
    return render(request, "recommender/rollups.html", context, status=status)

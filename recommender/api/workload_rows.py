"""The workload list's rows without ModelSerializer: two queries and plain dicts.

``WorkloadSerializer`` (serializers.py) documents the shape in the OpenAPI schema and
is the reference: :func:`workload_rows` gives the same dicts (byte for byte once
rendered; tests/api/test_workload_rows.py compares the two on a varied fleet) from
``values_list`` rows, without model instances, prefetch machinery or DRF fields. A
page of 100 workloads costs a few milliseconds of Python instead of tens."""
# The provisioning facts (status, savings, risk, OOM kills, shortfall, missing
# requests) are the annotations of ``Workload.objects.with_provisioning`` that
# ``api.queries.workload_queryset()`` adds, read as columns of the same row, when the
# whole list is filtered or sorted by them. A plain page (``facts=False``) computes them
# in Python from its own containers with ``container_facts`` / ``workload_facts``, the
# rule those annotations mirror (tests/services/test_provisioning_parity.py): Django
# compiling the annotated query cost more than everything else of a page.

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, tzinfo
from types import SimpleNamespace
from typing import Any, cast

from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.settings import api_settings

from recommender.engine.resources import Resources
from recommender.models import Container, Policy, Workload
from recommender.models.provisioning import (
    INIT_KIND,
    PriceRates,
    ProvisioningFacts,
    RiskRules,
    container_facts,
    pods_billed,
    recent_oom_counts,
    workload_facts,
)
from recommender.services.advice.pod_spec import resource_list
from recommender.services.readmodels.provisioning import Prices, per_run, runs_a_month

# The workload columns, in the order the row tuples carry them.
WORKLOAD_COLUMNS = (
    "pk",
    "cluster__name",
    "namespace",
    "kind",
    "name",
    "uid",
    "replicas",
    "labels",
    "is_active",
    "first_seen_at",
    "last_seen_at",
    "hpa_conflicts",
    "policy__mode",
    "policy__profile",
    "running_hours_month",
    "price_per_core_hour",
    "price_per_gib_hour",
    "price_source",
    "schedule",
)
# Annotations of Workload.objects.with_provisioning (models/provisioning.py).
FACT_COLUMNS = (
    "status",
    "savings",
    "risk",
    "recent_ooms",
    "shortfall",
    "missing_count",
)
_REC = "latest_recommendation__"
CONTAINER_COLUMNS = (
    "workload_id",
    "name",
    "kind",
    "position",
    "request_cpu_millicores",
    "request_memory_bytes",
    "limit_cpu_millicores",
    "limit_memory_bytes",
    "resource_sources",
    "template_resources",
    "latest_recommendation_id",
    f"{_REC}created_at",
    f"{_REC}target_cpu_millicores",
    f"{_REC}target_memory_bytes",
    f"{_REC}lower_cpu_millicores",
    f"{_REC}lower_memory_bytes",
    f"{_REC}upper_cpu_millicores",
    f"{_REC}upper_memory_bytes",
    f"{_REC}uncapped_cpu_millicores",
    f"{_REC}uncapped_memory_bytes",
    # Read only for the facts of a plain page (after the eight amounts above).
    f"{_REC}floor_cpu_millicores",
    f"{_REC}floor_memory_bytes",
    # The live pods' mean requests, which the savings count (billed_request).
    "pods_request_cpu_millicores",
    "pods_request_memory_bytes",
    "pk",
)


class _Times:
    """DRF's DateTimeField output (ISO 8601 in the current time zone, ``Z`` for UTC),
    with the time zone and the format looked up once."""

    def __init__(self) -> None:
        self.format: str | None = api_settings.DATETIME_FORMAT
        self.zone: tzinfo | None = timezone.get_current_timezone()

    def __call__(self, value: datetime | None) -> Any:
        # As rest_framework.fields.DateTimeField.to_representation, for the ISO
        # format the API uses (anything else goes through DRF itself).
        if not value:
            return None
        if self.format is None or self.format.lower() != "iso-8601":
            from rest_framework.fields import DateTimeField

            return DateTimeField().to_representation(value)
        if self.zone is not None:
            value = (
                value.astimezone(self.zone)
                if timezone.is_aware(value)
                else timezone.make_aware(value, self.zone)
            )
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text


def _text(value: Any) -> Any:
    return None if value is None else str(value)


def _hpa_conflict(conflict: dict[str, Any]) -> dict[str, Any]:
    resources = conflict["resources"]
    return {
        "name": _text(conflict["name"]),
        "resources": None
        if resources is None
        else [_text(resource) for resource in resources],
    }


def template_resources(template: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    """A container's stored ``template_resources`` as the API shows them."""
    template = template or {}
    return {
        kind: resource_list(
            Resources(
                (template.get(kind) or {}).get("cpu"),
                (template.get(kind) or {}).get("memory"),
            )
        )
        for kind in ("requests", "limits")
    }


def _container(row: tuple[Any, ...], times: _Times) -> dict[str, Any]:
    (
        _,
        name,
        kind,
        position,
        request_cpu,
        request_memory,
        limit_cpu,
        limit_memory,
        sources,
        template,
        rec_id,
        created_at,
        *amounts,
    ) = row
    recommendation = None
    if rec_id is not None:
        recommendation = {
            "created_at": times(created_at),
            "target": resource_list(Resources(amounts[0], amounts[1])),
            "lowerBound": resource_list(Resources(amounts[2], amounts[3])),
            "upperBound": resource_list(Resources(amounts[4], amounts[5])),
            "uncappedTarget": resource_list(Resources(amounts[6], amounts[7])),
        }
    return {
        "name": _text(name),
        "kind": kind,
        "position": None if position is None else int(position),
        "requests": resource_list(Resources(request_cpu, request_memory)),
        "limits": resource_list(Resources(limit_cpu, limit_memory)),
        "sources": dict(sources or {}),
        "template": template_resources(template),
        "recommendation": recommendation,
    }


def workload_values(
    workloads: QuerySet[Workload], *, facts: bool = True
) -> QuerySet[Any]:
    """``workloads`` (filtered and ordered as they are) as the row tuples
    :func:`workload_rows` reads: one query, which a paginator may slice and count.
    ``facts``: the rows carry the annotated provisioning facts (``workloads`` comes
    from ``with_provisioning``); without, workload_rows computes them."""
    columns = WORKLOAD_COLUMNS + FACT_COLUMNS if facts else WORKLOAD_COLUMNS
    return workloads.select_related(None).prefetch_related(None).values_list(*columns)


def _computed_facts(
    containers: dict[int, list[tuple[Any, ...]]],
    replicas: dict[int, float],
    *,
    prices: dict[int, PriceRates],
    rules: RiskRules,
) -> dict[int, tuple[Any, ...]]:
    """The FACT_COLUMNS of each workload from its container rows, as
    ``with_provisioning`` annotates them: one more query for recent OOM kills."""
    regular = {
        pk: [row for row in rows if row[_AT["kind"]] != INIT_KIND]
        for pk, rows in containers.items()
    }
    kills = recent_oom_counts(
        (row[_AT["pk"]] for rows in regular.values() for row in rows), rules
    )
    out = {}
    for pk, rows in regular.items():
        facts = workload_facts(
            container_facts(
                _as_container(row),
                recent_ooms=kills.get(row[_AT["pk"]], 0),
                replicas=replicas[pk],
                prices=prices[pk],
                rules=rules,
            )
            for row in rows
        )
        out[pk] = _fact_columns(facts)
    return out


# Where each CONTAINER_COLUMNS value stands in a row, and the recommendation fields
# container_facts reads.
_AT = {name: index for index, name in enumerate(CONTAINER_COLUMNS)}
_FACT_REC_FIELDS = tuple(
    f"{kind}_{unit}"
    for kind in ("target", "lower", "floor")
    for unit in ("cpu_millicores", "memory_bytes")
)


def _as_container(row: tuple[Any, ...]) -> Container:
    """The attributes ``container_facts`` reads, from a CONTAINER_COLUMNS row."""
    rec = None
    if row[_AT["latest_recommendation_id"]] is not None:
        rec = SimpleNamespace(
            **{name: row[_AT[f"{_REC}{name}"]] for name in _FACT_REC_FIELDS}
        )
    return cast(
        Container,
        SimpleNamespace(
            request_cpu_millicores=row[_AT["request_cpu_millicores"]],
            request_memory_bytes=row[_AT["request_memory_bytes"]],
            pods_request_cpu_millicores=row[_AT["pods_request_cpu_millicores"]],
            pods_request_memory_bytes=row[_AT["pods_request_memory_bytes"]],
            latest_recommendation=rec,
        ),
    )


def _fact_columns(facts: ProvisioningFacts) -> tuple[Any, ...]:
    return (
        facts.status,
        facts.savings,
        facts.risk,
        facts.recent_ooms,
        facts.shortfall_percent,
        1 if facts.missing_requests else 0,
    )


def workload_rows(
    page: Iterable[tuple[Any, ...]],
    *,
    prices: Prices | None = None,
    rules: RiskRules | None = None,
) -> list[dict[str, Any]]:
    """``WorkloadSerializer(workloads, many=True).data`` as plain dicts, from the rows
    of :func:`workload_values` (e.g. a page of them), in their order: one more query
    for all their containers with their latest recommendations. Rows without the fact
    columns (``facts=False``) need ``prices`` and ``rules``, and one query more."""
    page = list(page)
    if not page:
        return []
    containers: dict[int, list[tuple[Any, ...]]] = {row[0]: [] for row in page}
    # Container's own ordering (workload, position, name): the serializer's order.
    for row in Container.objects.filter(workload_id__in=list(containers)).values_list(
        *CONTAINER_COLUMNS
    ):
        containers[row[0]].append(row)
    if len(page[0]) == len(WORKLOAD_COLUMNS):
        if prices is None or rules is None:
            raise ValueError("rows without facts need prices and rules")
        computed = _computed_facts(
            containers,
            {row[0]: pods_billed(row[6], row[14]) for row in page},
            # The workload's own prices (its nodes'), else the list prices.
            prices={
                row[0]: Prices(
                    prices.per_core_hour if row[15] is None else row[15],
                    prices.per_gib_hour if row[16] is None else row[16],
                )
                for row in page
            },
            rules=rules,
        )
        page = [row + computed[row[0]] for row in page]
    times = _Times()
    out = []
    for (
        pk,
        cluster,
        namespace,
        kind,
        name,
        uid,
        replicas,
        labels,
        is_active,
        first_seen_at,
        last_seen_at,
        hpa_conflicts,
        mode,
        profile,
        running_hours_month,
        _price_per_core_hour,
        _price_per_gib_hour,
        price_source,
        schedule,
        status,
        savings,
        risk,
        recent_ooms,
        shortfall,
        missing_count,
    ) in page:
        rows = containers[pk]
        has_policy = mode is not None
        out.append(
            {
                "id": pk,
                "cluster": cluster,
                "namespace": _text(namespace),
                "kind": kind,
                "name": _text(name),
                "uid": _text(uid),
                "replicas": None if replicas is None else int(replicas),
                "running_hours_month": None
                if running_hours_month is None
                else round(float(running_hours_month), 2),
                "runs_a_month": _rounded(runs_a_month(schedule or "")),
                "savings_per_run": _rounded(per_run(float(savings), schedule or "")),
                "labels": labels,
                "is_active": None if is_active is None else bool(is_active),
                "status": status,
                "savings_monthly": round(float(savings), 2),
                "price_source": price_source or "default",
                "at_risk": risk > 0,
                "risk": int(risk),
                "recent_ooms": int(recent_ooms),
                "shortfall_percent": int(shortfall),
                "wasteful": savings > 0,
                "missing_requests": missing_count > 0,
                "mode": mode if has_policy else Policy.Mode.OFF,
                "profile": profile if has_policy else "vpa",
                "first_seen_at": times(first_seen_at),
                "last_seen_at": times(last_seen_at),
                "hpa_conflicts": None
                if hpa_conflicts is None
                else [_hpa_conflict(c) for c in hpa_conflicts],
                "containers": [_container(row, times) for row in rows],
            }
        )
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)

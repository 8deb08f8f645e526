"""The namespace comparison page: every workload of a namespace under profile A vs B."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from recommender.engine import DEFAULT_PROFILE, PROFILES
from recommender.errors import InvalidInput, NotFound, VpawebError
from recommender.models import Cluster, Workload
from recommender.roles import Role
from recommender.services.namespace_compare import (
    DEFAULT_WORST,
    MAX_WORST,
    compare_namespace,
)
from recommender.services.replay import parse_settings
from recommender.services.whatif import DEFAULT_DAYS, MAX_DAYS
from recommender.web.access import require_role
from recommender.web.whatif_views import METRICS, _cell


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@require_GET
@require_role(Role.VIEWER)
def cluster_compare(request: HttpRequest, pk: int) -> HttpResponse:
    """The form; with ``namespace`` in the query, the totals and the worst workloads."""
    cluster = get_object_or_404(Cluster, pk=pk)
    query = request.GET
    namespaces = sorted(
        set(
            Workload.objects.filter(cluster=cluster).values_list("namespace", flat=True)
        )
    )
    chosen = {
        "namespace": query.get("namespace", ""),
        "a": query.get("a", DEFAULT_PROFILE),
        "b": query.get("b", ""),
        "overrides_a": query.get("overrides_a", ""),
        "overrides_b": query.get("overrides_b", ""),
        "days": query.get("days", f"{DEFAULT_DAYS:g}"),
        "worst": query.get("worst", str(DEFAULT_WORST)),
    }
    context: dict[str, Any] = {
        "cluster": cluster,
        "namespaces": namespaces,
        "profiles": sorted(PROFILES),
        "chosen": chosen,
        "max_days": MAX_DAYS,
        "max_worst": MAX_WORST,
        "page": "workloads",
    }
    if chosen["namespace"] and chosen["b"]:
        try:
            result = compare_namespace(
                cluster_id=cluster.pk,
                namespace=chosen["namespace"],
                profile_a=chosen["a"],
                profile_b=chosen["b"],
                overrides_a=parse_settings(_lines(chosen["overrides_a"])),
                overrides_b=parse_settings(_lines(chosen["overrides_b"])),
                days=chosen["days"],
                worst=chosen["worst"],
                now=timezone.now(),
            )
        except InvalidInput as exc:
            context["errors"] = [
                f"{name}: {'; '.join(msgs)}" for name, msgs in exc.fields.items()
            ] or [exc.message]
        except NotFound as exc:
            if "cluster" in exc.message and "does not exist" in exc.message:
                raise Http404(exc.message) from None
            context["errors"] = [exc.message]
        except VpawebError as exc:  # the cluster or its source cannot be read
            context["errors"] = [exc.message]
        else:
            row_a, row_b = result["rows"]
            context["result"] = result
            context["table"] = [
                (label, _cell(row_a.get(key), fmt), _cell(row_b.get(key), fmt))
                for key, label, fmt in METRICS
            ]
            context["worst"] = [
                {
                    "workload": w["workload"],
                    "cells": [
                        _cell(w.get(key), fmt)
                        for key, fmt in (
                            ("a_memory_overrun_days_pct", "{:.2f}"),
                            ("b_memory_overrun_days_pct", "{:.2f}"),
                            ("a_memory_slack_mean", "{:.3f}"),
                            ("b_memory_slack_mean", "{:.3f}"),
                            ("a_cpu_slack_mean", "{:.3f}"),
                            ("b_cpu_slack_mean", "{:.3f}"),
                            ("a_updater_proposals", "{:.0f}"),
                            ("b_updater_proposals", "{:.0f}"),
                        )
                    ],
                }
                for w in result["worst"]
            ]
    return render(request, "recommender/compare.html", context)

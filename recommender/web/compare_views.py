"""The namespace comparison page: every workload of a namespace under profile A vs B.

The replay runs in the background (``tasks.compare_namespace``; in-process when there
is no Redis) and the page follows it, reloading every two seconds, until its answer is
in the cache (services/replay/namespace_compare.py).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from recommender import tasks
from recommender.engine import DEFAULT_PROFILE, PROFILES
from recommender.errors import InvalidInput, SourceUnavailable, Throttled
from recommender.models import Cluster, Workload
from recommender.roles import Role
from recommender.services.replay.namespace_compare import (
    DEFAULT_WORST,
    MAX_WORST,
    check_request,
    stored,
)
from recommender.services.replay.replay import parse_settings
from recommender.services.replay.whatif import DEFAULT_DAYS, MAX_DAYS
from recommender.web.access import require_role
from recommender.web.whatif_views import METRICS, _cell, page_status

WORST_COLUMNS = (
    ("a_memory_overrun_days_pct", "{:.2f}"),
    ("b_memory_overrun_days_pct", "{:.2f}"),
    ("a_memory_slack_mean", "{:.3f}"),
    ("b_memory_slack_mean", "{:.3f}"),
    ("a_cpu_slack_mean", "{:.3f}"),
    ("b_cpu_slack_mean", "{:.3f}"),
    ("a_updater_proposals", "{:.0f}"),
    ("b_updater_proposals", "{:.0f}"),
)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def cluster_compare(request: HttpRequest, pk: int) -> HttpResponse:
    """The form (GET, filled from the query); POSTed, a comparison starts (or the
    identical one already there is followed); GET with ``run``, its progress and
    then the totals and the worst workloads. Starting one is a POST with CSRF: a link
    a viewer opens never queues work."""
    cluster = get_object_or_404(Cluster, pk=pk)
    query = request.POST if request.method == "POST" else request.GET
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
    token = request.GET.get("run", "")
    if request.method == "POST":
        params = {
            "cluster_id": cluster.pk,
            "namespace": chosen["namespace"],
            "profile_a": chosen["a"],
            "profile_b": chosen["b"],
            "days": chosen["days"],
            "worst": chosen["worst"],
        }
        try:
            params["overrides_a"] = parse_settings(_lines(chosen["overrides_a"]))
            params["overrides_b"] = parse_settings(_lines(chosen["overrides_b"]))
            check_request(**params)
        except InvalidInput as exc:
            context["errors"] = [
                f"{name}: {'; '.join(msgs)}" for name, msgs in exc.fields.items()
            ] or [exc.message]
            return render(request, "recommender/compare.html", context)
        # Long replays run in the background (a worker on the heavy queue; in-process
        # without Redis); the page then follows the run until its answer is there.
        try:
            token = tasks.start_compare_namespace(params, who=f"user-{request.user.pk}")
        except (Throttled, SourceUnavailable) as exc:
            context["errors"] = [exc.message]
            return render(
                request, "recommender/compare.html", context, status=page_status(exc)
            )
        shown = {k: v for k, v in query.dict().items() if k != "csrfmiddlewaretoken"}
        return redirect(f"{request.path}?{urlencode({**shown, 'run': token})}")
    if token:
        try:
            state = stored(token)
        except SourceUnavailable as exc:
            context["errors"] = [exc.message]
            return render(
                request, "recommender/compare.html", context, status=page_status(exc)
            )
        if state is None:
            context["errors"] = [
                "this comparison has expired or is unknown; run it again"
            ]
        elif state["state"] == "failed":
            context["errors"] = state["errors"]
        elif state["state"] != "done":
            context["running"] = state
        else:
            _add_result(context, state["result"])
    return render(request, "recommender/compare.html", context)


def _add_result(context: dict[str, Any], result: dict[str, Any]) -> None:
    row_a, row_b = result["rows"]
    context["result"] = result
    context["table"] = [
        (label, _cell(row_a.get(key), fmt), _cell(row_b.get(key), fmt))
        for key, label, fmt in METRICS
    ]
    context["worst"] = [
        {
            "workload": w["workload"],
            "cells": [_cell(w.get(key), fmt) for key, fmt in WORST_COLUMNS],
        }
        for w in result["worst"]
    ]

"""The what-if page: a workload's last days replayed under another profile; past
the synchronous budget (services/replay/whatif_jobs.py) on the heavy queue, the page
following it."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from recommender import tasks
from recommender.engine import PROFILES
from recommender.errors import (
    InvalidInput,
    NotFound,
    SourceUnavailable,
    Throttled,
    VpawebError,
)
from recommender.models import Workload
from recommender.roles import Role
from recommender.services.access import heavy_jobs
from recommender.services.replay import whatif_jobs
from recommender.services.replay.replay import parse_settings
from recommender.services.replay.whatif import DEFAULT_DAYS, MAX_DAYS, what_if
from recommender.web.access import require_role

# The rows of the side-by-side table: (key, label, format).
METRICS = (
    ("container_days", "container-days scored", "{:.0f}"),
    ("memory_slack_mean", "memory slack, mean", "{:.3f}"),
    ("memory_slack_median", "memory slack, median", "{:.3f}"),
    ("memory_overrun_days_pct", "memory overrun days %", "{:.2f}"),
    ("memory_over_upper_days_pct", "days above the upper bound %", "{:.2f}"),
    ("memory_over_1_2_target_days_pct", "days above 1.2 x target %", "{:.2f}"),
    ("cpu_slack_mean", "CPU slack, mean", "{:.3f}"),
    ("cpu_above_target_pct", "CPU samples above target %", "{:.2f}"),
    ("changes_per_day_p50", "target changes per day, p50", "{:g}"),
    ("changes_per_day_p99", "target changes per day, p99", "{:g}"),
    ("days_without_memory_change_pct", "days without a memory change %", "{:.1f}"),
    ("updater_proposals", "resizes the updater would have proposed", "{:.0f}"),
)


def _cell(value: Any, fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


def page_status(exc: VpawebError) -> int:
    """The status of a what-if or comparison page that says ``exc``, as the API
    answers it: 429 for a spent budget, 503 while the cache, the broker or the
    cluster's source is away; 200 for a mistake the form names."""
    if isinstance(exc, Throttled):
        return 429
    if isinstance(exc, SourceUnavailable):
        return 503
    return 200


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def workload_what_if(request: HttpRequest, pk: int) -> HttpResponse:
    """The form (GET, filled from the query); POSTed (with CSRF), the replay side by
    side, within the user's budget of expensive requests
    (services/access/heavy_jobs.py)."""
    workload = get_object_or_404(
        Workload.objects.select_related("cluster", "policy"), pk=pk
    )
    query = request.POST if request.method == "POST" else request.GET
    chosen = query.get("profile", "")
    overrides_text = query.get("overrides", "")
    days_text = query.get("days", f"{DEFAULT_DAYS:g}")
    context: dict[str, Any] = {
        "workload": workload,
        "profiles": sorted(PROFILES),
        "chosen": chosen,
        "overrides_text": overrides_text,
        "days_text": days_text,
        "max_days": MAX_DAYS,
        "page": "workloads",
    }
    token = request.GET.get("run", "")
    status = 200
    if request.method == "GET" and token:
        try:
            _follow(context, token)
        except SourceUnavailable as exc:
            context["errors"] = [exc.message]
            status = page_status(exc)
    if request.method == "POST":
        who = f"user-{request.user.pk}"
        try:
            lines = [line for line in overrides_text.splitlines() if line.strip()]
            overrides = parse_settings(lines)
            if whatif_jobs.runs_in_background(workload_id=workload.pk, days=days_text):
                # Past the synchronous budget: a worker on the heavy queue runs it
                # (in-process without Redis) and the page follows it.
                params = {
                    "workload_id": workload.pk,
                    "profile": chosen,
                    "overrides": overrides,
                    "days": days_text,
                }
                token = tasks.start_what_if(params, who=who, now=timezone.now())
                query_string = urlencode(
                    {
                        "profile": chosen,
                        "days": days_text,
                        "overrides": overrides_text,
                        "run": token,
                    }
                )
                return redirect(f"{request.path}?{query_string}")
            with heavy_jobs.slot(who=who, now_s=time.time()):
                result = what_if(
                    workload_id=workload.pk,
                    profile=chosen,
                    overrides=overrides,
                    days=days_text,
                    now=timezone.now(),
                )
        except InvalidInput as exc:
            context["errors"] = [
                f"{name}: {'; '.join(msgs)}" for name, msgs in exc.fields.items()
            ] or [exc.message]
        except NotFound as exc:
            if "workload" in exc.message and "does not exist" in exc.message:
                raise Http404(exc.message) from None
            context["errors"] = [exc.message]
        except VpawebError as exc:  # a budget, the cache, the cluster or its source
            context["errors"] = [exc.message]
            status = page_status(exc)
        else:
            _add_result(context, result)
    return render(request, "recommender/whatif.html", context, status=status)


def _follow(context: dict[str, Any], token: str) -> None:
    """A background what-if's state on the page: running, its errors, or its answer."""
    state = whatif_jobs.stored(token)
    if state is None:
        context["errors"] = ["this what-if has expired or is unknown; run it again"]
    elif state["state"] == "failed":
        context["errors"] = [state.get("message", "the what-if failed")]
    elif state["state"] != "done":
        context["running"] = state
    else:
        _add_result(context, state["result"])


def _add_result(context: dict[str, Any], result: dict[str, Any]) -> None:
    current, candidate = result["rows"]
    context["result"] = result
    context["table"] = [
        (label, _cell(current.get(key), fmt), _cell(candidate.get(key), fmt))
        for key, label, fmt in METRICS
    ]
    context["charts"] = {
        c["name"]: {**c["chart"], "labels": [current["profile"], candidate["profile"]]}
        for c in result["containers"]
    }

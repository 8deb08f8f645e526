"""Dashboard views: thin. They read request input, call a service and render a template.

One view serves both the page and its htmx fragment (``HX-Request``). Every view is
wrapped in ``require_role``; tests/web/test_access.py proves it for the whole URLconf.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from recommender.engine import DEFAULT_PROFILE
from recommender.errors import Conflict, InvalidInput, NotFound
from recommender.models import (
    Policy,
    ProvisioningStatus,
    ResizeChange,
    Workload,
)
from recommender.roles import Role
from recommender.services.actuation import approvals, control, decision
from recommender.services.admission.counters import hour_and_day_totals
from recommender.services.admission.preview import webhook_preview
from recommender.services.advice.history import history_shortfall
from recommender.services.dashboard import insights, workload_insight
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.dashboard.startup_boost import startup_boost_panel
from recommender.services.operations.cluster_health import failing_clusters
from recommender.services.policy import (
    changes as policies,
)
from recommender.services.policy import (
    validation as policy_validation,
)
from recommender.services.policy import windows
from recommender.services.policy.impact import LARGE_INCREASE_FACTOR
from recommender.services.policy.rules import field_sources
from recommender.services.readmodels.provisioning import Prices
from recommender.web.access import (
    acting_user,
    is_htmx,
    require_role,
)
from recommender.web.changes import (
    with_rejection_reasons,
    with_window_notes,
    workload_changes,
)
from recommender.web.forms import PolicyForm
from recommender.web.presenters import (
    MIN_HISTORY_SPAN_S,
    describe_explanation,
    describe_overrides,
    describe_windows,
    history_span_s,
    is_profile_stale,
)

logger = logging.getLogger(__name__)

TOP_NAMESPACES = 20


def _not_found(exc: NotFound) -> HttpResponse:
    raise Http404(exc.message)


@require_GET
@require_role(Role.VIEWER)
def overview(request: HttpRequest) -> HttpResponse:
    """Fleet totals, savings, workloads at risk, coverage and the last refresh runs."""
    data = fleet_overview(now=timezone.now(), prices=Prices.from_settings())
    top_namespaces = sorted(data.by_namespace, key=lambda t: -t.savings)[
        :TOP_NAMESPACES
    ]
    failures = failing_clusters()
    context = {
        "overview": data,
        "failing_clusters": failures,
        "leaderless": control.leaderless_clusters(now=timezone.now()),
        "failure_of": {failure.cluster: failure for failure in failures},
        "top_namespaces": top_namespaces,
        "namespaces_more": len(data.by_namespace) > len(top_namespaces),
        "refresh_interval": settings.REFRESH_INTERVAL_S,
        "admission": dict(
            zip(("hour", "day"), hour_and_day_totals(now=timezone.now()), strict=True)
        ),
        "page": "overview",
    }
    if is_htmx(request):
        return render(request, "recommender/partials/_overview_live.html", context)
    return render(request, "recommender/overview.html", context)


@require_GET
@require_role(Role.VIEWER)
def workloads(request: HttpRequest) -> HttpResponse:
    """The filterable, sortable, paginated list of workloads. An unknown kind, mode,
    status, fact or sort, or a malformed label selector, is a 400 saying so (the
    list below leaves that filter out)."""
    given = insights.WorkloadFilters(
        cluster=request.GET.get("cluster", ""),
        namespace=request.GET.get("namespace", ""),
        kind=request.GET.get("kind", ""),
        mode=request.GET.get("mode", ""),
        status=request.GET.get("status", ""),
        at_risk=request.GET.get("at_risk", ""),
        wasteful=request.GET.get("wasteful", ""),
        missing_requests=request.GET.get("missing_requests", ""),
        q=request.GET.get("q", ""),
        label_selector=request.GET.get("label_selector", ""),
        ordering=request.GET.get("ordering", ""),
        sort=request.GET.get("sort", ""),
    )
    filter_errors = given.errors()
    filters = given.cleaned()
    page = insights.list_workloads(
        filters=filters,
        page=request.GET.get("page", 1),
        now=timezone.now(),
        prices=Prices.from_settings(),
    )
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page_obj": page,
        "filters": filters,
        # As typed, so a malformed selector stays in its box beside its error.
        "label_selector": given.label_selector,
        "query": query.urlencode(),
        "export_query": urlencode(given.export_query()),
        "choices": insights.filter_choices(),
        "statuses": ProvisioningStatus.CHOICES,
        "facts": [
            ("at_risk", "At risk", filters.at_risk),
            ("wasteful", "Wasteful", filters.wasteful),
            ("missing_requests", "Missing requests", filters.missing_requests),
        ],
        "sorts": insights.sort_choices(filters.ordering),
        "is_filtered": filters.is_filtered,
        "filter_errors": filter_errors,
        "page": "workloads",
    }
    if is_htmx(request):
        # htmx swaps only 2xx answers: the errors are in the body.
        return render(request, "recommender/partials/_workload_table.html", context)
    status = 400 if filter_errors else 200
    return render(request, "recommender/workloads.html", context, status=status)


def _policy_context(
    request: HttpRequest,
    workload: Workload,
    policy: Policy,
    form: PolicyForm | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "workload": workload,
        "policy": policy,
        "form": form or PolicyForm(workload=workload, policy=policy),
        "mode_consequences": [
            (mode, policies.mode_consequence(mode)) for mode in Policy.Mode.values
        ],
        **extra,
    }


@require_GET
@require_role(Role.VIEWER)
def workload(request: HttpRequest, pk: int) -> HttpResponse:
    """One workload: numbers, explanation, history, ready-to-use result, policy."""
    try:
        data = workload_insight.workload_insight(
            workload_id=pk,
            now=timezone.now(),
            prices=Prices.from_settings(),
            # The snippets pass the history gate unless asked (low confidence).
            include_short_history=request.GET.get("include_short_history") == "1",
        )
    except NotFound as exc:
        return _not_found(exc)
    overrides = policy_validation.effective_overrides(data.policy)
    profile_name = data.policy.profile if data.policy is not None else DEFAULT_PROFILE
    context = {
        "insight": data,
        "policy_overrides": describe_overrides(overrides),
        "containers": [
            {
                "item": item,
                "why": describe_explanation(
                    item.explanation, oom_effect=item.oom_effect
                ),
                "is_profile_stale": is_profile_stale(
                    item.recommendation,
                    profile_name=profile_name,
                    overrides=overrides,
                ),
                "history_span_s": history_span_s(item.history),
                "is_history_chartable": len(item.history) > 1
                and history_span_s(item.history) >= MIN_HISTORY_SPAN_S,
            }
            for item in data.containers
        ],
        "chart_containers": [item.container.name for item in data.containers],
        "workload": data.workload,
        "history_data": {
            item.container.name: {
                "t": [rec.created_at.isoformat() for rec in item.history],
                "target_cpu": [rec.target_cpu_millicores for rec in item.history],
                "lower_cpu": [rec.lower_cpu_millicores for rec in item.history],
                "upper_cpu": [rec.upper_cpu_millicores for rec in item.history],
                "target_memory": [rec.target_memory_bytes for rec in item.history],
                "lower_memory": [rec.lower_memory_bytes for rec in item.history],
                "upper_memory": [rec.upper_memory_bytes for rec in item.history],
            }
            for item in data.containers
        },
        "page": "workloads",
        **workload_changes(data.workload),
        # Containers whose recommendation neither the webhook nor the updater acts
        # on yet: "not enough history yet: N h of 24 h".
        "history_waits": [
            (item.container.name, why)
            for item in data.containers
            if item.recommendation is not None
            and (why := history_shortfall(item.recommendation)) is not None
        ],
        "never_disrupted": _never_disrupted(data.workload, data.policy),
        "startup_boost": startup_boost_panel(
            workload=data.workload, policy=data.policy
        ),
        # Where each policy field comes from (own, annotation, rule, default).
        "policy_sources": [
            (name, entry["given_by"])
            for name, entry in field_sources(data.policy).items()
        ],
        **_waiting(data.workload, data.policy),
    }
    open_changes: list[ResizeChange] = context["open_changes"]
    for change in open_changes:
        change.workload = data.workload  # its policy read once, not per change
    with_window_notes(open_changes, now=timezone.now())
    # "Approve all proposed" only when there is one to approve.
    context["has_proposed"] = any(
        change.status == ResizeChange.Status.PROPOSED for change in open_changes
    )
    context["webhook"] = (
        None
        if data.advice_inputs is None
        else webhook_preview(
            workload=data.workload,
            policy=data.policy,
            containers=[item.container for item in data.containers],
            inputs=data.advice_inputs,
            now=timezone.now(),
        )
    )
    context.update(_policy_context(request, data.workload, data.policy))
    return render(request, "recommender/workload.html", context)


def _waiting(workload: Workload, policy: Policy | None) -> dict[str, Any]:
    """What holds the workload's changes back, as the Changes page tells it: its
    maintenance windows (the policy's and the cluster's, whether open now and
    from when otherwise) and why the updater does not write to its cluster."""
    now = timezone.now()
    policy_windows = policy.maintenance_windows if policy is not None else []
    cluster_windows = workload.cluster.maintenance_windows
    state = windows.window_state(policy_windows, cluster_windows, now=now)
    # Read once for the page: the header shows the same state (context.safety).
    safety = control.safety_state()
    return {
        "safety": safety,
        "maintenance": {
            "policy": describe_windows(policy_windows),
            "cluster": describe_windows(cluster_windows),
            "is_open": state.is_open,
            "opens_at": state.opens_at,
        },
        "write_block": control.cluster_block_reason(
            workload.cluster, kill_switch=safety.kill_switch
        ),
    }


def _never_disrupted(workload: Workload, policy: Policy | None) -> str | None:
    """Why the updater proposes no change for this workload's pods, if it never
    disrupts them (a workload the updater acts on, below ``min_replicas``)."""
    if policy is None or not policy.is_actionable or not policy.in_acting_mode:
        return None
    return decision.below_min_replicas(
        workload.replicas, policy.min_replicas or settings.UPDATER_MIN_REPLICAS
    )


@require_GET
@require_role(Role.VIEWER)
def workload_charts(request: HttpRequest, pk: int) -> HttpResponse:
    """The charts' data (engine histograms and stored hourly usage), loaded after the
    page."""
    try:
        charts = workload_insight.workload_charts(workload_id=pk, now=timezone.now())
    except NotFound as exc:
        return _not_found(exc)
    return render(
        request,
        "recommender/partials/_workload_charts.html",
        {
            "workload": charts.workload,
            "chart_containers": charts.container_names,
            "chart_data": charts.chart_data,
        },
    )


@require_http_methods(["GET", "POST"])
@require_role(Role.OPERATOR)
def workload_policy(request: HttpRequest, pk: int) -> HttpResponse:
    """Edit a workload's policy; every change of mode, and raising any target by
    more than 2x, need an explicit confirmation."""
    try:
        workload = Workload.objects.select_related("policy").get(pk=pk)
    except Workload.DoesNotExist:
        return _not_found(NotFound(f"workload {pk} does not exist"))
    policy = getattr(workload, "policy", None) or Policy(workload=workload)
    if request.method == "GET":
        # The workload page swaps in the form (htmx); a link opened on its own gets
        # the whole page around it.
        return render(
            request,
            "recommender/partials/_policy_form.html"
            if is_htmx(request)
            else "recommender/policy.html",
            _policy_context(request, workload, policy),
        )
    form = PolicyForm(request.POST, workload=workload, policy=policy)
    extra: dict[str, Any] = {}
    if form.is_valid():
        changes = form.changes()
        # Every change between modes (and of the approval while acting) is confirmed.
        switching = changes["mode"] != policy.mode or (
            changes.get("approval", policy.approval) != policy.approval
            and changes["mode"] != Policy.Mode.OFF
        )
        if switching and request.POST.get("confirm_mode") != changes["mode"]:
            extra["confirm"] = {
                "mode": changes["mode"],
                "from_mode": policy.mode,
                "consequence": policies.mode_consequence(changes["mode"]),
                "approval": policies.approval_consequence(
                    changes["mode"], changes.get("approval", policy.approval)
                ),
            }
        else:
            try:
                policy = policies.update_policy(
                    workload_id=workload.pk,
                    # The form sends every field: only those it changes become the
                    # workload's own; the others keep following annotations and rules.
                    changes={
                        name: value
                        for name, value in changes.items()
                        if getattr(policy, name) != value
                    },
                    actor=acting_user(request),
                    now=timezone.now(),
                    confirm_large_increase=bool(
                        request.POST.get("confirm_large_increase")
                    ),
                )
            except InvalidInput as exc:
                form.add_service_errors(exc.fields)
            except policies.LargeIncreaseUnconfirmed as exc:
                extra["confirm_increase"] = {
                    "factor": LARGE_INCREASE_FACTOR,
                    "increases": [item.describe() for item in exc.increases],
                    # A mode confirmed in this post stays confirmed.
                    "mode": request.POST.get("confirm_mode", ""),
                }
            except Conflict as exc:  # a mirrored VPA object's policy: adopt it first
                form.add_error(None, exc.message)
            else:
                extra["saved"] = True
                form = PolicyForm(workload=workload, policy=policy)
    # htmx swaps only 2xx answers (and a 4xx would be a console error): errors are in
    # the body.
    status = 200 if is_htmx(request) or not form.is_bound or form.is_valid() else 422
    template = "recommender/partials/_policy_form.html"
    if not is_htmx(request):
        if extra.get("saved"):
            messages.success(request, "Policy saved.")
            return redirect("workload", pk=workload.pk)
        template = "recommender/policy.html"
    response = render(
        request,
        template,
        _policy_context(request, workload, policy, form, **extra),
        status=status,
    )
    if extra.get("saved"):
        # The workload page re-reads its live part (the Mode card, the webhook preview).
        response["HX-Trigger"] = "policy-saved"
    return response


@require_POST
@require_role(Role.OPERATOR)
def workload_adopt(request: HttpRequest, pk: int) -> HttpResponse:
    """Adopt a workload whose policy mirrors a VPA object: vpaweb's own, in Off."""
    try:
        policy = policies.adopt_policy(
            workload_id=pk, actor=acting_user(request), now=timezone.now()
        )
    except NotFound as exc:
        return _not_found(exc)
    except InvalidInput as exc:
        return HttpResponseBadRequest(exc.message)
    except Conflict as exc:
        messages.error(request, exc.message)
    else:
        note = " Conflict: see the warning below." if policy.has_vpa_conflict else ""
        messages.success(request, f"Adopted: vpaweb's policy now, mode Off.{note}")
    return redirect("workload", pk=pk)


def _decide(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    now = timezone.now()
    error = ""
    try:
        if decision == "approve":
            change = approvals.approve_change(
                change_id=pk, approved_by=acting_user(request), now=now
            )
        else:
            change = approvals.reject_change(
                change_id=pk,
                rejected_by=acting_user(request),
                now=now,
                reason=request.POST.get("reason", ""),
                snooze=request.POST.get("snooze") or ResizeChange.Snooze.UNTIL_CHANGED,
            )
    except NotFound as exc:
        return _not_found(exc)
    except Conflict as exc:
        error = exc.message
        change = ResizeChange.objects.select_related(
            "workload__cluster", "decided_by"
        ).get(pk=pk)
    with_rejection_reasons([change])
    if is_htmx(request):
        return render(
            request,
            "recommender/partials/_change_row.html",
            {"change": change, "error": error},
        )
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Change {pk} {change.status}.")
    back = request.POST.get("next", "")
    if back and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(back)  # the workload page's approve buttons come back there
    return redirect("changes")


@require_POST
@require_role(Role.OPERATOR)
def change_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve a proposed resize change."""
    return _decide(request, pk, "approve")


@require_POST
@require_role(Role.OPERATOR)
def change_reject(request: HttpRequest, pk: int) -> HttpResponse:
    """Reject a proposed or approved resize change."""
    return _decide(request, pk, "reject")

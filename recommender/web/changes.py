"""The Changes page, bulk approval and the updater's switches (kill switch, pause).

Viewers see everything; operators approve, reject and approve in bulk; admins stop or
allow every cluster write (the kill switch) and pause a cluster. Single approvals and
rejections stay in ``views.py`` (``change_approve``, ``change_reject``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Max, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from recommender.errors import InvalidInput, NotFound
from recommender.models import ActuationControl, Cluster, ResizeChange, Workload
from recommender.roles import Role
from recommender.services.actuation import (
    approvals,
    control,
    permissions,
)
from recommender.services.actuation import (
    approve_all as bulk,
)
from recommender.services.policy import windows
from recommender.web.access import acting_user, is_htmx, require_role

CHANGES_PAGE_SIZE = 50  # groups (a workload's pods of one status and method) a page
PODS_SHOWN = 50  # a group's pods listed when it is expanded (the newest first)


@dataclass
class ChangeGroup:
    """One row of the Changes page: a workload's changes of one status and method
    (its replicas), newest first; the row expands to one line per pod."""

    workload: Workload
    status: str
    method: str
    pods: int  # how many changes the group has (``changes`` lists PODS_SHOWN at most)
    changes: list[ResizeChange]

    @property
    def first(self) -> ResizeChange:
        """The newest change: the row shows its resize and reason."""
        return self.changes[0]

    @property
    def pod_states(self) -> list[tuple[str, str]]:
        """(pod, what stands out about its change) for the row's at-a-glance line:
        verified, applied, waiting for a window or a disruption budget, or failed."""
        states = []
        for change in self.changes:
            if change.error:
                note = "error"
            elif change.verified_at:
                note = "verified"
            elif change.applied_at:
                note = "applied, not verified yet"
            elif getattr(change, "window_note", ""):
                note = "waits for a window"
            elif change.try_later_count:
                note = f"{change.try_later_count} × try later"
            else:
                note = change.status
            states.append((change.pod, note))
        return states

    @property
    def change_ids(self) -> list[int]:
        """The listed changes, which a group decision takes."""
        return [change.pk for change in self.changes]

    @property
    def is_uniform(self) -> bool:
        """True when every listed pod gets the same resize from the same requests."""
        return all(
            c.resources_after == self.first.resources_after
            and c.resources_before == self.first.resources_before
            for c in self.changes
        )

    def _span(self, attribute: str) -> tuple[datetime, datetime] | None:
        times = [t for c in self.changes if (t := getattr(c, attribute)) is not None]
        return (min(times), max(times)) if times else None

    @property
    def decided(self) -> tuple[datetime, datetime] | None:
        """First and last decision (approval, or rejection for rejected rows)."""
        return self._span("decided_at")

    @property
    def applied(self) -> tuple[datetime, datetime] | None:
        """First and last time the updater sent the write."""
        return self._span("applied_at")

    @property
    def verified(self) -> tuple[datetime, datetime] | None:
        """First and last time a pod was seen carrying the new requests."""
        return self._span("verified_at")


def change_groups(
    changes: QuerySet[ResizeChange], page_number: str | int
) -> tuple[Page[dict[str, Any]], list[ChangeGroup]]:
    """A page of groups of the filtered changes, newest group first: the paginator's
    count, the page's groups, their pods (a window over the page's groups) and their
    rejection reasons, whatever the number of groups or pods."""
    keys = (
        changes.order_by()
        .values("workload_id", "status", "method")
        .annotate(pods=Count("pk"), latest=Max("created_at"))
        .order_by("-latest", "workload_id", "status", "method")
    )
    page = Paginator(keys, CHANGES_PAGE_SIZE).get_page(page_number)
    of_page = Q(pk__in=[])
    for key in page:
        of_page |= Q(
            workload_id=key["workload_id"], status=key["status"], method=key["method"]
        )
    rank = Window(
        RowNumber(),
        partition_by=[F("workload_id"), F("status"), F("method")],
        order_by=[F("created_at").desc(), F("id").desc()],
    )
    listed_changes = with_rejection_reasons(
        list(changes.filter(of_page).annotate(rank=rank).filter(rank__lte=PODS_SHOWN))
    )
    rows: dict[tuple[int, str, str], list[ResizeChange]] = {}
    for change in listed_changes:
        rows.setdefault((change.workload_id, change.status, change.method), []).append(
            change
        )
    groups = []
    for key in page:
        listed = rows.get((key["workload_id"], key["status"], key["method"]))
        if not listed:
            continue  # decided between the two queries
        groups.append(
            ChangeGroup(
                workload=listed[0].workload,
                status=key["status"],
                method=key["method"],
                pods=key["pods"],
                changes=listed,
            )
        )
    return page, groups


def updater_state() -> dict[str, object]:
    """What the banner says about the updater's switches (two queries)."""
    row = ActuationControl.objects.first()
    clusters = list(Cluster.objects.filter(is_enabled=True).order_by("name"))
    return {
        "kill_switch": control.kill_switch_reason(row),
        "kill_switch_row": row,
        "dry_run": settings.UPDATER_DRY_RUN,
        "paused": [c.name for c in clusters if c.updates_paused],
        "clusters": clusters,
        "write_paths": {c.pk: permissions.write_paths(c) for c in clusters},
        "path_labels": list(permissions.PATH_LABELS.values()),
    }


def workload_changes(
    workload: Workload, *, history: int = 20, scan: int = 500
) -> dict[str, object]:
    """A workload page's open changes and its latest decided ones (one query over its
    latest ``scan`` changes; at most one is open per pod)."""
    latest = list(
        ResizeChange.objects.filter(workload=workload).select_related(
            "workload__cluster", "decided_by"
        )[:scan]
    )
    decided = [c for c in latest if not c.is_open][:history]
    now = timezone.now()
    snoozed: dict[str, ResizeChange] = {}
    for change in latest:  # newest first: one line per resize held back
        if (
            change.status == ResizeChange.Status.REJECTED
            and change.snooze
            and (change.snoozed_until is None or change.snoozed_until > now)
        ):
            key = json.dumps(change.resources_after, sort_keys=True)
            snoozed.setdefault(key, change)
    return {
        "open_changes": [c for c in latest if c.is_open],
        "change_history": with_rejection_reasons(decided),
        "snoozed_changes": list(snoozed.values()),
    }


def with_window_notes(rows: list[ResizeChange], *, now: datetime) -> None:
    """Set ``window_note`` on each approved change a maintenance window holds back:
    from when it applies (the row template shows it); no query."""
    for change in rows:
        change.window_note = ""  # type: ignore[attr-defined]
        if change.status != ResizeChange.Status.APPROVED:
            continue
        policy = getattr(change.workload, "policy", None)
        state = windows.window_state(
            policy.maintenance_windows if policy else [],
            change.workload.cluster.maintenance_windows,
            now=now,
        )
        if state.is_open:
            continue
        change.window_note = (  # type: ignore[attr-defined]
            f"waits for the maintenance window: applies from "
            f"{state.opens_at:%a %b %-d, %H:%M} UTC"
            if state.opens_at
            else "waits for a maintenance window (none within a week)"
        )


def with_rejection_reasons(rows: list[ResizeChange]) -> list[ResizeChange]:
    """Set ``rejection_reason`` on each change (its audit event's, else "") for the
    row template; one query."""
    reasons = approvals.rejection_reasons(change.pk for change in rows)
    for change in rows:
        change.rejection_reason = reasons.get(change.pk, "")  # type: ignore[attr-defined]
    return rows


@require_GET
@require_role(Role.VIEWER)
def changes(request: HttpRequest) -> HttpResponse:
    """Resize changes with filters; approve, reject and bulk approve for operators."""
    status = request.GET.get("status", "")
    cluster = request.GET.get("cluster", "").strip()
    namespace = request.GET.get("namespace", "").strip()
    method = request.GET.get("method", "")
    qs = ResizeChange.objects.select_related(
        "workload__cluster", "workload__policy", "decided_by"
    )
    if status in ResizeChange.Status.values:
        qs = qs.filter(status=status)
    else:
        status = ""
    if method in ResizeChange.Method.values:
        qs = qs.filter(method=method)
    else:
        method = ""
    if cluster:
        qs = qs.filter(workload__cluster__name=cluster)
    if namespace:
        qs = qs.filter(workload__namespace=namespace)
    page, groups = change_groups(qs, request.GET.get("page", 1))
    with_window_notes([c for g in groups for c in g.changes], now=timezone.now())
    filtered = bool(status or method or cluster or namespace)
    context = {
        "page_obj": page,
        "groups": groups,
        "status": status,
        "method": method,
        "cluster": cluster,
        "namespace": namespace,
        "statuses": ResizeChange.Status.choices,
        "methods": ResizeChange.Method.choices,
        "page": "changes",
        "filtered": filtered,
        "has_any": filtered or page.paginator.count > 0,
        "updater": updater_state(),
    }
    if is_htmx(request):
        return render(request, "recommender/partials/_changes_table.html", context)
    return render(request, "recommender/changes.html", context)


@require_POST
@require_role(Role.OPERATOR)
def changes_bulk_approve(request: HttpRequest) -> HttpResponse:
    """Approve every proposed change of a workload, or of a cluster's namespace: the
    first post shows what would be approved and asks to confirm (as a switch of mode
    does); the confirmed post approves exactly the changes shown."""
    raw_workload = request.POST.get("workload", "").strip()
    scope: dict[str, Any] = {
        "cluster": request.POST.get("cluster", "").strip() or None,
        "namespace": request.POST.get("namespace", "").strip() or None,
    }
    back = "changes"
    try:
        scope["workload_id"] = int(raw_workload) if raw_workload else None
        if scope["workload_id"] is not None:
            back = reverse("workload", args=[scope["workload_id"]])
        selection = bulk.proposed_changes(**scope)
        if request.POST.get("confirm") != "yes":
            shown = list(selection.select_related("workload__cluster")[: bulk.MAX_BULK])
            return render(
                request,
                "recommender/changes_bulk_confirm.html",
                {
                    "page": "changes",
                    "scope": scope,
                    "changes": shown,
                    "more": selection.count() - len(shown),
                    "workloads": _by_workload(shown),
                    "back": back,
                },
            )
        confirmed = [int(pk) for pk in request.POST.getlist("change")]
        result = bulk.approve_all(
            approved_by=acting_user(request),
            now=timezone.now(),
            change_ids=confirmed,
            **scope,
        )
    except ValueError:
        messages.error(request, f"workload must be a number, not {raw_workload!r}")
        return redirect("changes")
    except (InvalidInput, NotFound) as exc:
        messages.error(request, exc.message)
        return redirect("changes")
    text = f"Approved {len(result.approved)} change(s)."
    if result.skipped:
        text += f" Skipped {len(result.skipped)} decided meanwhile."
    messages.success(request, text)
    return redirect(back)


@require_POST
@require_role(Role.OPERATOR)
def changes_bulk_decide(request: HttpRequest, decision: str) -> HttpResponse:
    """Reject (one reason, one snooze) or withdraw the approvals of a group's changes
    (``change`` ids of one workload) or of a cluster's namespace; each change goes
    through its single decision and is audited on its own."""
    raw_workload = request.POST.get("workload", "").strip()
    try:
        workload_id = int(raw_workload) if raw_workload else None
    except ValueError:
        messages.error(request, f"workload must be a number, not {raw_workload!r}")
        return redirect("changes")
    scope: dict[str, Any] = {
        "workload_id": workload_id,
        "cluster": request.POST.get("cluster", "").strip() or None,
        "namespace": request.POST.get("namespace", "").strip() or None,
        "change_ids": [int(pk) for pk in request.POST.getlist("change") if pk.isdigit()]
        or None,
    }
    actor = acting_user(request)
    try:
        if decision == "reject":
            result = bulk.reject_all(
                rejected_by=actor,
                now=timezone.now(),
                reason=request.POST.get("reason", "")[:2000],
                snooze=request.POST.get("snooze", ResizeChange.Snooze.UNTIL_CHANGED),
                **scope,
            )
            verb = "Rejected"
        else:
            result = bulk.withdraw_all(withdrawn_by=actor, now=timezone.now(), **scope)
            verb = "Withdrew the approval of"
    except (InvalidInput, NotFound) as exc:
        messages.error(request, exc.message)
        return redirect("changes")
    text = f"{verb} {len(result.decided)} change(s)."
    if result.skipped:
        text += f" Skipped {len(result.skipped)} decided meanwhile."
    messages.success(request, text)
    back = request.POST.get("next", "")
    return redirect(back if back.startswith("/changes/") else "changes")


def _by_workload(changes: list[ResizeChange]) -> list[dict[str, Any]]:
    """The confirmation's lines: each workload once, with its pods."""
    lines: dict[int, dict[str, Any]] = {}
    for change in changes:
        line = lines.setdefault(
            change.workload_id,
            {"workload": change.workload, "pods": [], "first": change},
        )
        line["pods"].append(change.pod)
    return list(lines.values())


@require_POST
@require_role(Role.ADMIN)
def kill_switch(request: HttpRequest) -> HttpResponse:
    """Stop (or allow again) every cluster write."""
    stopped = request.POST.get("stopped") == "1"
    control.set_kill_switch(
        stopped=stopped,
        actor=acting_user(request),
        now=timezone.now(),
        reason=request.POST.get("reason", ""),
    )
    messages.success(
        request,
        "All cluster writes are stopped." if stopped else "Cluster writes are allowed.",
    )
    return redirect("changes")


@require_POST
@require_role(Role.ADMIN)
def cluster_actuation(request: HttpRequest, pk: int) -> HttpResponse:
    """Allow (or forbid) every write vpaweb makes to one cluster."""
    cluster = get_object_or_404(Cluster, pk=pk)
    allowed = request.POST.get("allowed") == "1"
    control.set_actuation_allowed(
        cluster=cluster, allowed=allowed, actor=acting_user(request), now=timezone.now()
    )
    messages.success(
        request,
        f"Writes to cluster {cluster.name} "
        + (
            "are allowed: its permissions are checked at the next updater cycle."
            if allowed
            else "are forbidden: vpaweb only reads it."
        ),
    )
    return redirect("changes")


@require_POST
@require_role(Role.ADMIN)
def cluster_pause(request: HttpRequest, pk: int) -> HttpResponse:
    """Pause (or resume) the updater's writes to one cluster."""
    cluster = get_object_or_404(Cluster, pk=pk)
    paused = request.POST.get("paused") == "1"
    control.set_cluster_paused(
        cluster=cluster, paused=paused, actor=acting_user(request), now=timezone.now()
    )
    messages.success(
        request,
        f"Updates of cluster {cluster.name} {'paused' if paused else 'resumed'}.",
    )
    return redirect("changes")

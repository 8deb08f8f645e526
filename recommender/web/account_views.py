"""Dashboard pages of accounts and records: the audit trail, background runs, users
and API tokens."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import F
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from recommender.errors import Conflict, Forbidden, InvalidInput, NotFound
from recommender.models import (
    ApiToken,
    AuditEvent,
    Cluster,
    RefreshRun,
)
from recommender.roles import ROLE_ORDER, Role, has_role, role_of
from recommender.services.access import accounts, tokens
from recommender.services.operations.retention import table_usage
from recommender.web.access import (
    acting_user,
    is_htmx,
    may_revoke_token,
    require_role,
    token_scopes_for,
)
from recommender.web.forms import (
    ActiveForm,
    NewUserForm,
    PasswordForm,
    RoleForm,
    TokenForm,
)

logger = logging.getLogger(__name__)

AUDIT_PAGE_SIZE = 50
RUNS_PAGE_SIZE = 50
TOKENS_PAGE_SIZE = 50


@require_GET
@require_role(Role.VIEWER)
def audit(request: HttpRequest) -> HttpResponse:
    """The audit log, newest first, filterable by action, actor and workload."""
    action = request.GET.get("action", "").strip()
    actor = request.GET.get("actor", "").strip()
    q = request.GET.get("q", "").strip()
    qs = AuditEvent.objects.select_related("workload")
    if action:
        qs = qs.filter(action=action)
    if actor:
        qs = qs.filter(actor_label__icontains=actor)
    if q:
        qs = qs.filter(workload__name__icontains=q) | qs.filter(message__icontains=q)
    page = Paginator(qs, AUDIT_PAGE_SIZE).get_page(request.GET.get("page", 1))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page_obj": page,
        "action": action,
        "actor": actor,
        "q": q,
        "query": query.urlencode(),
        "actions": list(
            AuditEvent.objects.order_by("action")
            .values_list("action", flat=True)
            .distinct()
        ),
        "page": "audit",
    }
    if is_htmx(request):
        return render(request, "recommender/partials/_audit_table.html", context)
    return render(request, "recommender/audit.html", context)


@dataclass(frozen=True)
class UserRowAction:
    """One change an admin makes from a user's row: the form it posts, the service
    that makes it (called with the form's cleaned data), and what to say."""

    form: type[forms.Form]
    change: Callable[..., object]
    done: str
    failed: str


# The ``form`` field of each row form on the Users page.
USER_ROW_ACTIONS = {
    "role": UserRowAction(
        RoleForm,
        accounts.set_user_role,
        "Role updated; their API tokens were revoked.",
        "Role not changed",
    ),
    "active": UserRowAction(
        ActiveForm, accounts.set_user_active, "User updated.", "User not changed"
    ),
    "password": UserRowAction(
        PasswordForm,
        accounts.set_user_password,
        "Password changed; their sessions ended and their API tokens were revoked.",
        "Password not changed",
    ),
}


def _change_user(
    request: HttpRequest, action: UserRowAction, *, now: datetime
) -> HttpResponse | None:
    """Make one row change; a redirect to the page when it is made, else None with the
    reason as a message."""
    form = action.form(request.POST)
    if not form.is_valid():
        problems = [str(e) for es in form.errors.values() for e in es]
        messages.error(request, f"{action.failed}: {'; '.join(problems)}")
        return None
    try:
        action.change(**form.cleaned_data, actor=acting_user(request), now=now)
    except (InvalidInput, NotFound) as exc:
        messages.error(request, f"{action.failed}: {exc.message}")
        return None
    except Forbidden as exc:
        raise PermissionDenied(exc.message) from None
    messages.success(request, action.done)
    return redirect("users")


@require_http_methods(["GET", "POST"])
@require_role(Role.ADMIN)
def users(request: HttpRequest) -> HttpResponse:
    """Admins manage users and their roles, and see the settings in force."""
    new_form = NewUserForm()
    if request.method == "POST":
        now = timezone.now()
        row_action = USER_ROW_ACTIONS.get(request.POST.get("form", ""))
        if row_action is not None:
            done = _change_user(request, row_action, now=now)
            if done is not None:
                return done
        else:
            new_form = NewUserForm(request.POST)
            if new_form.is_valid():
                try:
                    accounts.create_user(
                        username=new_form.cleaned_data["username"],
                        password=new_form.cleaned_data["password"],
                        role=new_form.cleaned_data["role"],
                        actor=acting_user(request),
                        now=now,
                    )
                except InvalidInput as exc:
                    new_form.add_error(
                        exc.field if exc.field in new_form.fields else None, exc.message
                    )
                except Forbidden as exc:
                    raise PermissionDenied(exc.message) from None
                else:
                    messages.success(request, "User created.")
                    return redirect("users")
    people = list(
        get_user_model().objects.order_by("username").prefetch_related("groups")
    )
    rows = []
    actor = acting_user(request)
    for person in people:
        role = role_of(person)
        label = role.value if role is not None else ""
        if person.is_superuser:
            label = "admin (superuser)"
        rows.append(
            {
                "user": person,
                "role": label,
                "can_manage": accounts.may_manage(actor=actor, user=person),
            }
        )
    context = {
        "rows": rows,
        "roles": [r.value for r in ROLE_ORDER],
        "new_form": new_form,
        "my_role": role_of(request.user),
        "settings_shown": [
            (
                "Price per core-hour",
                settings.PRICE_PER_CORE_HOUR,
                "VPAWEB_PRICE_PER_CORE_HOUR",
            ),
            (
                "Price per GiB-hour",
                settings.PRICE_PER_GIB_HOUR,
                "VPAWEB_PRICE_PER_GIB_HOUR",
            ),
            (
                "Refresh interval (s)",
                settings.REFRESH_INTERVAL_S,
                "VPAWEB_REFRESH_INTERVAL_S",
            ),
            ("Simulated cluster", settings.SIMULATION_ENABLED, "VPAWEB_SIMULATION"),
        ],
        "page": "users",
    }
    return render(request, "recommender/users.html", context)


@require_GET
@require_role(Role.VIEWER)
def runs(request: HttpRequest) -> HttpResponse:
    """Refresh, back-fill and expiry runs: progress, phase timings, counts, errors."""
    cluster = request.GET.get("cluster", "").strip()
    kind = request.GET.get("kind", "")
    status = request.GET.get("status", "")
    kind = kind if kind in RefreshRun.Kind.values else ""
    status = status if status in RefreshRun.Status.values else ""
    qs = RefreshRun.objects.select_related("cluster")
    if cluster:
        qs = qs.filter(cluster__name=cluster)
    if kind:
        qs = qs.filter(kind=kind)
    if status:
        qs = qs.filter(status=status)
    page = Paginator(qs, RUNS_PAGE_SIZE).get_page(request.GET.get("page", 1))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page_obj": page,
        "cluster": cluster,
        "kind": kind,
        "status": status,
        "query": query.urlencode(),
        "clusters": list(
            Cluster.objects.order_by("name").values_list("name", flat=True)
        ),
        "kinds": RefreshRun.Kind.values,
        "statuses": RefreshRun.Status.values,
        "is_running": any(run.status == RefreshRun.Status.RUNNING for run in page),
        "page": "runs",
    }
    if is_htmx(request):
        return render(request, "recommender/partials/_runs_table.html", context)
    # The storage panel: read on a full page only, not on every poll of the table.
    context["tables"] = table_usage()
    return render(request, "recommender/runs.html", context)


def _tokens_context(
    request: HttpRequest, form: TokenForm, **extra: Any
) -> dict[str, Any]:
    # Active tokens first (by name), then revoked ones, newest revocation first.
    qs = ApiToken.objects.select_related("created_by").order_by(
        F("revoked_at").desc(nulls_first=True), "name", "-created_at"
    )
    if not has_role(request.user, Role.OPERATOR):
        # A viewer sees their own tokens only: other people's names say too much.
        qs = qs.filter(created_by=request.user.pk)
    page = Paginator(qs, TOKENS_PAGE_SIZE).get_page(request.GET.get("page", 1))
    for token in page:
        token.revocable = token.is_active and may_revoke_token(  # type: ignore[attr-defined]
            request.user, token
        )
    return {
        "page_obj": page,
        "form": form,
        "rightsize_url": request.build_absolute_uri(reverse("rightsize")),
        "page": "tokens",
        **extra,
    }


def _token_form(request: HttpRequest, data: Any = None) -> TokenForm:
    role = role_of(request.user)
    return TokenForm(
        data,
        allowed_scopes=token_scopes_for(request.user),
        role=role.value if role else "",
    )


@require_http_methods(["GET", "POST"])
@require_role(Role.VIEWER)
def api_tokens(request: HttpRequest) -> HttpResponse:
    """List API tokens and create one; the new key is shown in this answer only."""
    if request.method == "GET":
        context = _tokens_context(request, _token_form(request))
        if is_htmx(request):
            return render(request, "recommender/partials/_tokens.html", context)
        return render(request, "recommender/tokens.html", context)
    form = _token_form(request, request.POST)
    created: dict[str, Any] | None = None
    if form.is_valid():
        try:
            token, key = tokens.create_token(
                name=form.cleaned_data["name"],
                scope=form.cleaned_data["scope"],
                created_by=acting_user(request),
                now=timezone.now(),
            )
        except InvalidInput as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            created = {"token": token, "key": key}
            form = _token_form(request)
    context = _tokens_context(request, form, created=created)
    # htmx swaps only 2xx answers: errors are in the body.
    status = 200 if is_htmx(request) or created else 422
    template = (
        "recommender/partials/_tokens.html"
        if is_htmx(request)
        else "recommender/tokens.html"
    )
    response = render(request, template, context, status=status)
    # The key is in this answer and nowhere else: no cache may keep a copy.
    add_never_cache_headers(response)
    return response


@require_POST
@require_role(Role.VIEWER)
def api_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke a token: admins any, everyone else their own."""
    token = ApiToken.objects.select_related("created_by").filter(pk=pk).first()
    if token is None:
        raise Http404(f"api token {pk} does not exist")
    if not may_revoke_token(request.user, token):
        raise PermissionDenied("only admins revoke tokens that other people created")
    error = ""
    try:
        token = tokens.revoke_token(
            token_id=pk, revoked_by=acting_user(request), now=timezone.now()
        )
    except Conflict as exc:
        error = exc.message
        token.refresh_from_db()
    if is_htmx(request):
        token.revocable = False  # type: ignore[attr-defined]
        return render(
            request,
            "recommender/partials/_token_row.html",
            {"token": token, "error": error},
        )
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Token {token.name!r} revoked.")
    return redirect("api_tokens")

"""The policy rules page: the list (viewers), and for operators a rule's form, its
preview and its deletion.

Every edit goes through ``services/policy/rule_edits.py`` as the API's does: a first
post previews it (``dry_run``: how many workloads change, which, and what each gets);
"Apply" stores exactly the previewed rule (a rule edited since its preview is
previewed again) and asks to confirm an edit that turns actuation on for more than
one workload. The service audits each edit and each policy it changes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from recommender.errors import InvalidInput, NotFound
from recommender.models import Cluster, PolicyRule
from recommender.roles import Role
from recommender.services.policy import rule_edits
from recommender.services.policy.rules import ANNOTATED_KINDS
from recommender.web.access import acting_user, require_role
from recommender.web.forms import RuleForm

PREVIEW_SHOWN = 100  # workloads the page lists (the count is always whole)


@require_GET
@require_role(Role.VIEWER)
def policy_rules(request: HttpRequest) -> HttpResponse:
    """Every rule with its scope, its fields and how many workloads follow it."""
    counts = rule_edits.workloads_per_rule()
    rules = [
        {**rule_edits.rule_snapshot(rule), "workloads": counts.get(rule.pk, 0)}
        for rule in PolicyRule.objects.select_related("cluster")
    ]
    return render(request, "recommender/rules.html", {"page": "rules", "rules": rules})


@require_http_methods(["GET", "POST"])
@require_role(Role.OPERATOR)
def policy_rule_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Create (``pk`` None) or change a rule: preview first, then apply."""
    rule = get_object_or_404(PolicyRule, pk=pk) if pk is not None else None
    clusters = list(Cluster.objects.order_by("name").values_list("name", flat=True))
    if request.method == "GET":
        initial = RuleForm.initial_of(rule_edits.rule_snapshot(rule)) if rule else None
        form = RuleForm(initial=initial, clusters=clusters, kinds=ANNOTATED_KINDS)
        return _render_edit(request, rule, form)
    form = RuleForm(request.POST, clusters=clusters, kinds=ANNOTATED_KINDS)
    if not form.is_valid():
        return _render_edit(request, rule, form, status=422)
    data = form.rule_data()
    fingerprint = _fingerprint(data)
    applying = _applying(request) and request.POST.get("previewed") == fingerprint
    actor = acting_user(request)

    def save(*, dry_run: bool) -> rule_edits.RulePreview:
        return rule_edits.save_rule(
            rule_id=pk,
            data=data,
            actor=actor,
            now=timezone.now(),
            dry_run=dry_run,
            confirm=request.POST.get("confirm") == "yes",
        )

    try:
        try:
            preview = save(dry_run=not applying)
        except rule_edits.ActuationUnconfirmed:
            # Not confirmed (or more workloads turn on than previewed): preview.
            preview = save(dry_run=True)
    except NotFound:
        raise Http404("the rule was deleted meanwhile") from None
    except InvalidInput as exc:
        form.add_service_errors(exc.fields)
        return _render_edit(request, rule, form, status=422)
    if preview.applied:
        verb = "created" if pk is None else "changed"
        messages.success(
            request,
            f"Rule {data['name']} {verb}: {len(preview.diffs)} workload policies "
            "changed.",
        )
        return redirect("policy_rules")
    return _render_edit(
        request, rule, form, preview=_preview_context(preview), previewed=fingerprint
    )


@require_POST
@require_role(Role.OPERATOR)
def policy_rule_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a rule: the first post previews what its workloads fall back to."""
    rule = get_object_or_404(PolicyRule.objects.select_related("cluster"), pk=pk)
    applying = _applying(request)
    actor = acting_user(request)

    def delete(*, dry_run: bool) -> rule_edits.RulePreview:
        return rule_edits.delete_rule(
            rule_id=pk,
            actor=actor,
            now=timezone.now(),
            dry_run=dry_run,
            confirm=request.POST.get("confirm") == "yes",
        )

    try:
        try:
            preview = delete(dry_run=not applying)
        except rule_edits.ActuationUnconfirmed:
            preview = delete(dry_run=True)
    except NotFound:
        raise Http404("the rule was deleted meanwhile") from None
    if preview.applied:
        messages.success(
            request,
            f"Rule {rule.name} deleted: {len(preview.diffs)} workload policies "
            "changed.",
        )
        return redirect("policy_rules")
    return render(
        request,
        "recommender/rule_delete.html",
        {"page": "rules", "rule": rule, "preview": _preview_context(preview)},
    )


def _render_edit(
    request: HttpRequest,
    rule: PolicyRule | None,
    form: RuleForm,
    *,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    return render(
        request,
        "recommender/rule_edit.html",
        {"page": "rules", "rule": rule, "form": form, **extra},
        status=status,
    )


def _applying(request: HttpRequest) -> bool:
    """ "Apply", or the confirmation's "Yes" (which applies too)."""
    return request.POST.get("step") == "apply" or request.POST.get("confirm") == "yes"


def _fingerprint(data: dict[str, Any]) -> str:
    """Names the previewed rule, so "Apply" stores nothing edited since."""
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _shown(value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _preview_context(preview: rule_edits.RulePreview) -> dict[str, Any]:
    """The preview as the page lists it: the API's ``preview`` with each value in
    words (text as is, the rest as JSON)."""
    answer = preview.as_json()
    workloads = [
        {
            "workload_id": row["workload_id"],
            "workload": row["workload"],
            "changes": [
                {
                    "field": name,
                    "before": _shown(change["before"]),
                    "after": _shown(change["after"]),
                    "given_by": change["given_by"],
                }
                for name, change in row["changes"].items()
            ],
        }
        for row in answer["workloads"][:PREVIEW_SHOWN]
    ]
    return {**answer, "workloads": workloads, "more": answer["count"] - len(workloads)}

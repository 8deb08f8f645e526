"""Creating, changing and deleting policy rules, with a preview of what each does.

Every edit is resolved before it is stored (``services/policy/rules.py``): the
preview (``dry_run``) and the edit compute the same list of workloads whose
effective policy changes, and an edit that turns actuation on (mode Off to any other
mode) for more than one workload is refused until the caller confirms it. An edit is
audited once (``policy_rule.*``) and each policy it changes once more
(``policy.update``, naming the rule).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q

from recommender.cluster import label_selector
from recommender.errors import Conflict, InvalidInput, NotFound
from recommender.models import Cluster, Policy, PolicyRule
from recommender.services.access.audit import Action, actor_label_of, record_audit
from recommender.services.policy.rules import (
    ANNOTATED_KINDS,
    PolicyDiff,
    apply_diffs,
    describe_source,
    policy_diffs,
    rule_scope_q,
)
from recommender.services.policy.validation import validate_policy_fields

logger = logging.getLogger(__name__)

# The keys of a rule as the API and the page take them.
RULE_KEYS = (
    "name",
    "priority",
    "is_enabled",
    "cluster",
    "namespaces",
    "namespace_selector",
    "workload_selector",
    "kinds",
    "policy",
)
MAX_SELECTOR = 1000
# Workloads listed in a preview (the count is always whole).
PREVIEW_LIMIT = 500


class ActuationUnconfirmed(Conflict):
    """The edit turns actuation on for more than one workload and the caller did not
    confirm it (``confirm``)."""

    code = "confirmation_required"

    def __init__(self, count: int):
        super().__init__(
            f"this change turns actuation on for {count} workloads (mode Off → an "
            "acting mode); preview it with dry_run=true, then send confirm=true",
            fields={"confirm": [f"turns actuation on for {count} workloads"]},
        )


@dataclass(frozen=True)
class RulePreview:
    """What an edit of a rule does (or did): the rule and each policy it changes."""

    rule: PolicyRule | None
    diffs: list[PolicyDiff]
    applied: bool

    @property
    def actuation_turned_on(self) -> int:
        """Workloads going from mode Off to an acting mode."""
        return sum(1 for diff in self.diffs if diff.turns_on_actuation)

    def as_json(self) -> dict[str, Any]:
        """The preview as the API returns it."""
        changed = [diff for diff in self.diffs if diff.changed_fields]
        return {
            "applied": self.applied,
            "count": len(changed),
            "actuation_turned_on": self.actuation_turned_on,
            "confirmation_required": not self.applied and self.actuation_turned_on > 1,
            "workloads": [
                {
                    "workload_id": diff.workload_id,
                    "workload": diff.workload,
                    "changes": {
                        name: {
                            "before": diff.before[name],
                            "after": diff.after[name],
                            "given_by": describe_source(diff.provenance[name]),
                        }
                        for name in diff.changed_fields
                    },
                }
                for diff in changed[:PREVIEW_LIMIT]
            ],
        }


def _string_list(raw: Any, *, field: str, allowed: tuple[str, ...] = ()) -> list[str]:
    if not isinstance(raw, list) or any(not isinstance(v, str) or not v for v in raw):
        raise InvalidInput(f"{field} must be a list of names", field=field)
    if allowed:
        bad = [v for v in raw if v not in allowed]
        if bad:
            raise InvalidInput(
                f"{field}: {bad[0]!r} is not one of {', '.join(allowed)}", field=field
            )
    return sorted(set(raw))


def _selector(raw: Any, *, field: str) -> str:
    text = raw.strip() if isinstance(raw, str) else None
    if text is None:
        raise InvalidInput(f"{field} must be a label selector text", field=field)
    if len(text) > MAX_SELECTOR:
        raise InvalidInput(
            f"{field} is longer than {MAX_SELECTOR} characters", field=field
        )
    try:
        label_selector.parse(text)
    except ValueError as exc:
        raise InvalidInput(str(exc), field=field) from None
    return text


def validate_rule(data: dict[str, Any], *, partial: bool) -> dict[str, Any]:
    """``data`` (``RULE_KEYS``) as PolicyRule column values; InvalidInput names
    every bad field. ``partial``: keys left out keep their stored value."""
    if not isinstance(data, dict):
        raise InvalidInput("a rule must be an object", field="rule")
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    for key in data:
        if key not in RULE_KEYS:
            errors.setdefault(key, []).append(
                f"unknown key; a rule has {', '.join(RULE_KEYS)}"
            )

    def check(key: str, rule: Any) -> None:
        if key not in data:
            return
        try:
            rule(data[key])
        except InvalidInput as exc:
            for field, messages in exc.fields.items():
                errors.setdefault(field, []).extend(messages)

    def name(value: Any) -> None:
        if not isinstance(value, str) or not value.strip() or len(value) > 100:
            raise InvalidInput("name must be 1 to 100 characters", field="name")
        clean["name"] = value.strip()

    def priority(value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput("priority must be a whole number", field="priority")
        if abs(value) > 1_000_000:
            raise InvalidInput("priority must be within ±1000000", field="priority")
        clean["priority"] = value

    def enabled(value: Any) -> None:
        if not isinstance(value, bool):
            raise InvalidInput("is_enabled must be true or false", field="is_enabled")
        clean["is_enabled"] = value

    def cluster(value: Any) -> None:
        if value is None or value == "":
            clean["cluster_id"] = None
            return
        found = Cluster.objects.filter(name=value).values_list("pk", flat=True)
        if not isinstance(value, str) or not found:
            raise InvalidInput(
                f"cluster {value!r} does not exist (a cluster name, or null for "
                "every cluster)",
                field="cluster",
            )
        clean["cluster_id"] = found[0]

    def namespaces(value: Any) -> None:
        clean["namespaces"] = _string_list(value, field="namespaces")

    def kinds(value: Any) -> None:
        clean["kinds"] = _string_list(value, field="kinds", allowed=ANNOTATED_KINDS)

    def namespace_selector(value: Any) -> None:
        clean["namespace_selector"] = _selector(value, field="namespace_selector")

    def workload_selector(value: Any) -> None:
        clean["workload_selector"] = _selector(value, field="workload_selector")

    def policy(value: Any) -> None:
        if not isinstance(value, dict) or not value:
            raise InvalidInput(
                'policy must be an object of policy fields, e.g. {"mode": "Recreate"}',
                field="policy",
            )
        clean["policy_fields"] = validate_policy_fields(value)

    check("name", name)
    check("priority", priority)
    check("is_enabled", enabled)
    check("cluster", cluster)
    check("namespaces", namespaces)
    check("kinds", kinds)
    check("namespace_selector", namespace_selector)
    check("workload_selector", workload_selector)
    check("policy", policy)
    if not partial:
        for key in ("name", "policy"):
            if key not in data:
                errors.setdefault(key, []).append("is required")
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidInput(f"{field}: {messages[0]}", fields=errors)
    return clean


def _preview_or_apply(
    *,
    rule_key: int | None,
    replacement: PolicyRule | None,
    scope: Q,
    dry_run: bool,
    confirm: bool,
    actor: User | None,
    label: str,
    why: str,
    now: datetime,
) -> list[PolicyDiff]:
    """The diffs of replacing rule ``rule_key`` (None: a new rule) by
    ``replacement`` (None: deleted), written unless ``dry_run``. Only the policies
    in ``scope`` (what the rule selected before or after) can change."""
    diffs = [
        diff
        for diff in policy_diffs(
            rule_overrides={rule_key: replacement},
            lock=not dry_run,
            only=scope,
        )
        if diff.changed_fields
    ]
    turned_on = sum(1 for diff in diffs if diff.turns_on_actuation)
    if turned_on > 1 and not confirm and not dry_run:
        raise ActuationUnconfirmed(turned_on)
    if not dry_run:
        apply_diffs(diffs, actor=actor, actor_label=label, why=why, now=now)
    return diffs


def save_rule(
    *,
    rule_id: int | None,
    data: dict[str, Any],
    actor: User | None,
    now: datetime,
    dry_run: bool = False,
    confirm: bool = False,
    actor_label: str | None = None,
) -> RulePreview:
    """Create (``rule_id`` None) or change a rule, or only preview it (``dry_run``):
    the policies it changes, each with the fields and where they come from. Refused
    (ActuationUnconfirmed) when it turns actuation on for more than one workload
    without ``confirm``; a preview says so (``confirmation_required``)."""
    label = actor_label or actor_label_of(actor)
    clean = validate_rule(data, partial=rule_id is not None)
    with transaction.atomic():
        if rule_id is None:
            rule = PolicyRule(created_at=now)
            before: dict[str, Any] = {}
        else:
            try:
                rule = PolicyRule.objects.select_for_update().get(pk=rule_id)
            except PolicyRule.DoesNotExist:
                raise NotFound(f"policy rule {rule_id} does not exist") from None
            before = rule_snapshot(rule)
        # What the rule selected before the edit: those policies may change too.
        old_scope = rule_scope_q(rule) if rule_id is not None else None
        for column, value in clean.items():
            setattr(rule, column, value)
        rule.updated_at = now
        rule.updated_by = actor
        scope = (
            rule_scope_q(rule) if old_scope is None else old_scope | rule_scope_q(rule)
        )
        if not dry_run:
            try:
                with transaction.atomic():
                    rule.save()
            except IntegrityError:
                raise InvalidInput(
                    f"a rule named {rule.name!r} exists already", field="name"
                ) from None
        elif (
            PolicyRule.objects.filter(name=rule.name).exclude(pk=rule_id or 0).exists()
        ):
            raise InvalidInput(
                f"a rule named {rule.name!r} exists already", field="name"
            )
        verb = "created" if rule_id is None else "changed"
        diffs = _preview_or_apply(
            rule_key=rule.pk if not dry_run else rule_id,
            replacement=rule,
            scope=scope,
            dry_run=dry_run,
            confirm=confirm,
            actor=actor,
            label=label,
            why=f"rule {rule.name} {verb} by {label}",
            now=now,
        )
        if dry_run:
            return RulePreview(rule=rule, diffs=diffs, applied=False)
        record_audit(
            now=now,
            actor=actor,
            actor_label=label,
            action=Action.POLICY_RULE_SAVE,
            object_type="policy_rule",
            object_id=rule.pk,
            before=before,
            after=rule_snapshot(rule),
            message=(
                f"{label} {verb} policy rule {rule.name}: {len(diffs)} policies changed"
            ),
        )
    logger.info(
        "policy rule %s %s by %s: %d policies", rule.pk, verb, label, len(diffs)
    )
    return RulePreview(rule=rule, diffs=diffs, applied=True)


def delete_rule(
    *,
    rule_id: int,
    actor: User | None,
    now: datetime,
    dry_run: bool = False,
    confirm: bool = False,
    actor_label: str | None = None,
) -> RulePreview:
    """Delete a rule (or preview it): its workloads fall back to what the other
    rules, their annotations or the default give."""
    label = actor_label or actor_label_of(actor)
    with transaction.atomic():
        try:
            rule = PolicyRule.objects.select_for_update().get(pk=rule_id)
        except PolicyRule.DoesNotExist:
            raise NotFound(f"policy rule {rule_id} does not exist") from None
        before = rule_snapshot(rule)
        diffs = _preview_or_apply(
            rule_key=rule.pk,
            replacement=None,
            scope=rule_scope_q(rule),
            dry_run=dry_run,
            confirm=confirm,
            actor=actor,
            label=label,
            why=f"rule {rule.name} deleted by {label}",
            now=now,
        )
        if dry_run:
            return RulePreview(rule=rule, diffs=diffs, applied=False)
        rule.delete()
        record_audit(
            now=now,
            actor=actor,
            actor_label=label,
            action=Action.POLICY_RULE_DELETE,
            object_type="policy_rule",
            object_id=rule_id,
            before=before,
            message=(
                f"{label} deleted policy rule {before['name']}: {len(diffs)} policies "
                "changed"
            ),
        )
    return RulePreview(rule=None, diffs=diffs, applied=True)


def rule_snapshot(rule: PolicyRule) -> dict[str, Any]:
    """A rule as the API shows it (``RULE_KEYS`` and its id and level)."""
    return {
        "id": rule.pk,
        "name": rule.name,
        "priority": rule.priority,
        "is_enabled": rule.is_enabled,
        "cluster": rule.cluster.name if rule.cluster is not None else None,
        "namespaces": list(rule.namespaces or []),
        "namespace_selector": rule.namespace_selector,
        "workload_selector": rule.workload_selector,
        "kinds": list(rule.kinds or []),
        "policy": dict(rule.policy_fields or {}),
        "level": rule.level,
    }


def workloads_per_rule() -> dict[int, int]:
    """How many policies take at least one field from each rule now (one pass)."""
    counts: dict[int, int] = {}
    for provenance in (
        Policy.objects.filter(source=Policy.Source.VPAWEB)
        .values_list("provenance", flat=True)
        .iterator(chunk_size=2000)
    ):
        for rule_id in {
            entry.get("rule_id") for entry in (provenance or {}).values()
        } - {None}:
            counts[rule_id] = counts.get(rule_id, 0) + 1
    return counts

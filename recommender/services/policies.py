"""Policy use cases: validate and change a workload's policy, with an audit trail.

A policy is stored in the upstream VPA shape: ``mode`` is the VPA ``updateMode`` and
``container_policies`` holds ``resourcePolicy.containerPolicies`` entries with
quantities as canonical Kubernetes strings::

    [{"containerName": "app", "mode": "Auto", "minAllowed": {"cpu": "100m"},
      "maxAllowed": {"memory": "2Gi"}, "controlledResources": ["cpu", "memory"],
      "controlledValues": "RequestsOnly"}]

Every entry is checked by the engine's ``ContainerPolicy`` (the rules of the VPA
admission webhook), so the API, the dashboard and the capping code agree on what is
valid. Changing a policy writes nothing to a cluster: acting on the mode is the
updater's and the webhook's job, and they act only on policies that are
``Policy.is_actionable`` (vpaweb's own, mode not Off).

Ownership: a policy that mirrors an upstream VerticalPodAutoscaler object
(``source="vpa-object"``) cannot be edited here; :func:`adopt_policy` first makes it
vpaweb's own, in mode Off (audited ``policy.adopt``). Switching a workload to Off (an
edit or an adoption) withdraws its approved, not yet applied resize changes: each
becomes ``rejected``, audited ``change.withdraw``.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from recommender.engine import Profile, get_profile
from recommender.engine.capping import ContainerPolicy
from recommender.engine.limits import CONTROLLED_VALUES
from recommender.engine.quantity import (
    format_cpu,
    format_memory,
    parse_cpu_millicores,
    parse_memory_bytes,
)
from recommender.engine.resources import CPU, MEMORY, RESOURCE_NAMES, Resources
from recommender.errors import Conflict, InvalidInput, NotFound
from recommender.models import Policy, Workload
from recommender.services.actuation.withdrawal import withdraw_approved_changes
from recommender.services.admission.generation import mark_admission_data_changed
from recommender.services.audit import Action, actor_label_of, record_audit
from recommender.services.policy_impact import (
    LARGE_INCREASE_FACTOR,
    LargeIncrease,
    large_increases,
)

logger = logging.getLogger(__name__)

# The keys of ``changes`` that update_policy accepts.
CHANGEABLE_FIELDS = (
    "mode",
    "profile",
    "profile_overrides",
    "container_policies",
    "min_replicas",
    "approval",
    "eviction_requirements",
)
# Profile fields an override may set: every knob, but not the name (the profile's
# identity, stored in Policy.profile).
OVERRIDABLE_FIELDS = tuple(
    f.name for f in dataclasses.fields(Profile) if f.name != "name"
)
# Keys of one containerPolicies entry, as upstream spells them.
CONTAINER_POLICY_KEYS = (
    "containerName",
    "mode",
    "minAllowed",
    "maxAllowed",
    "controlledResources",
    "controlledValues",
)
CONTAINER_MODES = ("Auto", "Off")
# Bounds of the fractions and factors people type, tighter than the engine's (which
# takes any finite margin): a margin above 100 % or an OOM bump above 3x is a typo
# (``15`` meaning 15 %), not a tuning. The API takes fractions; the dashboard shows the
# margin in percent. Percentiles are fractions in [0, 1] (the engine's bound).
OVERRIDE_BOUNDS: dict[str, tuple[float, float, str]] = {
    "margin_fraction": (0.0, 1.0, "a fraction from 0 to 1 (0-100 %; 0.15 = +15 %)"),
    "oom_bump_ratio": (1.0, 3.0, "a factor from 1 to 3"),
}


class LargeIncreaseUnconfirmed(Conflict):
    """The change would raise a target by more than LARGE_INCREASE_FACTOR and the
    caller did not confirm it (``confirm_large_increase``)."""

    code = "confirmation_required"

    def __init__(self, increases: list[LargeIncrease]):
        self.increases = increases
        described = [item.describe() for item in increases]
        super().__init__(
            f"this change would raise targets by more than {LARGE_INCREASE_FACTOR:g}x "
            f"({'; '.join(described)}); send confirm_large_increase: true to save it",
            fields={"confirm_large_increase": described},
        )


# What each mode does to running pods, shown before every change of mode. The updater
# acts on Recreate and InPlaceOrRecreate (docs/updater.md); Initial needs the admission
# webhook, which this version does not have yet, and its text says so first.
NOT_ACTED_ON_YET = (
    "Stored and shown, but not acted on yet: this version of vpaweb has no admission "
    "webhook, so nothing in the cluster changes."
)
MODE_CONSEQUENCES: dict[str, str] = {
    Policy.Mode.OFF: (
        "Recommend only: vpaweb never writes to this workload, its pods or a VPA "
        "object."
    ),
    Policy.Mode.INITIAL: (
        f"{NOT_ACTED_ON_YET} Once the webhook exists, new pods will get the "
        "recommended requests when they are created; running pods are left as they "
        "are."
    ),
    Policy.Mode.RECREATE: (
        "The updater evicts running pods whose requests are outside the recommended "
        "bounds (or far from the target for 12 h, or OOM-killed quickly) through the "
        "Eviction API, within PodDisruptionBudgets, minReplicas and the eviction "
        "tolerance; their controller recreates them and the admission webhook sets the "
        "recommended requests on the new pods (until the webhook is installed, "
        "recreated pods keep their template's requests)."
    ),
    Policy.Mode.IN_PLACE_OR_RECREATE: (
        "The updater resizes running pods in place (the pods/resize subresource, no "
        "restart where the kubelet supports it) and falls back to eviction as in "
        "Recreate when the node refuses or the resize stays Infeasible, Deferred for "
        "5 min or in progress for 1 h; new pods get the recommended requests from the "
        "admission webhook."
    ),
}


def approval_consequence(mode: str, approval: str) -> str:
    """Whether the updater's changes for ``mode`` wait for an operator."""
    if mode not in (Policy.Mode.RECREATE, Policy.Mode.IN_PLACE_OR_RECREATE):
        return "No running pod is changed in this mode: nothing to approve."
    if approval == Policy.Approval.AUTOMATIC:
        return (
            "Approval automatic: each change is applied as soon as it is proposed "
            "(still within disruption budgets, the rate limits and the kill switch)."
        )
    return (
        "Approval manual: each change waits on the Changes page until an operator "
        "approves it; nothing is resized or evicted before."
    )


def mode_consequence(mode: str) -> str:
    """What switching a workload to ``mode`` will do to its pods, in plain words."""
    return MODE_CONSEQUENCES.get(mode, f"Unknown mode {mode!r}.")


def policy_snapshot(policy: Policy) -> dict[str, Any]:
    """The changeable fields of ``policy`` as JSON, for audit before/after."""
    return {
        "mode": policy.mode,
        "profile": policy.profile,
        "profile_overrides": policy.profile_overrides,
        "container_policies": policy.container_policies,
        "min_replicas": policy.min_replicas,
        "approval": policy.approval,
        "eviction_requirements": policy.eviction_requirements,
    }


def _quantities(
    raw: object, *, field: str, errors: dict[str, list[str]]
) -> tuple[Resources, dict[str, str]]:
    """Parse a ResourceList ``{"cpu": "100m"}`` into Resources and canonical text."""
    if raw is None:
        return Resources(), {}
    if not isinstance(raw, dict):
        errors.setdefault(field, []).append(
            'must be an object such as {"cpu": "100m", "memory": "128Mi"}'
        )
        return Resources(), {}
    amounts = Resources()
    canonical: dict[str, str] = {}
    for resource, text in raw.items():
        key = f"{field}.{resource}"
        if resource not in RESOURCE_NAMES:
            errors.setdefault(key, []).append("only cpu and memory can be set")
            continue
        if text is None or text == "":
            continue
        # Numbers are accepted too: JSON clients send 1 or 0.5 for cores.
        is_number = isinstance(text, int | float) and not isinstance(text, bool)
        as_text = str(text) if is_number else text
        try:
            if resource == CPU:
                value = parse_cpu_millicores(as_text)
                canonical[CPU] = format_cpu(value)
            else:
                value = parse_memory_bytes(as_text)
                canonical[MEMORY] = format_memory(value)
        except ValueError as exc:
            errors.setdefault(key, []).append(str(exc))
            continue
        amounts = amounts.with_amount(resource, value)
    return amounts, canonical


def _container_policy(
    raw: object, *, index: int, container_names: set[str], errors: dict[str, list[str]]
) -> dict[str, Any] | None:
    """Validate one containerPolicies entry; return it in canonical form or None."""
    field = f"container_policies[{index}]"
    if not isinstance(raw, dict):
        errors.setdefault(field, []).append("must be an object with a containerName")
        return None
    before = sum(len(v) for v in errors.values())
    for key in raw:
        if key not in CONTAINER_POLICY_KEYS:
            errors.setdefault(f"{field}.{key}", []).append(
                f"unknown key; expected one of {', '.join(CONTAINER_POLICY_KEYS)}"
            )
    name = raw.get("containerName")
    if not isinstance(name, str) or not name:
        errors.setdefault(f"{field}.containerName", []).append(
            'is required: a container of this workload, or "*" for all'
        )
    elif name != "*" and name not in container_names:
        known = ", ".join(sorted(container_names)) or "none"
        errors.setdefault(f"{field}.containerName", []).append(
            f"{name!r} is not a container of this workload (containers: {known})"
        )
    mode = raw.get("mode", "Auto")
    if mode not in CONTAINER_MODES:
        errors.setdefault(f"{field}.mode", []).append(
            f"must be Auto or Off, not {mode!r}"
        )
    min_allowed, min_text = _quantities(
        raw.get("minAllowed"), field=f"{field}.minAllowed", errors=errors
    )
    max_allowed, max_text = _quantities(
        raw.get("maxAllowed"), field=f"{field}.maxAllowed", errors=errors
    )
    for resource in RESOURCE_NAMES:
        low, high = min_allowed.get(resource), max_allowed.get(resource)
        if low is not None and high is not None and high < low:
            errors.setdefault(f"{field}.maxAllowed.{resource}", []).append(
                f"is lower than minAllowed "
                f"({max_text[resource]} < {min_text[resource]})"
            )
    controlled = raw.get("controlledResources", [CPU, MEMORY])
    if not isinstance(controlled, list | tuple) or any(
        r not in RESOURCE_NAMES for r in controlled
    ):
        errors.setdefault(f"{field}.controlledResources", []).append(
            f'must be a list of "cpu" and "memory", not {controlled!r}'
        )
        controlled = [CPU, MEMORY]
    controlled = [
        r for r in RESOURCE_NAMES if r in controlled
    ]  # canonical order, no dupes
    values = raw.get("controlledValues")
    if values is not None and values not in CONTROLLED_VALUES:
        errors.setdefault(f"{field}.controlledValues", []).append(
            f"must be one of {', '.join(CONTROLLED_VALUES)}, not {values!r}"
        )
        values = None
    if sum(len(v) for v in errors.values()) > before:
        return None
    try:
        # The engine holds the upstream validation rules (e.g. Off with
        # RequestsAndLimits).
        ContainerPolicy(
            # A str by now: anything else was an error above, and returned.
            container_name=str(name),
            mode=mode,
            min_allowed=min_allowed,
            max_allowed=max_allowed,
            controlled_resources=tuple(controlled),
            controlled_values=values,
        )
    except ValueError as exc:
        errors.setdefault(field, []).append(str(exc))
        return None
    entry: dict[str, Any] = {"containerName": name, "mode": mode}
    if min_text:
        entry["minAllowed"] = min_text
    if max_text:
        entry["maxAllowed"] = max_text
    entry["controlledResources"] = controlled
    if values is not None:
        entry["controlledValues"] = values
    return entry


def validate_container_policies(
    raw: object, *, container_names: set[str]
) -> list[dict[str, Any]]:
    """Check upstream-shaped containerPolicies; return them canonical or raise."""
    errors: dict[str, list[str]] = {}
    if not isinstance(raw, list):
        raise InvalidInput(
            "container_policies must be a list of containerPolicies entries",
            field="container_policies",
        )
    result = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        entry = _container_policy(
            item, index=index, container_names=container_names, errors=errors
        )
        if entry is None:
            continue
        if entry["containerName"] in seen:
            errors.setdefault(f"container_policies[{index}].containerName", []).append(
                f"{entry['containerName']!r} has more than one policy"
            )
        seen.add(entry["containerName"])
        result.append(entry)
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidInput(f"{field}: {messages[0]}", fields=errors) from None
    return result


def parse_container_policies(stored: list[dict[str, Any]]) -> list[ContainerPolicy]:
    """Stored (canonical) containerPolicies as engine ``ContainerPolicy`` objects."""
    policies = []
    for entry in stored:
        policies.append(
            ContainerPolicy(
                container_name=entry["containerName"],
                mode=entry.get("mode", "Auto"),
                min_allowed=Resources(
                    _maybe(parse_cpu_millicores, entry.get("minAllowed", {}).get(CPU)),
                    _maybe(parse_memory_bytes, entry.get("minAllowed", {}).get(MEMORY)),
                ),
                max_allowed=Resources(
                    _maybe(parse_cpu_millicores, entry.get("maxAllowed", {}).get(CPU)),
                    _maybe(parse_memory_bytes, entry.get("maxAllowed", {}).get(MEMORY)),
                ),
                controlled_resources=tuple(
                    entry.get("controlledResources", (CPU, MEMORY))
                ),
                controlled_values=entry.get("controlledValues"),
            )
        )
    return policies


def _maybe(parse: Any, text: str | None) -> int | None:
    return None if text is None else parse(text)


def _validate_profile(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput("profile must be a profile name", field="profile")
    try:
        get_profile(value)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="profile") from None
    return value


def _engine_message(exc: Exception, name: str) -> str:
    """The engine's ValueError text without its ``name: `` prefix (the key says it)."""
    text = str(exc)
    prefix = f"{name}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def validate_profile_overrides(raw: object, *, profile_name: str) -> dict[str, Any]:
    """Check overrides of ``profile_name``'s fields with the engine; return those that
    differ from the profile (so ``{}`` means the profile as is), or raise InvalidInput
    keyed ``profile_overrides.<field>``."""
    if not isinstance(raw, dict):
        raise InvalidInput(
            'profile_overrides must be an object such as {"cpu_target_percentile": '
            "0.95}",
            field="profile_overrides",
        )
    base = get_profile(profile_name)
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        field = f"profile_overrides.{name}"
        if name not in OVERRIDABLE_FIELDS:
            errors.setdefault(field, []).append(
                "unknown profile field; fields that can be overridden are "
                + ", ".join(OVERRIDABLE_FIELDS)
            )
            continue
        # One field at a time, so every bad field is named, not just the first. An error
        # about another field (lower <= target <= upper) is a clash between fields,
        # judged below with all of them together.
        try:
            base.with_overrides(**{name: value})
        except (ValueError, TypeError) as exc:
            if str(exc).split(":", 1)[0] in (name, str(exc)):
                errors.setdefault(field, []).append(_engine_message(exc, name))
                continue
        if name in OVERRIDE_BOUNDS:
            low, high, what = OVERRIDE_BOUNDS[name]
            if not low <= value <= high:
                errors.setdefault(field, []).append(f"must be {what}, not {value!r}")
                continue
        # JSON has one number type: store 1 as 1.0 where the engine's field is a float.
        if isinstance(getattr(base, name), float) and isinstance(value, int):
            value = float(value)
        values[name] = value
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidInput(f"{field}: {messages[0]}", fields=errors)
    # And all together: the engine checks that each band holds its target.
    try:
        base.with_overrides(**values)
    except (ValueError, TypeError) as exc:
        name = str(exc).split(":", 1)[0]
        if name not in values:
            # Blame a field the caller sent that the message names (e.g. a target
            # raised above the profile's upper bound).
            name = next((n for n in values if n in str(exc)), name)
        field = f"profile_overrides.{name}" if name in values else "profile_overrides"
        raise InvalidInput(str(exc), field=field) from None
    return {
        name: values[name]
        for name in OVERRIDABLE_FIELDS
        if name in values and values[name] != getattr(base, name)
    }


def overridden_fields(profile: Profile) -> dict[str, dict[str, Any]]:
    """``{field: {"profile": named profile's value, "override": value}}`` for each
    field of ``profile`` that differs from the profile it is named after."""
    try:
        base = get_profile(profile.name)
    except ValueError:
        return {}
    return {
        name: {"profile": getattr(base, name), "override": getattr(profile, name)}
        for name in OVERRIDABLE_FIELDS
        if getattr(profile, name) != getattr(base, name)
    }


def effective_overrides(policy: Policy | None) -> dict[str, dict[str, Any]]:
    """The policy's overrides as :func:`overridden_fields` gives them, i.e. what the
    next refresh applies; ``{}`` without a policy or with unusable stored values."""
    if policy is None:
        return {}
    try:
        profile = get_profile(policy.profile).with_overrides(
            **(policy.profile_overrides or {})
        )
    except (ValueError, TypeError):
        return {}  # the refresh falls back to upstream's profile too
    return overridden_fields(profile)


CHANGE_REQUIREMENTS = ("TargetHigherThanRequests", "TargetLowerThanRequests")


def validate_eviction_requirements(raw: object) -> list[dict[str, Any]]:
    """Upstream's ``updatePolicy.evictionRequirements``, canonical; errors named."""
    field = "eviction_requirements"
    if not isinstance(raw, list):
        raise InvalidInput(f"{field} must be a list, not {raw!r}", field=field)
    clean: list[dict[str, Any]] = []
    errors: dict[str, list[str]] = {}
    for index, entry in enumerate(raw):
        where = f"{field}[{index}]"
        if not isinstance(entry, dict) or set(entry) - {
            "resources",
            "changeRequirement",
        }:
            errors.setdefault(where, []).append(
                "must be an object with resources and changeRequirement only"
            )
            continue
        resources = entry.get("resources")
        if (
            not isinstance(resources, list)
            or not resources
            or any(r not in ("cpu", "memory") for r in resources)
        ):
            errors.setdefault(f"{where}.resources", []).append(
                f"must be a non-empty list of cpu and memory, not {resources!r}"
            )
            continue
        change = entry.get("changeRequirement")
        if change not in CHANGE_REQUIREMENTS:
            errors.setdefault(f"{where}.changeRequirement", []).append(
                f"must be one of {', '.join(CHANGE_REQUIREMENTS)}, not {change!r}"
            )
            continue
        clean.append({"resources": sorted(set(resources)), "changeRequirement": change})
    if errors:
        raise InvalidInput("invalid eviction requirements", fields=errors)
    return clean


def _validate_changes(
    changes: dict[str, Any], *, container_names: set[str], policy: Policy
) -> dict[str, Any]:
    """The validated, canonical ``changes``; InvalidInput names every bad field."""
    if not isinstance(changes, dict):
        raise InvalidInput("changes must be an object", field="changes")
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    for key in changes:
        if key not in CHANGEABLE_FIELDS:
            errors.setdefault(key, []).append(
                "cannot be changed; changeable fields are "
                f"{', '.join(CHANGEABLE_FIELDS)}"
            )
    if "mode" in changes:
        mode = changes["mode"]
        if mode not in Policy.Mode.values:
            errors.setdefault("mode", []).append(
                f"must be one of {', '.join(Policy.Mode.values)}, not {mode!r}"
            )
        else:
            clean["mode"] = mode
    if "profile" in changes:
        try:
            clean["profile"] = _validate_profile(changes["profile"])
        except InvalidInput as exc:
            for field, messages in exc.fields.items():
                errors.setdefault(field, []).extend(messages)
    if "min_replicas" in changes:
        value = changes["min_replicas"]
        if value in (None, ""):
            clean["min_replicas"] = None
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.setdefault("min_replicas", []).append(
                f"must be a whole number of at least 1, or empty, not {value!r}"
            )
        else:
            clean["min_replicas"] = value
    if "approval" in changes:
        approval = changes["approval"]
        if approval not in Policy.Approval.values:
            errors.setdefault("approval", []).append(
                f"must be one of {', '.join(Policy.Approval.values)}, not {approval!r}"
            )
        else:
            clean["approval"] = approval
    if "eviction_requirements" in changes:
        try:
            clean["eviction_requirements"] = validate_eviction_requirements(
                changes["eviction_requirements"]
            )
        except InvalidInput as exc:
            for field, messages in exc.fields.items():
                errors.setdefault(field, []).extend(messages)
    if "container_policies" in changes:
        try:
            clean["container_policies"] = validate_container_policies(
                changes["container_policies"], container_names=container_names
            )
        except InvalidInput as exc:
            for field, messages in exc.fields.items():
                errors.setdefault(field, []).extend(messages)
    # Overrides are checked against the profile they will apply to: the new one when
    # the same call changes it. A profile change alone re-checks (and re-trims) the
    # stored overrides, so they stay valid and keep only real differences.
    if "profile_overrides" in changes or "profile" in clean:
        is_stored = "profile_overrides" not in changes
        raw = policy.profile_overrides if is_stored else changes["profile_overrides"]
        try:
            clean["profile_overrides"] = validate_profile_overrides(
                raw, profile_name=clean.get("profile", policy.profile)
            )
        except InvalidInput as exc:
            for field, messages in exc.fields.items():
                errors.setdefault(field, []).extend(
                    f"{m} (stored override: send profile_overrides to change it)"
                    if is_stored
                    else m
                    for m in messages
                )
    if errors:
        field, messages = next(iter(errors.items()))
        raise InvalidInput(f"{field}: {messages[0]}", fields=errors)
    return clean


def update_policy(
    *,
    workload_id: int,
    changes: dict[str, Any],
    actor: User | None,
    now: datetime,
    actor_label: str | None = None,
    confirm_large_increase: bool = False,
) -> Policy:
    """Validate ``changes`` and apply them to the workload's policy, recording an
    AuditEvent.

    Nothing is written when any field is invalid (InvalidInput names every bad field) or
    when nothing changes (no audit event either). A change that would raise any
    container's target by more than LARGE_INCREASE_FACTOR is refused
    (LargeIncreaseUnconfirmed, naming the containers) unless ``confirm_large_increase``.
    Nothing is ever written to a cluster here.
    """
    with transaction.atomic():
        try:
            workload = Workload.objects.select_for_update().get(pk=workload_id)
        except Workload.DoesNotExist:
            raise NotFound(f"workload {workload_id} does not exist") from None
        container_names = set(workload.containers.values_list("name", flat=True))
        # The same row lock approvals.approve_change holds while it checks for Off: a
        # switch to Off and an approval are serialised, never interleaved. A row
        # created here is rolled back with everything else when the changes are bad.
        policy, _ = Policy.objects.select_for_update().get_or_create(workload=workload)
        if policy.is_mirrored:
            raise Conflict(
                f"the policy of {workload} is managed by "
                f"{policy.managed_by}; vpaweb does not change or act on it. Adopt "
                "the workload first (it becomes vpaweb's, in mode Off)",
                fields={"source": ["vpa-object: adopt the workload to change it"]},
            )
        clean = _validate_changes(
            changes, container_names=container_names, policy=policy
        )
        before = policy_snapshot(policy)
        changed = [
            field for field, value in clean.items() if getattr(policy, field) != value
        ]
        if not changed:
            logger.info("policy of workload %s unchanged", workload_id)
            return policy
        if not confirm_large_increase:
            increases = large_increases(workload=workload, policy=policy, clean=clean)
            if increases:
                raise LargeIncreaseUnconfirmed(increases)
        for field in changed:
            setattr(policy, field, clean[field])
        policy.updated_at = now
        policy.updated_by = actor
        policy.save(update_fields=[*changed, "updated_at", "updated_by"])
        after = policy_snapshot(policy)
        label = actor_label or actor_label_of(actor)
        message = f"{label} changed {', '.join(changed)} of {workload}"
        if "mode" in changed:
            message += f"; mode {before['mode']} → {after['mode']}"
        if "profile_overrides" in changed:
            overrides = after["profile_overrides"]
            message += "; profile overrides " + (
                ", ".join(f"{k}={v}" for k, v in overrides.items())
                if overrides
                else "cleared"
            )
        record_audit(
            now=now,
            actor=actor,
            actor_label=label,
            action=Action.POLICY_UPDATE,
            workload=workload,
            object_type="policy",
            object_id=policy.pk,
            before={k: before[k] for k in changed},
            after={k: after[k] for k in changed},
            message=message,
        )
        if "mode" in changed and policy.is_off:
            withdraw_approved_changes(
                workload=workload, actor=actor, label=label, now=now
            )
    # The webhook acts on the new mode and container policies without waiting.
    mark_admission_data_changed()
    logger.info("policy of workload %s updated by %s: %s", workload_id, label, changed)
    return policy


def adopt_policy(
    *,
    workload_id: int,
    actor: User | None,
    now: datetime,
    actor_label: str | None = None,
) -> Policy:
    """Make a policy that mirrors an upstream VPA object vpaweb's own, in mode Off.

    Its container policies and min replicas are kept as a starting point; the mode
    becomes Off, so vpaweb acts on nothing until an operator chooses a mode. Discovery
    no longer overwrites it. If the upstream object is still in a non-Off mode the
    workload shows a conflict (``Policy.has_vpa_conflict``) until the object is set to
    Off or deleted. Audited ``policy.adopt``; Conflict when the policy is not mirrored.
    """
    label = actor_label or actor_label_of(actor)
    with transaction.atomic():
        try:
            workload = Workload.objects.select_for_update().get(pk=workload_id)
        except Workload.DoesNotExist:
            raise NotFound(f"workload {workload_id} does not exist") from None
        policy = Policy.objects.select_for_update().filter(workload=workload).first()
        if policy is None or not policy.is_mirrored:
            raise Conflict(
                f"the policy of {workload} is already vpaweb's own: there is no "
                "VerticalPodAutoscaler object's policy to adopt"
            )
        before = {"source": policy.source, "mode": policy.mode}
        source_name = policy.managed_by
        # The row is locked (select_for_update above): nobody changes it meanwhile.
        policy.source = Policy.Source.VPAWEB
        policy.mode = Policy.Mode.OFF
        policy.updated_at = now
        policy.updated_by = actor
        policy.save(update_fields=["source", "mode", "updated_at", "updated_by"])
        message = (
            f"{label} adopted {workload} from {source_name}: vpaweb's policy now, "
            "mode Off"
        )
        if policy.has_vpa_conflict:
            message += (
                f"; the VerticalPodAutoscaler is still in mode "
                f"{policy.vpa_object_mode}, set it to Off or delete it"
            )
        record_audit(
            now=now,
            actor=actor,
            actor_label=label,
            action=Action.POLICY_ADOPT,
            workload=workload,
            object_type="policy",
            object_id=policy.pk,
            before=before,
            after={"source": policy.source, "mode": policy.mode},
            message=message,
        )
        withdraw_approved_changes(workload=workload, actor=actor, label=label, now=now)
    logger.info("workload %s adopted by %s", workload_id, label)
    return policy

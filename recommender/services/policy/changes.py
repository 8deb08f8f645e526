"""Policy use cases: validate and change a workload's policy, with an audit trail.

A policy is stored in the upstream VPA shape: ``mode`` is the VPA ``updateMode`` and
``container_policies`` holds ``resourcePolicy.containerPolicies`` entries with
quantities as canonical Kubernetes strings::

    [{"containerName": "app", "mode": "Auto", "minAllowed": {"cpu": "100m"},
      "maxAllowed": {"memory": "2Gi"}, "controlledResources": ["cpu", "memory"],
      "controlledValues": "RequestsOnly"}]"""
# Every entry is checked by the engine's ``ContainerPolicy`` (the rules of the VPA
# admission webhook), so the API, the dashboard and the capping code agree on what is
# valid. Changing a policy writes nothing to a cluster: acting on the mode is the
# updater's and the webhook's job, and they act only on policies that are
# ``Policy.is_actionable`` (vpaweb's own, mode not Off).
#
# Ownership: a policy that mirrors an upstream VerticalPodAutoscaler object
# (``source="vpa-object"``) cannot be edited here; :func:`adopt_policy` first makes it
# vpaweb's own, in mode Off (audited ``policy.adopt``). Switching a workload to Off (an
# edit or an adoption) withdraws its approved, not yet applied resize changes: each
# becomes ``rejected``, audited ``change.withdraw``.

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from recommender.errors import Conflict, InvalidInput, NotFound
from recommender.models import Policy, Workload
from recommender.models.policy import ACTING_MODES
from recommender.services.access.audit import Action, actor_label_of, record_audit
from recommender.services.policy.impact import (
    LARGE_INCREASE_FACTOR,
    LargeIncrease,
    large_increases,
)
from recommender.services.policy.rules import apply_diffs, policy_diffs
from recommender.services.policy.validation import (
    CHANGEABLE_FIELDS,
    validate_changes,
)
from recommender.services.policy.withdrawal import withdraw_approved_changes
from recommender.services.readmodels.generation import (
    mark_admission_data_changed,
    note_admission_changes,
)

logger = logging.getLogger(__name__)


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


# What each mode does to pods, shown before every change of mode: the admission webhook
# (docs/webhook.md) sets requests on new pods in every mode but Off; the updater acts on
# running pods in Recreate and InPlaceOrRecreate (docs/updater.md).
MODE_CONSEQUENCES: dict[str, str] = {
    Policy.Mode.OFF: (
        "Recommend only: vpaweb never writes to this workload, its pods or a VPA "
        "object."
    ),
    Policy.Mode.INITIAL: (
        "New pods get the recommended requests from vpaweb's admission webhook when "
        "they are created (once `manage.py webhook install` has registered it in the "
        "cluster; if vpaweb is down, pods are admitted unchanged); running pods are "
        "left as they are."
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
    Policy.Mode.IN_PLACE: (
        "The updater resizes running pods in place only and never evicts them: a "
        "resize the node cannot hold (NodeCapacity, Infeasible) is remembered and not "
        "sent again until the recommendation changes or the pod is replaced; a "
        "Deferred one is tried again with back-off; new pods get the recommended "
        "requests from the admission webhook."
    ),
}


def approval_consequence(mode: str, approval: str) -> str:
    """Whether the updater's changes for ``mode`` wait for an operator."""
    if mode not in ACTING_MODES:
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


def policy_consequence(policy: Policy) -> str:
    """What the policy's mode does to the workload's pods, and who does it: vpaweb for
    its own policies, upstream VPA's components for one mirroring a VPA object."""
    if policy.is_mirrored:
        return (
            f"Managed by {policy.managed_by}: upstream VPA's own components (its "
            "admission controller and updater) act on this workload's pods as that "
            "mode says; vpaweb never does: it shows the policy and writes nothing to "
            "the workload, its pods or the object. Adopt the policy to let vpaweb act "
            "instead."
        )
    return mode_consequence(policy.mode)


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
        "maintenance_windows": policy.maintenance_windows,
        "window_bypasses_quick_oom": policy.window_bypasses_quick_oom,
        "hpa_coordination": policy.hpa_coordination,
        "startup_boost": policy.startup_boost,
    }


def update_policy(
    *,
    workload_id: int,
    changes: dict[str, Any],
    actor: User | None,
    now: datetime,
    actor_label: str | None = None,
    confirm_large_increase: bool = False,
    inherit: Sequence[str] = (),
) -> Policy:
    """Validate ``changes`` and apply them to the workload's policy, recording an
    AuditEvent.

    Nothing is written when any field is invalid (InvalidInput names every bad field) or
    when nothing changes (no audit event either). A change that would raise any
    container's target by more than LARGE_INCREASE_FACTOR is refused
    (LargeIncreaseUnconfirmed, naming the containers) unless ``confirm_large_increase``.
    Nothing is ever written to a cluster here.

    Every field in ``changes`` becomes the workload's own (it wins over annotations
    and rules, ``services/policy/rules.py``); a field in ``inherit`` stops being
    its own and takes what annotations, rules or the default give again.
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
        clean = validate_changes(
            changes, container_names=container_names, policy=policy
        )
        unknown = [f for f in inherit if f not in CHANGEABLE_FIELDS or f in clean]
        if unknown:
            raise InvalidInput(
                f"inherit: {unknown[0]!r} is not a policy field, or is also changed",
                field="inherit",
            )
        before = policy_snapshot(policy)
        changed = [
            field for field, value in clean.items() if getattr(policy, field) != value
        ]
        own = [f for f in policy.own_fields if f not in inherit]
        own += [f for f in clean if f not in own]
        if own != policy.own_fields:
            policy.own_fields = own
            policy.provenance = {
                **policy.provenance,
                **{f: {"source": "own"} for f in clean},
            }
            policy.save(update_fields=["own_fields", "provenance"])
        if inherit:
            # What annotations, rules or the default now give the released fields.
            apply_diffs(
                policy_diffs(workload_ids=[workload.pk], lock=True),
                actor=actor,
                actor_label=actor_label or actor_label_of(actor),
                why=f"{', '.join(inherit)} no longer set on the workload",
                now=now,
            )
            policy.refresh_from_db()
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
        note_admission_changes(
            cluster_id=workload.cluster_id, workload_ids=[workload.pk]
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
        note_admission_changes(
            cluster_id=workload.cluster_id, workload_ids=[workload.pk]
        )
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
    mark_admission_data_changed()
    logger.info("workload %s adopted by %s", workload_id, label)
    return policy

"""A policy is vpaweb's own or mirrors an upstream VPA object: the one actuation
predicate, adoption, withdrawal on Off, and at most one open change per pod."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction

from recommender.errors import Conflict, NotFound
from recommender.models import (
    OPEN_RESIZE_STATUSES,
    AuditEvent,
    Policy,
    ResizeChange,
)
from recommender.roles import Role
from recommender.services.actuation.approvals import approve_change, reject_change
from recommender.services.policy.changes import adopt_policy, update_policy
from tests.factories import make_cluster, make_user, make_workload

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
CONTAINER_POLICIES = [
    {"containerName": "*", "mode": "Auto", "controlledResources": ["cpu", "memory"]}
]


@pytest.fixture
def operator(db):
    return make_user("olga", Role.OPERATOR)


def mirrored(name="api", mode="Recreate", vpa_mode=None):
    """A workload whose policy mirrors VPA object shop/<name>-vpa in ``mode``."""
    workload = make_workload(make_cluster(), name)
    Policy.objects.filter(workload=workload).update(
        source=Policy.Source.VPA_OBJECT,
        mode=mode,
        container_policies=CONTAINER_POLICIES,
        min_replicas=2,
        vpa_object=f"shop/{name}-vpa",
        vpa_object_mode=vpa_mode or mode,
    )
    return workload


def change(workload, pod="api-1", status="proposed"):
    return ResizeChange.objects.create(workload=workload, pod=pod, status=status)


@pytest.mark.parametrize(
    ("source", "mode"),
    list(itertools.product(Policy.Source.values, Policy.Mode.values)),
)
def test_only_vpawebs_own_policy_outside_off_is_actionable(db, source, mode):
    workload = make_workload(make_cluster(), "api", mode=mode)
    Policy.objects.filter(workload=workload).update(source=source)
    policy = Policy.objects.get(workload=workload)

    expected = source == Policy.Source.VPAWEB and mode != Policy.Mode.OFF
    assert policy.is_actionable is expected
    # The queryset filter is the same rule, so a candidate list and a check agree.
    assert Policy.objects.actionable().filter(pk=policy.pk).exists() is expected


def test_a_mirrored_policy_cannot_be_edited_and_nothing_changes(operator):
    workload = mirrored()

    with pytest.raises(Conflict) as caught:
        update_policy(
            workload_id=workload.pk, changes={"mode": "Off"}, actor=operator, now=NOW
        )

    assert "VerticalPodAutoscaler shop/api-vpa (mode Recreate)" in caught.value.message
    assert "Adopt" in caught.value.message
    assert caught.value.fields == {
        "source": ["vpa-object: adopt the workload to change it"]
    }
    policy = Policy.objects.get(workload=workload)
    assert (policy.source, policy.mode) == ("vpa-object", "Recreate")
    assert not AuditEvent.objects.exists()


def test_adopting_makes_the_policy_vpawebs_in_off_and_audits_it(operator):
    workload = mirrored(mode="Initial", vpa_mode="Off")

    policy = adopt_policy(workload_id=workload.pk, actor=operator, now=NOW)

    assert (policy.source, policy.mode, policy.is_actionable) == (
        "vpaweb",
        "Off",
        False,
    )
    # The object's container policies and min replicas are the starting point.
    assert (policy.container_policies, policy.min_replicas) == (CONTAINER_POLICIES, 2)
    assert (policy.updated_by, policy.updated_at) == (operator, NOW)
    assert not policy.has_vpa_conflict  # the object is Off: nothing fights
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_label, event.workload) == (
        "policy.adopt",
        "olga",
        workload,
    )
    assert event.before == {"source": "vpa-object", "mode": "Initial"}
    assert event.after == {"source": "vpaweb", "mode": "Off"}
    # Now vpaweb's: an operator may choose a mode, and then vpaweb may act.
    policy = update_policy(
        workload_id=workload.pk, changes={"mode": "Recreate"}, actor=operator, now=NOW
    )
    assert policy.is_actionable


def test_adopting_next_to_an_object_still_in_a_mode_shows_a_conflict(operator):
    workload = mirrored(mode="Recreate")

    policy = adopt_policy(workload_id=workload.pk, actor=operator, now=NOW)

    assert policy.has_vpa_conflict
    assert "still in mode Recreate" in AuditEvent.objects.get().message


def test_adopting_twice_or_a_missing_workload_is_refused(operator):
    workload = mirrored()
    adopt_policy(workload_id=workload.pk, actor=operator, now=NOW)

    with pytest.raises(Conflict, match="already vpaweb's own"):
        adopt_policy(workload_id=workload.pk, actor=operator, now=NOW)
    with pytest.raises(NotFound, match="workload 999999 does not exist"):
        adopt_policy(workload_id=999999, actor=operator, now=NOW)
    assert AuditEvent.objects.filter(action="policy.adopt").count() == 1


def test_a_change_of_a_mirrored_workload_cannot_be_approved(operator):
    workload = mirrored()
    proposed = change(workload)

    with pytest.raises(Conflict, match="managed by VerticalPodAutoscaler shop/api-vpa"):
        approve_change(change_id=proposed.pk, approved_by=operator, now=NOW)

    assert ResizeChange.objects.get(pk=proposed.pk).status == "proposed"


def test_switching_to_off_withdraws_approved_changes_only(operator):
    workload = make_workload(make_cluster(), "api", mode="Recreate")
    approved = change(workload, "api-1")
    approve_change(change_id=approved.pk, approved_by=operator, now=NOW)
    proposed = change(workload, "api-2")
    applied = change(workload, "api-3", status="applied")
    applying = change(workload, "api-4", status="applying")

    update_policy(
        workload_id=workload.pk, changes={"mode": "Off"}, actor=operator, now=NOW
    )

    statuses = dict(ResizeChange.objects.values_list("pod", "status"))
    assert statuses == {
        "api-1": "rejected",
        "api-2": "proposed",  # cannot be approved while Off
        "api-3": "applied",
        "api-4": "applying",  # the updater's: it re-checks the mode before writing
    }
    withdrawn = ResizeChange.objects.get(pk=approved.pk)
    assert (withdrawn.decided_by, withdrawn.decided_at) == (operator, NOW)
    event = AuditEvent.objects.get(action="change.withdraw")
    assert (event.object_id, event.before, event.after) == (
        str(approved.pk),
        {"status": "approved"},
        {
            "status": "rejected",
            "reason": "withdrawn: the workload is in mode Off (olga)",
        },
    )
    assert "api-1" in event.message and "mode Off" in event.message
    assert {proposed.pk, applied.pk, applying.pk}.isdisjoint(
        int(e.object_id) for e in AuditEvent.objects.filter(action="change.withdraw")
    )


def test_a_change_other_than_to_off_withdraws_nothing(operator):
    workload = make_workload(make_cluster(), "api", mode="Recreate")
    approved = change(workload)
    approve_change(change_id=approved.pk, approved_by=operator, now=NOW)

    update_policy(
        workload_id=workload.pk,
        changes={"mode": "InPlaceOrRecreate", "profile": "peak-memory"},
        actor=operator,
        now=NOW,
    )

    assert ResizeChange.objects.get(pk=approved.pk).status == "approved"
    assert not AuditEvent.objects.filter(action="change.withdraw").exists()


def test_adopting_withdraws_approved_changes_left_from_before(operator):
    # An approval of a mirrored workload is refused today; an older one may remain.
    workload = mirrored()
    old = change(workload, status="approved")

    adopt_policy(workload_id=workload.pk, actor=operator, now=NOW)

    assert ResizeChange.objects.get(pk=old.pk).status == "rejected"
    assert AuditEvent.objects.filter(action="change.withdraw").count() == 1


@pytest.mark.parametrize("status", OPEN_RESIZE_STATUSES)
def test_the_database_holds_one_open_change_per_pod(db, status):
    workload = make_workload(make_cluster(), "api", mode="Recreate")
    change(workload, "api-1", status=status)

    with pytest.raises(IntegrityError), transaction.atomic():
        change(workload, "api-1", status="proposed")

    # Other pods, and closed changes of the same pod, are not limited.
    change(workload, "api-2")
    for closed in ("rejected", "applied", "failed"):
        change(workload, "api-1", status=closed)
    assert ResizeChange.objects.filter(pod="api-1").count() == 4


def test_a_decided_change_makes_room_for_the_next_proposal(operator):
    workload = make_workload(make_cluster(), "api", mode="Recreate")
    first = change(workload)
    reject_change(change_id=first.pk, rejected_by=operator, now=NOW)

    second = change(workload)

    assert second.is_open and not ResizeChange.objects.get(pk=first.pk).is_open


def test_the_open_statuses_are_one_constant_and_the_constraint_uses_it():
    assert ResizeChange.OPEN_STATUSES is OPEN_RESIZE_STATUSES
    assert set(OPEN_RESIZE_STATUSES) <= set(ResizeChange.Status.values)
    (constraint,) = (
        c
        for c in ResizeChange._meta.constraints
        if c.name == "resize_change_one_open_per_pod"
    )
    assert constraint.condition.children == [("status__in", OPEN_RESIZE_STATUSES)]

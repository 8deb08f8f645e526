"""approve_change / reject_change: allowed transitions, conflicts, audit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.errors import Conflict, NotFound
from recommender.models import AuditEvent, ResizeChange
from recommender.roles import Role
from recommender.services.actuation.approvals import approve_change, reject_change
from tests.factories import make_cluster, make_user, make_workload

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def operator(db):
    return make_user("olga", Role.OPERATOR)


def _change(mode: str = "Recreate", status: str = "proposed") -> ResizeChange:
    workload = make_workload(make_cluster(), "api", mode=mode)
    return ResizeChange.objects.create(
        workload=workload,
        pod="api-1",
        status=status,
        resources_before={"app": {"requests": {"cpu": 500}}},
        resources_after={"app": {"requests": {"cpu": 250}}},
    )


def test_approve_records_decider_time_and_audit(operator):
    change = _change()

    approved = approve_change(change_id=change.pk, approved_by=operator, now=NOW)

    assert (approved.status, approved.decided_by, approved.decided_at) == (
        "approved",
        operator,
        NOW,
    )
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_label, event.object_id) == (
        "change.approve",
        "olga",
        str(change.pk),
    )
    assert (event.before, event.after) == (
        {"status": "proposed"},
        {"status": "approved"},
    )


def test_reject_with_reason_and_withdraw_an_approved_change(operator):
    change = _change(status="approved")

    rejected = reject_change(
        change_id=change.pk, rejected_by=operator, now=NOW, reason=" peak season "
    )

    assert rejected.status == "rejected"
    assert AuditEvent.objects.get().message.endswith(": peak season")


@pytest.mark.parametrize(
    ("status", "decide"),
    [
        ("approved", approve_change),
        ("rejected", approve_change),
        ("applied", approve_change),
        ("rejected", reject_change),
        ("applied", reject_change),
        ("failed", reject_change),
    ],
)
def test_bad_transitions_conflict_and_change_nothing(operator, status, decide):
    change = _change(status=status)
    actor_kw = "approved_by" if decide is approve_change else "rejected_by"

    with pytest.raises(Conflict, match=f"is {status}"):
        decide(change_id=change.pk, now=NOW, **{actor_kw: operator})

    change.refresh_from_db()
    assert change.status == status
    assert change.decided_by is None
    assert not AuditEvent.objects.exists()


def test_changes_of_an_off_workload_cannot_be_approved(operator):
    change = _change(mode="Off")

    with pytest.raises(Conflict, match="Off mode"):
        approve_change(change_id=change.pk, approved_by=operator, now=NOW)

    change.refresh_from_db()
    assert change.status == "proposed"


def test_unknown_change_is_not_found(db, operator):
    with pytest.raises(NotFound, match="resize change 404"):
        approve_change(change_id=404, approved_by=operator, now=NOW)

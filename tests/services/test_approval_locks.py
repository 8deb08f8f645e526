"""An approval cannot race a switch to Off (review finding 13), on PostgreSQL.

SQLite has no row locks (``select_for_update`` is a no-op there), so these run in the
PostgreSQL pass. The order is made deterministic by holding the policy's row lock in
the test, starting the other side in a thread, and waiting until PostgreSQL reports that
thread blocked on a lock (``pg_stat_activity.wait_event_type = 'Lock'``) before going
on: no sleeps decide the outcome. Both services lock the workload, then its policy: the
same order, so they cannot deadlock (the approval's audit row takes a key-share lock on
the workload).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, connections, transaction

from recommender.errors import Conflict
from recommender.models import AuditEvent, Policy, ResizeChange, Workload
from recommender.roles import Role
from recommender.services.actuation.approvals import approve_change
from recommender.services.policy.changes import update_policy
from tests.conftest import service_missing
from tests.factories import make_cluster, make_user, make_workload

pytestmark = pytest.mark.integration

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
WAIT_S = 10.0


@pytest.fixture
def change(transactional_db: Any) -> ResizeChange:
    if connection.vendor != "postgresql":
        service_missing("PostgreSQL (DATABASE_URL): row locks")
    workload = make_workload(make_cluster(), "api", mode=Policy.Mode.RECREATE)
    return ResizeChange.objects.create(workload=workload, pod="api-1")


class Side(threading.Thread):
    """Runs ``work`` on its own database connection; keeps its result or error."""

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.backend_pid: int | None = None
        self.ready = threading.Event()

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.backend_pid = cursor.fetchone()[0]
            self.ready.set()
            self.result = self.work()
        except BaseException as exc:
            self.error = exc
        finally:
            self.ready.set()
            connections.close_all()


def wait_until_blocked(side: Side) -> None:
    """Return once PostgreSQL shows ``side`` waiting for a lock; fail if it finished."""
    assert side.ready.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                [side.backend_pid],
            )
            row = cursor.fetchone()
        if row is not None and row[0] == "Lock":
            return
        if not side.is_alive():
            pytest.fail(
                f"it finished without waiting for the policy's locks: "
                f"result {side.result!r}, error {side.error!r}"
            )
        time.sleep(0.01)
    pytest.fail("it neither waited for the lock nor finished")


def hold_policy_locks(change: ResizeChange) -> None:
    """Lock the change's workload, then its policy, as both services do."""
    Workload.objects.select_for_update().get(pk=change.workload_id)
    Policy.objects.select_for_update().get(workload_id=change.workload_id)


def test_approval_waits_for_a_switch_to_off_and_then_conflicts(change):
    operator = make_user("olga", Role.OPERATOR)
    approval = Side(
        lambda: approve_change(change_id=change.pk, approved_by=operator, now=NOW)
    )
    with transaction.atomic():
        # The switch to Off has locked the workload and its policy (update_policy's
        # order) and not committed yet.
        hold_policy_locks(change)
        approval.start()
        wait_until_blocked(approval)
        update_policy(
            workload_id=change.workload_id,
            changes={"mode": Policy.Mode.OFF},
            actor=operator,
            now=NOW,
        )
    approval.join(WAIT_S)

    assert isinstance(approval.error, Conflict), approval.error
    assert "Off mode" in approval.error.message
    change.refresh_from_db()
    assert change.status == ResizeChange.Status.PROPOSED


def test_switch_to_off_waits_for_an_approval_holding_the_policy(change):
    operator = make_user("olga", Role.OPERATOR)
    switch = Side(
        lambda: update_policy(
            workload_id=change.workload_id,
            changes={"mode": Policy.Mode.OFF},
            actor=operator,
            now=NOW,
        )
    )
    with transaction.atomic():
        # An approval in flight holds the workload's and the policy's row locks.
        hold_policy_locks(change)
        switch.start()
        wait_until_blocked(switch)
        approve_change(change_id=change.pk, approved_by=operator, now=NOW)
    switch.join(WAIT_S)

    assert switch.error is None, switch.error
    assert switch.result.mode == Policy.Mode.OFF
    change.refresh_from_db()
    # The switch ran after the approval committed, so it saw the approved change and
    # withdrew it: Off means the updater never applies it.
    assert change.status == ResizeChange.Status.REJECTED
    assert AuditEvent.objects.filter(
        action="change.withdraw", object_id=str(change.pk)
    ).exists()

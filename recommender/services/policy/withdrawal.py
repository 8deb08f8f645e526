"""Off means off for changes already approved: when a workload's mode becomes Off (an
operator's edit, or adopting a mirrored VPA object's policy in Off), its approved, not
yet applied resize changes are withdrawn, so the updater never applies them.

A withdrawn change becomes ``rejected`` (through ``ResizeChange.transition``),
decided by whoever switched the mode, with one ``change.withdraw`` audit event each
(``AuditEvent.Action.CHANGE_WITHDRAW``). A change the updater already took
(``applying``: its write has started) is left to it."""
# Changes this withdrawal cannot see are stopped elsewhere: the updater's move to
# ``applying`` is a compare-and-swap that also filters on the acting predicate
# (``control.acting_q``), after waiting for the workload's and the policy's row locks
# that the mode switch holds, so it reads the committed Off and moves nothing; and the
# statement inserting automatically approved changes (``bulk.insert_changes``) inserts
# an approved row only while the workload's policy still acts, in that statement.

from __future__ import annotations

import logging
from datetime import datetime

from django.contrib.auth.models import User

from recommender.models import ResizeChange, Workload
from recommender.models.actuation import OPERATOR
from recommender.services.access.audit import Action

logger = logging.getLogger(__name__)


def withdraw_approved_changes(
    *, workload: Workload, actor: User | None, label: str, now: datetime
) -> int:
    """Reject the workload's approved, not yet applied resize changes (its mode is Off
    now: the updater must never apply them); one ``change.withdraw`` audit event each.
    Call inside the transaction that switched the mode. Returns how many."""
    changes = list(
        ResizeChange.objects.select_for_update().filter(
            workload=workload, status=ResizeChange.Status.APPROVED
        )
    )
    withdrawn = 0
    for change in changes:
        # Filtered on the status: a change the updater took meanwhile is left to it.
        if not change.transition(
            to=ResizeChange.Status.REJECTED,
            allowed_from=(ResizeChange.Status.APPROVED,),
            by=OPERATOR,
            now=now,
            action=Action.CHANGE_WITHDRAW,
            message=(
                f"approved resize of pod {change.pod} of {workload} withdrawn: the "
                f"workload is in mode Off ({label})"
            ),
            actor=actor,
            actor_label=label,
            after={"reason": f"withdrawn: the workload is in mode Off ({label})"},
            decided_by=actor,
            decided_by_label=label,
            decided_at=now,
        ):  # no snooze: a withdrawal holds nothing back once the mode acts again
            continue
        withdrawn += 1
    if withdrawn:
        logger.info("withdrew %s approved changes of %s", withdrawn, workload)
    return withdrawn

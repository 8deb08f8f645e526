"""The updater's moves of a ``ResizeChange``: ``try_transition`` is the model's
compare-and-swap with its audit event (``ResizeChange.transition``, refused unless
``RESIZE_TRANSITIONS`` gives the move to the updater), in one transaction;
``conflict`` is the error an operator's lost compare-and-swap raises (``approvals``)."""
# A change moves only if it is still in one of the statuses the caller read: a
# filtered ``update()`` whose row count says who won, so two operators, or two
# workers, can never both move a change. The updater gets False when it loses, an
# ordinary event there; an operator gets ``Conflict``. The statuses and the moves
# between them are drawn beside ``recommender.models.actuation.RESIZE_TRANSITIONS``.

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q

from recommender.errors import Conflict
from recommender.models import AuditEvent, Policy, ResizeChange, Workload
from recommender.models.actuation import UPDATER
from recommender.services.access.audit import audit_row

logger = logging.getLogger(__name__)

S = ResizeChange.Status
OPEN = (S.PROPOSED, S.APPROVED, S.APPLYING)
UPDATER_LABEL = "updater"
AUTOMATIC_LABEL = "policy (automatic approval)"
# How a failed eviction whose replacement could not be scheduled starts its error:
# the workload's next proposals wait for an operator (``proposals.load_context``).
UNSCHEDULABLE_ERROR = "the replacement pod cannot be scheduled"
# How a failed InPlace change whose resize the pod's node cannot hold starts its error:
# the same resize of the same pod is not proposed again (``proposals.load_infeasible``).
INFEASIBLE_ERROR = "the resize is infeasible"
# The audit action of each target status.
A = AuditEvent.Action
ACTIONS = {
    S.PROPOSED: A.CHANGE_PROPOSE,
    S.APPROVED: A.CHANGE_APPROVE,
    S.APPLYING: A.CHANGE_APPLY,
    S.APPLIED: A.CHANGE_APPLIED,
    S.FAILED: A.CHANGE_FAIL,
    S.REJECTED: A.CHANGE_REJECT,
    S.EXPIRED: A.CHANGE_EXPIRE,
    S.SUPERSEDED: A.CHANGE_SUPERSEDE,
}


def audit_event(
    change: ResizeChange,
    *,
    before: str,
    after: str,
    now: datetime,
    actor: User | None = None,
    actor_label: str = UPDATER_LABEL,
    note: str = "",
    action: str | None = None,
) -> AuditEvent:
    """The (unsaved) audit event of one transition."""
    message = f"{actor_label} {after} the resize of pod {change.pod}"
    if note:
        message += f": {note}"
    return audit_row(
        now=now,
        actor=actor,
        actor_label=actor_label,
        action=AuditEvent.Action(action or ACTIONS[S(after)]),
        workload_id=change.workload_id,
        object_type="resize_change",
        object_id=change.pk,
        before={"status": before},
        after={"status": after},
        message=message,
    )


def try_transition(
    change: ResizeChange,
    *,
    to: str,
    allowed_from: Iterable[str],
    now: datetime,
    actor: User | None = None,
    actor_label: str = UPDATER_LABEL,
    note: str = "",
    where: Q | None = None,
    **fields: Any,
) -> bool:
    """Move ``change`` to ``to`` if it is still in ``allowed_from`` (and, when given,
    still matches ``where``: the acting predicate for a move to ``applying``); audit it.

    ``fields`` are stored in the same update. On success the instance is updated too.
    """
    allowed = tuple(allowed_from)
    before = change.status
    with transaction.atomic():
        if where is not None:
            # The operator's row locks first, in approvals' order (workload, then
            # policy): a switch to Off that is being committed is waited for, then
            # read; the swap's filter reads it in the same statement as the status.
            Workload.objects.select_for_update().filter(pk=change.workload_id).first()
            Policy.objects.select_for_update().filter(
                workload_id=change.workload_id
            ).first()
        message = f"{actor_label} {to} the resize of pod {change.pod}"
        if note:
            message += f": {note}"
        if not change.transition(
            to=to,
            allowed_from=allowed,
            by=UPDATER,
            now=now,
            action=ACTIONS[S(to)],
            message=message,
            actor=actor,
            actor_label=actor_label,
            where=where,
            updated_at=now,
            **fields,
        ):
            return False
    logger.info(
        "resize change %s (pod %s): %s -> %s %s",
        change.pk,
        change.pod,
        before,
        to,
        note,
    )
    return True


def conflict(change_id: int, *, allowed_from: Iterable[str], to: str) -> Conflict:
    """The ``Conflict`` for a lost compare-and-swap, naming the status found."""
    found = (
        ResizeChange.objects.filter(pk=change_id)
        .values_list("status", flat=True)
        .first()
    )
    return Conflict(
        f"resize change {change_id} is {found}; only "
        f"{' or '.join(allowed_from)} changes can become {to}"
    )

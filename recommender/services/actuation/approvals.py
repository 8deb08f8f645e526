"""Operators decide on proposed resize changes: approve or reject, each audited.

Transitions (anything else raises Conflict and changes nothing)::

    proposed → approved   (the updater applies it on its next pass)
    proposed → rejected
    approved → rejected   (rejected, or withdrawn, before the updater applied it)"""
# A rejection sticks: it carries a snooze (``ResizeChange.Snooze``: 1 day, 7 days, or
# until the recommendation changes, the default), and while it lasts the updater
# proposes no change for the workload's containers that stays within the rejected
# change's band (``updater.held_by_rejection``). Who decided is stored as shown
# (``decided_by_label``): a token acts as its owner, and a token without one by name.
#
# Each transition is the model's compare-and-swap with its audit event
# (``ResizeChange.transition``: a filtered ``update()`` on the current status), so two
# operators deciding at once cannot both win: the second gets a Conflict naming the
# status the first one set. An approval holds the workload's policy row locked while it
# checks the mode, so it cannot race a switch to Off (``policies.update_policy`` takes
# the same lock), and only a workload whose policy ``is_actionable`` (vpaweb's own, not
# Off) can have an approved change. A switch to Off withdraws approved changes
# (``actuation.withdrawal``).

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from recommender.errors import Conflict, InvalidInput, NotFound
from recommender.models import AuditEvent, Policy, ResizeChange, Workload
from recommender.models.actuation import OPERATOR
from recommender.services.access.audit import Action, actor_label_of
from recommender.services.actuation import workflow

logger = logging.getLogger(__name__)

# Which statuses each decision may start from.
APPROVABLE = (ResizeChange.Status.PROPOSED,)
REJECTABLE = (ResizeChange.Status.PROPOSED, ResizeChange.Status.APPROVED)


def _decide(
    *,
    change_id: int,
    to_status: str,
    allowed_from: tuple[str, ...],
    action: Action,
    actor: User | None,
    actor_label: str | None,
    now: datetime,
    note: str,
    **fields: Any,
) -> ResizeChange:
    """Move one change from an allowed status to ``to_status`` and audit it
    (``fields`` are stored in the same update)."""
    label = actor_label or actor_label_of(actor)
    with transaction.atomic():
        try:
            change = ResizeChange.objects.select_related("workload").get(pk=change_id)
        except ResizeChange.DoesNotExist:
            raise NotFound(f"resize change {change_id} does not exist") from None
        if to_status == ResizeChange.Status.APPROVED:
            # Off means off: an approval would be a promise the updater must never keep.
            # The workload and then its policy are locked, in update_policy's order (the
            # same order avoids a deadlock: the audit row below takes a key-share lock
            # on the workload), so a switch to Off cannot commit between this check and
            # the approval: it waits for this transaction, or this one waits for it and
            # then reads Off.
            Workload.objects.select_for_update().filter(pk=change.workload_id).first()
            policy = (
                Policy.objects.select_for_update()
                .filter(workload_id=change.workload_id)
                .first()
            )
            if policy is not None and policy.is_mirrored:
                raise Conflict(
                    f"resize change {change_id} cannot be approved: workload "
                    f"{change.workload} is managed by {policy.managed_by} and "
                    "vpaweb never acts on it; adopt the workload first"
                )
            if policy is None or not policy.is_actionable:
                raise Conflict(
                    f"resize change {change_id} cannot be approved: workload "
                    f"{change.workload} is in Off mode; change its mode first"
                )
        message = (
            f"{label} {to_status} the resize of pod {change.pod} of {change.workload}"
        )
        if note:
            message += f": {note}"
        if not change.transition(
            to=to_status,
            allowed_from=allowed_from,
            by=OPERATOR,
            now=now,
            action=action,
            message=message,
            actor=actor,
            actor_label=label,
            after={"reason": note} if note else None,
            decided_by=actor,
            decided_by_label=label,
            decided_at=now,
            **fields,
        ):
            raise workflow.conflict(change_id, allowed_from=allowed_from, to=to_status)
        change.refresh_from_db()
    logger.info(
        "resize change %s of workload %s %s by %s",
        change_id,
        change.workload_id,
        to_status,
        label,
    )
    return change


def approve_change(
    *,
    change_id: int,
    approved_by: User | None,
    now: datetime,
    actor_label: str | None = None,
) -> ResizeChange:
    """Mark a proposed resize approved; the updater applies it on its next pass."""
    return _decide(
        change_id=change_id,
        to_status=ResizeChange.Status.APPROVED,
        allowed_from=APPROVABLE,
        action=Action.CHANGE_APPROVE,
        actor=approved_by,
        actor_label=actor_label,
        now=now,
        note="",
    )


SNOOZE_LENGTHS = {
    ResizeChange.Snooze.DAY: timedelta(days=1),
    ResizeChange.Snooze.WEEK: timedelta(days=7),
}


def reject_change(
    *,
    change_id: int,
    rejected_by: User | None,
    now: datetime,
    reason: str = "",
    actor_label: str | None = None,
    snooze: str = ResizeChange.Snooze.UNTIL_CHANGED,
) -> ResizeChange:
    """Reject a proposed (or approved, unapplied) resize; it is never applied, and
    the same resize is not proposed again while ``snooze`` lasts."""
    if snooze not in ResizeChange.Snooze.values:
        raise InvalidInput(
            f"snooze must be one of {', '.join(ResizeChange.Snooze.values)}",
            field="snooze",
        )
    length = SNOOZE_LENGTHS.get(ResizeChange.Snooze(snooze))
    return _decide(
        change_id=change_id,
        to_status=ResizeChange.Status.REJECTED,
        allowed_from=REJECTABLE,
        action=Action.CHANGE_REJECT,
        actor=rejected_by,
        actor_label=actor_label,
        now=now,
        note=reason.strip(),
        snooze=snooze,
        snoozed_until=now + length if length is not None else None,
    )


def withdraw_change(
    *,
    change_id: int,
    withdrawn_by: User | None,
    now: datetime,
    actor_label: str | None = None,
) -> ResizeChange:
    """Take back an approval before the updater applied it: the change becomes
    rejected (audited ``change.withdraw``) with no snooze, so the updater may propose
    it again on its next pass."""
    label = actor_label or actor_label_of(withdrawn_by)
    return _decide(
        change_id=change_id,
        to_status=ResizeChange.Status.REJECTED,
        allowed_from=(ResizeChange.Status.APPROVED,),
        action=Action.CHANGE_WITHDRAW,
        actor=withdrawn_by,
        actor_label=label,
        now=now,
        note=f"approval withdrawn by {label}",
        snooze="",
    )


def rejection_reasons(change_ids: Iterable[int]) -> dict[int, str]:
    """The reason each rejected change was given (by an operator, or its withdrawal
    when the workload went Off), from its audit event; changes without one are left
    out. One query."""
    ids = [str(pk) for pk in change_ids]
    events = (
        AuditEvent.objects.filter(
            object_type="resize_change",
            object_id__in=ids,
            action__in=(Action.CHANGE_REJECT, Action.CHANGE_WITHDRAW),
        )
        .order_by("created_at", "pk")
        .values_list("object_id", "after")
    )
    reasons: dict[int, str] = {}
    for object_id, after in events:
        reason = (after or {}).get("reason") if isinstance(after, dict) else None
        if reason:
            reasons[int(object_id)] = str(reason)
    return reasons

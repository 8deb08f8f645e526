"""One way to audit an action: ``record_audit``, and one list of action names.

Every change an operator, a token or vpaweb itself makes to what vpaweb stores or does
(a policy edit, an import from a VPA object, a token, an approval, a resize applied)
becomes one ``AuditEvent`` row through ``record_audit`` (``audit_row`` builds one for a
batch), inside the caller's transaction, so the log and the change commit together.

Actors: a user (``actor``), or a label for non-users: ``token:<name>`` for API tokens
(the token's owner is the ``actor``), ``vpa-object:<ns>/<name>`` for imports, and
``system`` for vpaweb's own background work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from recommender.models import AuditEvent, Workload

Action = AuditEvent.Action


def actor_label_of(actor: User | None) -> str:
    """How an actor is shown in the audit log: the user name, or "system"."""
    if actor is None:
        return "system"
    return actor.get_username()


def audit_row(
    *,
    action: Action,
    message: str,
    now: datetime,
    actor: User | None = None,
    actor_label: str | None = None,
    workload: Workload | None = None,
    workload_id: int | None = None,
    object_type: str = "",
    object_id: str | int = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    """One audit event, not saved yet (``record_audit`` saves it; the updater saves
    many in one statement); ``actor_label`` defaults to the actor's user name."""
    row = AuditEvent(
        created_at=now,
        actor=actor,
        actor_label=actor_label or actor_label_of(actor),
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        before=before or {},
        after=after or {},
        message=message,
    )
    if workload is not None:
        row.workload = workload
    else:
        row.workload_id = workload_id
    return row


def record_audit(
    *,
    action: Action,
    message: str,
    now: datetime,
    actor: User | None = None,
    actor_label: str | None = None,
    workload: Workload | None = None,
    object_type: str = "",
    object_id: str | int = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    """Store one audit event; ``actor_label`` defaults to the actor's user name."""
    row = audit_row(
        action=action,
        message=message,
        now=now,
        actor=actor,
        actor_label=actor_label,
        workload=workload,
        object_type=object_type,
        object_id=object_id,
        before=before,
        after=after,
    )
    row.save(force_insert=True)
    return row

"""Accounts: admins create users, give them roles, deactivate or reactivate them and
set new passwords; all audited (a password never is).

No role climbs above itself: only a superuser (or the command line, ``actor=None``)
may change, deactivate, re-role or set the password of a superuser or of another
admin, or make anyone an admin. A new role, a new password, a deactivation or a
reactivation revokes the user's API tokens and ends their sessions (a token acts with
its owner's role; a leaked key must not survive the reset). The signals of
``revocation`` do so on every path; these functions revoke first, so the audit trail
names the admin.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from recommender.errors import Forbidden, InvalidInput, NotFound
from recommender.roles import ROLE_ORDER, Role, grant_role, role_of
from recommender.services.access.audit import Action, actor_label_of, record_audit
from recommender.services.access.tokens import revoke_tokens_of

logger = logging.getLogger(__name__)


def _role(value: str | None) -> Role | None:
    if value in (None, ""):
        return None
    if value not in [r.value for r in ROLE_ORDER]:
        raise InvalidInput(
            f"role must be one of {', '.join(r.value for r in ROLE_ORDER)} or empty, "
            f"not {value!r}",
            field="role",
        )
    return Role(value)


def _locked_user(user_id: int) -> User:
    try:
        user: User = get_user_model().objects.select_for_update().get(pk=user_id)
    except get_user_model().DoesNotExist:
        raise NotFound(f"user {user_id} does not exist") from None
    return user


def _is_admin(user: User) -> bool:
    # Not role_of: it says None for an inactive user, and an inactive admin is still
    # one a role-admin must not reactivate.
    # .all(), not a filter: a list of users with prefetch_related("groups") then costs
    # no query per user (the Users page asks this of every row).
    return user.is_superuser or any(
        group.name == Role.ADMIN.value for group in user.groups.all()
    )


def may_manage(*, actor: User | None, user: User) -> bool:
    """True when ``actor`` may change ``user`` (role, access, password)."""
    if actor is None or actor.is_superuser or actor.pk == user.pk:
        return True
    return not _is_admin(user)


def _check_may_manage(*, actor: User | None, user: User, what: str) -> None:
    if not may_manage(actor=actor, user=user):
        kind = "a superuser" if user.is_superuser else "another admin"
        raise Forbidden(
            f"only a superuser may {what} {kind} ({user.get_username()})",
            fields={"user_id": [f"only a superuser may {what} {kind}"]},
        )


def _check_may_grant(*, actor: User | None, role: Role | None) -> None:
    if role == Role.ADMIN and not (actor is None or actor.is_superuser):
        raise Forbidden(
            "only a superuser may give the admin role",
            fields={"role": ["only a superuser may give the admin role"]},
        )


def set_user_role(
    *, user_id: int, role: str | None, actor: User | None, now: datetime
) -> User:
    """Give a user exactly ``role`` (None takes every role away), audited."""
    new_role = _role(role)
    with transaction.atomic():
        user = _locked_user(user_id)
        if actor is not None and user.pk == actor.pk and new_role != Role.ADMIN:
            raise InvalidInput(
                "you cannot take the admin role from yourself", field="role"
            )
        _check_may_manage(actor=actor, user=user, what="re-role")
        before = role_of(user)
        if before != new_role:
            _check_may_grant(actor=actor, role=new_role)
        if before != new_role:
            revoke_tokens_of(user=user, revoked_by=actor, now=now, reason="new role")
        if new_role is None:
            user.groups.remove(
                *user.groups.filter(name__in=[r.value for r in ROLE_ORDER])
            )
        else:
            grant_role(user, new_role)
        if hasattr(user, "_vpaweb_role"):
            del user._vpaweb_role
        record_audit(
            now=now,
            actor=actor,
            action=Action.USER_ROLE,
            object_type="user",
            object_id=user.pk,
            before={"role": before.value if before else None},
            after={"role": new_role.value if new_role else None},
            message=f"{actor_label_of(actor)} set the role of {user.get_username()} "
            f"to {new_role.value if new_role else 'none'}",
        )
    logger.info(
        "role of user %s set to %s by %s", user_id, new_role, actor_label_of(actor)
    )
    return user


def _name_taken(username: str) -> bool:
    return get_user_model().objects.filter(username=username).exists()


def create_user(
    *,
    username: str,
    password: str,
    role: str,
    actor: User | None,
    now: datetime,
) -> User:
    """Create a user with a role and audit it (the password is never recorded).

    A name that exists, also one created by someone else at the same moment, is an
    InvalidInput on ``username``, never a database error."""
    new_role = _role(role)
    if new_role is None:
        raise InvalidInput("a new user needs a role", field="role")
    _check_may_grant(actor=actor, role=new_role)
    taken = InvalidInput(f"a user named {username!r} already exists", field="username")
    with transaction.atomic():
        if _name_taken(username):
            raise taken
        try:
            # A savepoint: someone may create the same name between the check above and
            # this insert (two admins at once); the unique index then refuses it, and
            # the outer transaction stays usable to say so.
            with transaction.atomic():
                user = get_user_model().objects.create_user(
                    username=username, password=password
                )
        except IntegrityError:
            if _name_taken(username):
                raise taken from None
            raise
        grant_role(user, new_role)
        record_audit(
            now=now,
            actor=actor,
            action=Action.USER_CREATE,
            object_type="user",
            object_id=user.pk,
            after={"username": username, "role": new_role.value},
            message=(
                f"{actor_label_of(actor)} created user {username} ({new_role.value})"
            ),
        )
    logger.info("user %s created by %s", username, actor_label_of(actor))
    return user


def set_user_active(
    *, user_id: int, active: bool, actor: User | None, now: datetime
) -> User:
    """Deactivate a user (they can no longer log in) or reactivate one, audited; either
    revokes their API tokens and ends their sessions, so reactivating brings back no
    old credential. Admins cannot deactivate themselves."""
    with transaction.atomic():
        user = _locked_user(user_id)
        if actor is not None and user.pk == actor.pk and not active:
            raise InvalidInput("you cannot deactivate yourself", field="active")
        _check_may_manage(
            actor=actor, user=user, what="reactivate" if active else "deactivate"
        )
        before = user.is_active
        if before != active:
            revoke_tokens_of(
                user=user,
                revoked_by=actor,
                now=now,
                reason="reactivated" if active else "deactivated",
            )
        user.is_active = active
        user.save(update_fields=["is_active"])
        record_audit(
            now=now,
            actor=actor,
            action=Action.USER_ACTIVE,
            object_type="user",
            object_id=user.pk,
            before={"active": before},
            after={"active": active},
            message=f"{actor_label_of(actor)} "
            f"{'reactivated' if active else 'deactivated'} {user.get_username()}",
        )
    logger.info(
        "user %s %s by %s",
        user_id,
        "reactivated" if active else "deactivated",
        actor_label_of(actor),
    )
    return user


def set_user_password(
    *, user_id: int, password: str, actor: User | None, now: datetime
) -> User:
    """Give a user a new password, checked by the configured password validators;
    audited without the password. Their sessions end (Django's session hash) and their
    API tokens are revoked."""
    with transaction.atomic():
        user = _locked_user(user_id)
        _check_may_manage(actor=actor, user=user, what="set the password of")
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise InvalidInput("; ".join(exc.messages), field="password") from None
        revoke_tokens_of(user=user, revoked_by=actor, now=now, reason="new password")
        user.set_password(password)
        user.save(update_fields=["password"])
        record_audit(
            now=now,
            actor=actor,
            action=Action.USER_PASSWORD,
            object_type="user",
            object_id=user.pk,
            message=f"{actor_label_of(actor)} set a new password for "
            f"{user.get_username()}",
        )
    logger.info("password of user %s set by %s", user_id, actor_label_of(actor))
    return user

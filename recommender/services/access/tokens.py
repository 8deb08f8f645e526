"""API tokens: create, revoke and check the machine credentials of the REST API.

A key is shown once, when it is created; only its SHA-256 is stored, so a leaked
database does not leak usable keys. Creating and revoking are audited. The dashboard's
token page and ``manage.py apitoken`` both call these functions. One person holds at
most ``VPAWEB_API_TOKENS_PER_USER`` active tokens (budgets are per person anyway; the
cap keeps the list and the lookups small).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from recommender.errors import Conflict, InvalidInput, NotFound
from recommender.models import ApiToken
from recommender.services.access.audit import Action, actor_label_of, record_audit

logger = logging.getLogger(__name__)
# What a token name may hold: it is shown in pages, logs and audit messages, so no
# control characters, markup or quotes (ASCII letters and digits first, then also
# spaces and . _ - /, as in "ci/deploy prod").
TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._/-]{0,99}")

# Every key starts with this, so secret scanners and people can recognise one.
KEY_PREFIX = "vpaweb_"
# Characters of the key kept in clear for lists ("vpaweb_AbCd…").
SHOWN_PREFIX_LENGTH = 12
# last_used_at is refreshed at most this often: a write per token a minute, not a call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_key(key: str) -> str:
    """The stored form of a key: SHA-256 hex (keys are random, so no salt is needed)."""
    return hashlib.sha256(key.encode()).hexdigest()


def create_token(
    *,
    name: str,
    scope: str,
    created_by: User | None,
    now: datetime,
    actor_label: str | None = None,
) -> tuple[ApiToken, str]:
    """Create a token; return it and its key, which is never available again."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InvalidInput("a token needs a name of 1 to 100 characters", field="name")
    if TOKEN_NAME.fullmatch(name) is None:
        raise InvalidInput(
            "a token name starts with a letter or digit and holds only letters, "
            f"digits, spaces, '.', '_', '-' and '/', not {name!r}",
            field="name",
        )
    if scope not in ApiToken.Scope.values:
        raise InvalidInput(
            f"scope must be one of {', '.join(ApiToken.Scope.values)}, not {scope!r}",
            field="scope",
        )
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    label = actor_label or actor_label_of(created_by)
    try:
        with transaction.atomic():
            if created_by is not None:
                _check_room_for_one_more(created_by)
            token = ApiToken.objects.create(
                name=name,
                scope=scope,
                key_prefix=key[:SHOWN_PREFIX_LENGTH],
                key_hash=hash_key(key),
                created_by=created_by,
                created_at=now,
            )
            record_audit(
                now=now,
                actor=created_by,
                actor_label=label,
                action=Action.TOKEN_CREATE,
                object_type="api_token",
                object_id=token.pk,
                after={"name": name, "scope": scope},
                message=f"{label} created {scope} token {name!r}",
            )
    except IntegrityError:
        raise InvalidInput(
            f"an active token named {name!r} already exists; "
            "revoke it or pick another name",
            field="name",
        ) from None
    logger.info("api token %s (%s, id %s) created by %s", name, scope, token.pk, label)
    return token, key


def _check_room_for_one_more(owner: User) -> None:
    """InvalidInput when ``owner`` holds as many active tokens as one person may; the
    owner's row is locked, so two creations at once cannot both pass the count."""
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    held = ApiToken.objects.filter(created_by=owner, revoked_at__isnull=True).count()
    if held >= settings.API_TOKENS_PER_USER:
        raise InvalidInput(
            f"you hold {held} active tokens, as many as one person may "
            "(VPAWEB_API_TOKENS_PER_USER); revoke one first",
            field="name",
        )


def _revoke(
    token: ApiToken, *, revoked_by: User | None, label: str, now: datetime, message: str
) -> bool:
    """Revoke ``token`` if it is still active, with its audit event; False when it was
    revoked already (a filtered update: two people revoking at once record one)."""
    if not ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=now
    ):
        return False
    token.revoked_at = now
    record_audit(
        now=now,
        actor=revoked_by,
        actor_label=label,
        action=Action.TOKEN_REVOKE,
        object_type="api_token",
        object_id=token.pk,
        before={"revoked": False},
        after={"revoked": True},
        message=message,
    )
    return True


def revoke_token(
    *,
    token_id: int,
    revoked_by: User | None,
    now: datetime,
    actor_label: str | None = None,
) -> ApiToken:
    """Revoke a token at once; requests with it fail from now on."""
    label = actor_label or actor_label_of(revoked_by)
    with transaction.atomic():
        token = ApiToken.objects.filter(pk=token_id).first()
        if token is None:
            raise NotFound(f"api token {token_id} does not exist")
        if not _revoke(
            token,
            revoked_by=revoked_by,
            label=label,
            now=now,
            message=f"{label} revoked {token.scope} token {token.name!r}",
        ):
            raise Conflict(f"api token {token.name!r} was already revoked")
    logger.info("api token %s (id %s) revoked by %s", token.name, token.pk, label)
    return token


def revoke_tokens_of(
    *, user: User, revoked_by: User | None, now: datetime, reason: str
) -> int:
    """Revoke every active token ``user`` created (in the caller's transaction), one
    audit event each; returns how many. A token acts with its owner's role, so a new
    role or password must not leave old keys working."""
    label = actor_label_of(revoked_by)
    tokens = list(
        ApiToken.objects.select_for_update().filter(
            created_by=user, revoked_at__isnull=True
        )
    )
    for token in tokens:
        _revoke(
            token,
            revoked_by=revoked_by,
            label=label,
            now=now,
            message=f"{label} revoked {token.scope} token {token.name!r} of "
            f"{user.get_username()}: {reason}",
        )
    if tokens:
        logger.info(
            "%d api tokens of user %s revoked by %s: %s",
            len(tokens),
            user.pk,
            label,
            reason,
        )
    return len(tokens)


def authenticate_key(*, key: str, now: datetime) -> ApiToken | None:
    """The active token with this key, or None; records when it was last used."""
    if not key.startswith(KEY_PREFIX):
        return None
    token = (
        ApiToken.objects.select_related("created_by")
        .filter(key_hash=hash_key(key), revoked_at__isnull=True)
        .first()
    )
    if token is None:
        return None
    owner = token.created_by
    if owner is not None and not owner.is_active:
        # A token acts for its owner: a deactivated owner's tokens stop working at once.
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token

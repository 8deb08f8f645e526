"""Credentials follow the account: a new password, a deactivation or reactivation and a
new role revoke the user's API tokens and end their sessions. ``recommender/signals.py``
calls this on every path that changes one (the Users page, Django's admin,
``manage.py changepassword``, a shell's ``set_password`` and ``save``).

Sessions are found by decoding the stored ones (the database session engines; other
engines keep only Django's own check of the password hash).
"""

from __future__ import annotations

import logging
from importlib import import_module

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from recommender.services.access.tokens import revoke_tokens_of

logger = logging.getLogger(__name__)

# The session engines whose sessions are rows of django_session.
DATABASE_SESSION_ENGINES = (
    "django.contrib.sessions.backends.db",
    "django.contrib.sessions.backends.cached_db",
)


def end_sessions_of(user: User) -> int:
    """Delete every stored session signed in as ``user``; returns how many."""
    if settings.SESSION_ENGINE not in DATABASE_SESSION_ENGINES:
        return 0
    store = import_module(settings.SESSION_ENGINE).SessionStore
    user_id = str(user.pk)
    ended = 0
    sessions = Session.objects.filter(expire_date__gt=timezone.now())
    for key, data in sessions.values_list("session_key", "session_data").iterator():
        if store().decode(data).get("_auth_user_id") == user_id:
            # Through the store: cached_db also forgets its cached copy.
            store(session_key=key).delete()
            ended += 1
    return ended


def revoke_credentials_of(*, user: User, reason: str) -> None:
    """Revoke ``user``'s API tokens and end their sessions (in a transaction of its
    own when the caller has none)."""
    with transaction.atomic():
        revoke_tokens_of(user=user, revoked_by=None, now=timezone.now(), reason=reason)
    ended = end_sessions_of(user)
    if ended:
        logger.info("%d sessions of user %s ended: %s", ended, user.pk, reason)

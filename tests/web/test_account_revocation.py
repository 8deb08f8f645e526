"""Every path that changes a password, deactivates or reactivates a user or changes a
role ends that user's API tokens and sessions: Django's admin, ``manage.py
changepassword``, a shell's ``save``, and the Users page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from recommender.models import ApiToken, AuditEvent
from recommender.roles import Role, grant_role
from recommender.services.access.tokens import create_token
from tests.factories import make_user
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-only"


def _signed_in(user: Any) -> tuple[str, str]:
    """An API key of ``user`` and the cookie of a session of theirs, both working."""
    _, key = create_token(
        name=f"k-{user.pk}", scope="read", created_by=user, now=timezone.now()
    )
    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    assert _token_status(key) == 200
    assert _session_works(cookie)
    return key, cookie


def _token_status(key: str) -> int:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client.get("/api/v1/workloads/").status_code


def _session_works(cookie: str) -> bool:
    client = Client()
    client.cookies["sessionid"] = cookie
    return client.get("/tokens/").status_code == 200


def _assert_revoked(key: str, cookie: str, user: Any) -> None:
    assert _token_status(key) == 401
    assert not _session_works(cookie)
    assert not ApiToken.objects.filter(created_by=user, revoked_at__isnull=True)
    assert not Session.objects.filter(session_key=cookie).exists()


@pytest.fixture
def superuser(db: Any):
    return get_user_model().objects.create_superuser("root", password=PASSWORD)


def test_a_password_set_in_the_admin_revokes_tokens_and_sessions(superuser):
    viewer = make_user("vera", Role.VIEWER)
    key, cookie = _signed_in(viewer)

    response = client_for(superuser).post(
        f"/admin/auth/user/{viewer.pk}/password/",
        {"password1": "a-new-secret-1", "password2": "a-new-secret-1"},
    )

    assert response.status_code == 302, response.content[:500]
    _assert_revoked(key, cookie, viewer)
    event = AuditEvent.objects.get(action="token.revoke")
    assert event.message.endswith("of vera: new password")


def test_changepassword_revokes_tokens_and_sessions(monkeypatch):
    viewer = make_user("vera", Role.VIEWER)
    key, cookie = _signed_in(viewer)
    monkeypatch.setattr(
        "django.contrib.auth.management.commands.changepassword.getpass.getpass",
        lambda prompt="": "a-new-secret-2",
    )

    call_command("changepassword", "vera")

    _assert_revoked(key, cookie, viewer)


def test_deactivating_and_reactivating_in_the_admin_brings_nothing_back(superuser):
    viewer = make_user("vera", Role.VIEWER)
    key, cookie = _signed_in(viewer)
    admin = client_for(superuser)
    form = {
        "username": "vera",
        "password": viewer.password,
        "groups": [Group.objects.get(name="viewer").pk],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00",
    }

    deactivated = admin.post(f"/admin/auth/user/{viewer.pk}/change/", form)
    assert deactivated.status_code == 302, deactivated.content[:2000]
    viewer.refresh_from_db()
    assert not viewer.is_active
    reactivated = admin.post(
        f"/admin/auth/user/{viewer.pk}/change/", {**form, "is_active": "on"}
    )
    assert reactivated.status_code == 302
    viewer.refresh_from_db()
    assert viewer.is_active

    _assert_revoked(key, cookie, viewer)


def test_deactivating_and_reactivating_on_the_users_page_brings_nothing_back(
    superuser,
):
    viewer = make_user("vera", Role.VIEWER)
    key, cookie = _signed_in(viewer)
    admin = client_for(superuser)

    for active in ("false", "true"):
        response = admin.post(
            "/users/", {"form": "active", "active": active, "user_id": viewer.pk}
        )
        assert response.status_code == 302

    _assert_revoked(key, cookie, viewer)
    event = AuditEvent.objects.get(action="token.revoke")
    assert event.actor == superuser and event.message.endswith(": deactivated")


def test_a_shell_save_of_is_active_revokes():
    viewer = make_user("vera", Role.VIEWER)
    key, cookie = _signed_in(viewer)

    viewer.is_active = False
    viewer.save()
    viewer.is_active = True
    viewer.save()

    _assert_revoked(key, cookie, viewer)


def test_a_role_changed_in_the_admin_or_a_shell_revokes(superuser):
    viewer = make_user("vera", Role.VIEWER)
    key, cookie = _signed_in(viewer)

    viewer.groups.set([Group.objects.get(name="operator")])

    _assert_revoked(key, cookie, viewer)
    key, cookie = _signed_in(viewer)
    viewer.is_superuser = True
    viewer.save()
    _assert_revoked(key, cookie, viewer)


def test_what_changes_no_credential_revokes_nothing():
    viewer = make_user("vera", Role.VIEWER)
    key, cookie = _signed_in(viewer)

    grant_role(viewer, Role.VIEWER)  # the role they hold
    viewer.first_name = "Vera"
    viewer.save()
    Client().force_login(viewer)  # saves last_login

    assert _token_status(key) == 200
    assert _session_works(cookie)

"""create_user: roles checked, audited, and a name taken (also at the same moment by
someone else) is a validation error on ``username``, never a database error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model

from recommender.errors import InvalidInput
from recommender.models import AuditEvent
from recommender.roles import Role, role_of
from recommender.services.access import accounts
from tests.factories import make_user

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def admin(db):
    return make_user("ada", Role.ADMIN)


def test_a_new_user_gets_the_role_and_an_audit_event(admin):
    user = accounts.create_user(
        username="bob", password="long-enough", role="viewer", actor=admin, now=NOW
    )

    assert role_of(user) == Role.VIEWER
    event = AuditEvent.objects.get(action="user.create")
    assert event.after == {"username": "bob", "role": "viewer"}


@pytest.mark.parametrize(
    ("role", "message"),
    [("", "a new user needs a role"), ("root", "role must be one of")],
)
def test_a_bad_role_names_the_field_and_creates_nothing(admin, role, message):
    with pytest.raises(InvalidInput, match=message) as caught:
        accounts.create_user(
            username="bob", password="long-enough", role=role, actor=admin, now=NOW
        )

    assert caught.value.field == "role"
    assert not get_user_model().objects.filter(username="bob").exists()


def test_a_taken_name_is_a_validation_error(admin):
    with pytest.raises(InvalidInput, match="a user named 'ada' already exists") as e:
        accounts.create_user(
            username="ada", password="long-enough", role="viewer", actor=admin, now=NOW
        )

    assert e.value.fields == {"username": ["a user named 'ada' already exists"]}


def test_a_name_created_between_the_check_and_the_insert_is_a_validation_error(
    admin, monkeypatch
):
    # "bob" appears after create_user looked (another admin, same moment): the check
    # saw no row, the insert meets the unique index.
    make_user("bob", Role.VIEWER)
    looked: list[str] = []
    name_taken = accounts._name_taken

    def first_look_misses(username: str) -> bool:
        looked.append(username)
        return False if len(looked) == 1 else name_taken(username)

    monkeypatch.setattr(accounts, "_name_taken", first_look_misses)

    with pytest.raises(InvalidInput, match="a user named 'bob' already exists") as e:
        accounts.create_user(
            username="bob",
            password="long-enough",
            role="operator",
            actor=admin,
            now=NOW,
        )

    assert e.value.field == "username"
    assert looked == ["bob", "bob"]
    # Nothing half-done: one bob, still a viewer, no audit event.
    assert get_user_model().objects.filter(username="bob").count() == 1
    assert role_of(get_user_model().objects.get(username="bob")) == Role.VIEWER
    assert not AuditEvent.objects.filter(action="user.create").exists()
    # The transaction is still usable afterwards.
    accounts.create_user(
        username="carol", password="long-enough", role="viewer", actor=admin, now=NOW
    )


def test_deactivating_and_reactivating_a_user_is_audited(admin):
    bob = make_user("bob", Role.VIEWER)

    accounts.set_user_active(user_id=bob.pk, active=False, actor=admin, now=NOW)
    bob.refresh_from_db()
    assert not bob.is_active
    accounts.set_user_active(user_id=bob.pk, active=True, actor=admin, now=NOW)
    bob.refresh_from_db()
    assert bob.is_active
    events = AuditEvent.objects.filter(action="user.active").order_by("pk")
    assert [(e.before, e.after) for e in events] == [
        ({"active": True}, {"active": False}),
        ({"active": False}, {"active": True}),
    ]


def test_an_admin_cannot_deactivate_themselves(admin):
    with pytest.raises(InvalidInput, match="cannot deactivate yourself") as caught:
        accounts.set_user_active(user_id=admin.pk, active=False, actor=admin, now=NOW)
    assert caught.value.field == "active"
    admin.refresh_from_db()
    assert admin.is_active
    assert not AuditEvent.objects.exists()


def test_a_new_password_works_and_is_never_recorded(admin):
    bob = make_user("bob", Role.VIEWER)

    accounts.set_user_password(
        user_id=bob.pk, password="a-new-long-password", actor=admin, now=NOW
    )
    bob.refresh_from_db()
    assert bob.check_password("a-new-long-password")
    event = AuditEvent.objects.get(action="user.password")
    assert "a-new-long-password" not in f"{event.before} {event.after} {event.message}"


def test_a_weak_password_is_refused_naming_the_field(admin):
    bob = make_user("bob", Role.VIEWER)

    with pytest.raises(InvalidInput) as caught:
        accounts.set_user_password(
            user_id=bob.pk, password="short", actor=admin, now=NOW
        )
    assert caught.value.field == "password"
    bob.refresh_from_db()
    assert bob.check_password("pw-for-tests-only")

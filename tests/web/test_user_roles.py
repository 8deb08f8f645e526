"""No role climbs above itself: every pair of roles over every user-management action
of the Users page, and a new role or password revokes the user's API tokens."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model

from recommender.errors import Forbidden
from recommender.models import ApiToken, AuditEvent
from recommender.roles import Role, role_of
from recommender.services.access import accounts, tokens
from tests.factories import make_user
from tests.web.conftest import client_for

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PASSWORD = "pw-for-tests-only"
# The people on both sides: no role, each role, and a superuser.
KINDS = ["none", "viewer", "operator", "admin", "superuser"]


def make_person(name: str, kind: str):
    if kind == "superuser":
        return get_user_model().objects.create_superuser(name, password=PASSWORD)
    return make_user(name, None if kind == "none" else Role(kind))


def is_admin_like(kind: str) -> bool:
    return kind in ("admin", "superuser")


def allowed(actor: str, target: str, new_role: str | None = None) -> bool:
    """The rule: admins manage non-admins (up to operator), a superuser anyone."""
    if actor == "superuser":
        return True
    if actor != "admin":
        return False  # the page itself needs the admin role
    return not is_admin_like(target) and new_role != "admin"


def state(user) -> tuple:
    user.refresh_from_db()
    return (
        user.is_active,
        user.password,
        sorted(user.groups.values_list("name", flat=True)),
    )


# (the form posted, what it changes)
ACTIONS = {
    "role-none": {"form": "role", "role": ""},
    "role-viewer": {"form": "role", "role": "viewer"},
    "role-operator": {"form": "role", "role": "operator"},
    "role-admin": {"form": "role", "role": "admin"},
    "deactivate": {"form": "active", "active": "false"},
    "password": {"form": "password", "password": "a-brand-new-secret"},
}


@pytest.mark.parametrize("action", list(ACTIONS))
@pytest.mark.parametrize("target_kind", KINDS)
@pytest.mark.parametrize("actor_kind", KINDS)
def test_every_role_pair_over_every_row_action(db, actor_kind, target_kind, action):
    actor = make_person("actor", actor_kind)
    target = make_person("target", target_kind)
    before = state(target)
    post = {**ACTIONS[action], "user_id": target.pk}
    new_role = post.get("role") if action.startswith("role-") else None

    response = client_for(actor).post("/users/", post)

    if allowed(actor_kind, target_kind, new_role or None):
        assert response.status_code == 302, response.content[:300]
        # A role set to what the user has (no group for a superuser) changes nothing.
        groups_now = "none" if target_kind == "superuser" else target_kind
        if action != "role-" + groups_now:
            assert state(target) != before
    else:
        assert response.status_code == 403
        assert state(target) == before


def test_a_role_admin_cannot_reactivate_a_deactivated_admin(db):
    admin = make_person("actor", "admin")
    other = make_person("other", "admin")
    accounts.set_user_active(user_id=other.pk, active=False, actor=None, now=NOW)

    response = client_for(admin).post(
        "/users/", {"form": "active", "user_id": other.pk, "active": "true"}
    )

    assert response.status_code == 403
    other.refresh_from_db()
    assert not other.is_active


@pytest.mark.parametrize("new_kind", ["viewer", "operator", "admin"])
@pytest.mark.parametrize("actor_kind", KINDS)
def test_every_role_creating_every_role(db, actor_kind, new_kind):
    actor = make_person("actor", actor_kind)

    response = client_for(actor).post(
        "/users/",
        {"form": "new", "username": "newbie", "password": PASSWORD, "role": new_kind},
    )

    created = get_user_model().objects.filter(username="newbie").first()
    if allowed(actor_kind, "none", new_kind):
        assert response.status_code == 302
        assert role_of(created) == Role(new_kind)
    else:
        assert response.status_code == 403
        assert created is None


def test_an_admin_may_still_change_their_own_password(db):
    admin = make_person("actor", "admin")

    response = client_for(admin).post(
        "/users/", {"form": "password", "user_id": admin.pk, "password": "mine-anew-1"}
    )

    assert response.status_code == 302
    admin.refresh_from_db()
    assert admin.check_password("mine-anew-1")


def test_the_page_marks_rows_only_a_superuser_may_change(db):
    admin = make_person("actor", "admin")
    make_person("root", "superuser")
    make_person("vera", "viewer")

    body = client_for(admin).get("/users/").content.decode()

    assert body.count("superuser only") == 3  # root's role, access and password
    assert "revokes that user's API tokens" in body


def test_the_command_line_may_manage_anyone(db):
    root = make_person("root", "superuser")

    accounts.set_user_active(user_id=root.pk, active=False, actor=None, now=NOW)

    root.refresh_from_db()
    assert not root.is_active


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda user, admin: accounts.set_user_role(
                user_id=user.pk, role="viewer", actor=admin, now=NOW
            ),
            "new role",
        ),
        (
            lambda user, admin: accounts.set_user_password(
                user_id=user.pk, password="fresh-secret-9", actor=admin, now=NOW
            ),
            "new password",
        ),
    ],
    ids=["role", "password"],
)
def test_a_new_role_or_password_revokes_the_users_tokens(db, change, reason):
    admin = make_person("actor", "admin")
    user = make_person("olga", "operator")
    _, key = tokens.create_token(name="ci", scope="write", created_by=user, now=NOW)
    _, other_key = tokens.create_token(
        name="mine", scope="write", created_by=admin, now=NOW
    )

    change(user, admin)

    assert tokens.authenticate_key(key=key, now=NOW) is None
    assert tokens.authenticate_key(key=other_key, now=NOW) is not None
    revoked = ApiToken.objects.get(created_by=user)
    assert revoked.revoked_at == NOW
    event = AuditEvent.objects.filter(action="token.revoke").get()
    assert reason in event.message


def test_setting_the_same_role_again_keeps_the_tokens(db):
    user = make_person("olga", "operator")
    _, key = tokens.create_token(name="ci", scope="write", created_by=user, now=NOW)

    accounts.set_user_role(user_id=user.pk, role="operator", actor=None, now=NOW)

    assert tokens.authenticate_key(key=key, now=NOW) is not None


def test_the_service_refuses_with_a_forbidden_error_naming_the_user(db):
    admin = make_person("actor", "admin")
    root = make_person("root", "superuser")

    with pytest.raises(Forbidden, match=r"only a superuser may re-role a superuser"):
        accounts.set_user_role(user_id=root.pk, role="viewer", actor=admin, now=NOW)

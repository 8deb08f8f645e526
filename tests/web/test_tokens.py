"""The API tokens page: who may create and revoke which tokens, the key shown once,
errors next to the field, and a revoked token refused by the API."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import ApiToken, AuditEvent
from recommender.services.access.tokens import create_token, hash_key
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db

KEY = re.compile(r"vpaweb_[A-Za-z0-9_-]{20,}")


def _create(client: Client, name: str, scope: str, **headers):
    return client.post("/tokens/", {"name": name, "scope": scope}, **headers)


def _key_of(response) -> str:
    body = response.content.decode()
    match = re.search(r'data-testid="new-token-key">([^<]+)</pre>', body)
    assert match, "the new key is not on the page"
    return match.group(1)


def test_anonymous_users_are_sent_to_log_in(client):
    for response in (client.get("/tokens/"), _create(client, "x", "read")):
        assert response.status_code == 302
        assert "/login/" in response.headers["Location"]
    assert client.post("/tokens/1/revoke").status_code == 302
    assert not ApiToken.objects.exists()


def test_users_without_a_role_get_403(outsider):
    client = client_for(outsider)

    assert client.get("/tokens/").status_code == 403
    assert _create(client, "x", "read").status_code == 403
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    ("persona", "scope", "allowed"),
    [
        ("viewer", "read", True),
        ("viewer", "write", False),
        ("operator", "read", True),
        ("operator", "write", True),
        ("admin_user", "read", True),
        ("admin_user", "write", True),
    ],
)
def test_who_may_create_which_scope(request, persona, scope, allowed):
    user = request.getfixturevalue(persona)
    client = client_for(user)

    page = client.get("/tokens/").content.decode()
    response = _create(client, "ci", scope)

    # The scope menu offers only what the role may create.
    assert ('<option value="write"' in page) == (persona != "viewer")
    if allowed:
        assert response.status_code == 200
        token = ApiToken.objects.get()
        assert (token.name, token.scope, token.created_by) == ("ci", scope, user)
        assert token.key_hash == hash_key(_key_of(response))
    else:
        assert response.status_code == 422
        assert response.context["form"].errors["scope"] == [
            "the viewer role may create read tokens only, not write"
        ]
        assert not ApiToken.objects.exists()
        assert not AuditEvent.objects.exists()


def test_the_key_is_shown_once_with_a_curl_example(operator_client, operator):
    response = _create(operator_client, "ci-deploy", "write", HTTP_HX_REQUEST="true")

    body = response.content.decode()
    key = _key_of(response)
    assert "<html" not in body  # the htmx partial
    assert "shown only this once" in body
    assert f"export VPAWEB_TOKEN='{key}'" in body
    assert "http://testserver/api/v1/rightsize" in body
    assert "no-store" in response.headers["Cache-Control"]
    # Only its hash is stored, and no later page shows it again.
    token = ApiToken.objects.get()
    assert token.key_prefix == key[:12] and key not in str(token.__dict__)
    later = operator_client.get("/tokens/").content.decode()
    assert key not in later
    assert KEY.search(later) is None
    assert "ci-deploy" in later and f"{key[:12]}…" in later
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.after) == (
        "token.create",
        operator,
        {"name": "ci-deploy", "scope": "write"},
    )


def test_the_shown_key_works_on_the_api(viewer_client):
    key = _key_of(_create(viewer_client, "reader", "read"))

    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert api.get("/api/v1/workloads/").status_code == 200
    assert (
        api.post("/api/v1/changes/1/approve").status_code == 403
    )  # read scope: no changes
    assert ApiToken.objects.get().last_used_at is not None


@pytest.mark.parametrize(
    ("name", "scope", "field", "message"),
    [
        ("", "read", "name", "a token needs a name of 1 to 100 characters"),
        ("   ", "read", "name", "a token needs a name of 1 to 100 characters"),
        ("x" * 101, "read", "name", "a token needs a name of 1 to 100 characters"),
        ("ci", "admin", "scope", "scope must be one of read, write, not 'admin'"),
        ("ci", "", "scope", "scope must be one of read, write, not ''"),
    ],
)
def test_bad_input_is_shown_next_to_the_field(
    operator_client, name, scope, field, message
):
    page = _create(operator_client, name, scope)
    fragment = _create(operator_client, name, scope, HTTP_HX_REQUEST="true")

    assert page.status_code == 422
    assert page.context["form"].errors == {field: [message]}
    # htmx swaps only 2xx answers; the error is in the swapped form.
    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert 'class="errorlist"' in body
    label = "Name" if field == "name" else "Scope"
    section = body[body.index(f"<label>{label}") :]
    assert section.index("errorlist") < section.index("</label>")
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_duplicate_active_name_is_refused_next_to_the_name(operator_client):
    _create(operator_client, "ci", "read")

    response = _create(operator_client, "ci", "write")

    assert response.status_code == 422
    assert "already exists" in response.context["form"].errors["name"][0]
    assert ApiToken.objects.count() == 1


def _token_of(user, name="t", scope="read"):
    token, key = create_token(
        name=name, scope=scope, created_by=user, now=timezone.now()
    )
    return token, key


def test_revoking_ends_the_token_at_once(operator, operator_client):
    token, key = _token_of(operator, scope="write")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert api.get("/api/v1/workloads/").status_code == 200

    response = operator_client.post(
        f"/tokens/{token.pk}/revoke", HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 200
    assert 'data-testid="token-state"><span class="badge run-failed">revoked' in (
        response.content.decode()
    )
    assert "Revoke</button>" not in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None
    refused = api.get("/api/v1/workloads/")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "authentication_failed"
    event = AuditEvent.objects.get(action="token.revoke")
    assert (event.actor, event.object_id) == (operator, str(token.pk))


def test_revoking_twice_says_so_and_records_once(operator, operator_client):
    token, _ = _token_of(operator)
    operator_client.post(f"/tokens/{token.pk}/revoke")

    again = operator_client.post(f"/tokens/{token.pk}/revoke", HTTP_HX_REQUEST="true")

    assert "was already revoked" in again.content.decode()
    assert AuditEvent.objects.filter(action="token.revoke").count() == 1


@pytest.mark.parametrize("persona", ["viewer", "operator"])
def test_non_admins_revoke_only_their_own_tokens(request, persona, admin_user):
    user = request.getfixturevalue(persona)
    client = client_for(user)
    own, _ = _token_of(user, "own")
    theirs, _ = _token_of(admin_user, "theirs", "write")
    system, _ = _token_of(None, "from-manage-py")

    page = client.get("/tokens/").content.decode()

    assert f'action="/tokens/{own.pk}/revoke"' in page
    assert f'action="/tokens/{theirs.pk}/revoke"' not in page
    assert client.post(f"/tokens/{theirs.pk}/revoke").status_code == 403
    assert client.post(f"/tokens/{system.pk}/revoke").status_code == 403
    assert client.post(f"/tokens/{own.pk}/revoke").status_code == 302
    states = dict(ApiToken.objects.values_list("name", "revoked_at"))
    assert states["theirs"] is None and states["from-manage-py"] is None
    assert states["own"] is not None


def test_admins_revoke_any_token(admin_client_, operator):
    token, _ = _token_of(operator, "olgas", "write")
    system, _ = _token_of(None, "from-manage-py")

    assert admin_client_.post(f"/tokens/{token.pk}/revoke").status_code == 302
    assert admin_client_.post(f"/tokens/{system.pk}/revoke").status_code == 302

    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists()


def test_revoking_a_missing_token_is_404(admin_client_):
    assert admin_client_.post("/tokens/999/revoke").status_code == 404


def test_revoke_is_post_only(operator, operator_client):
    token, _ = _token_of(operator)

    assert operator_client.get(f"/tokens/{token.pk}/revoke").status_code == 405
    token.refresh_from_db()
    assert token.revoked_at is None


def test_list_shows_creator_scope_use_and_state(operator):
    _, key = _token_of(operator, "ci-write", "write")
    old, _ = _token_of(None, "old")
    Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/api/v1/workloads/")
    old.revoked_at = timezone.now()
    old.save(update_fields=["revoked_at"])

    # Operators and admins see every token; viewers only their own
    # (test_readable_records).
    body = client_for(operator).get("/tokens/").content.decode()

    rows = re.findall(r'<tr id="token-\d+".*?</tr>', body, re.S)
    assert len(rows) == 2
    assert "ci-write" in rows[0] and "olga" in rows[0] and ">write<" in rows[0]
    assert "never" not in rows[0]  # used once through the API
    assert ">active<" in rows[0]
    assert "old" in rows[1] and "system (manage.py)" in rows[1]
    assert ">revoked<" in rows[1] and "never" in rows[1]
    assert 'href="/tokens/"' in body  # in the nav


def test_tokens_page_has_bounded_queries(
    admin_user, admin_client_, operator, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for i in range(3):
        _token_of(operator if i % 2 else admin_user, f"t{i}")
    with CaptureQueriesContext(connection) as small:
        admin_client_.get("/tokens/")
    for i in range(3, 20):
        _token_of(operator if i % 2 else admin_user, f"t{i}")

    with django_assert_max_num_queries(7):
        response = admin_client_.get("/tokens/")

    assert response.status_code == 200
    with CaptureQueriesContext(connection) as big:
        admin_client_.get("/tokens/")
    assert len(big) == len(small)

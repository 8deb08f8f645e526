"""Who may do what: permission matrix, tokens, throttling, the apitoken command."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from django.utils import timezone

from recommender.errors import Conflict, InvalidInput
from recommender.models import ApiToken, AuditEvent, Policy, ResizeChange
from recommender.roles import Role, grant_role
from recommender.services.access.tokens import create_token, hash_key, revoke_token
from tests.api.conftest import token_client
from tests.factories import make_cluster, make_workload

pytestmark = pytest.mark.django_db

RIGHTSIZE_BODY = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        resources: {requests: {cpu: "1"}}
"""


def _call(client: Client, operation: str, shop: Any) -> int:
    """Run one operation of the matrix; return the status code."""
    if operation == "read":
        return client.get("/api/v1/workloads/").status_code
    if operation == "rightsize":
        return client.post(
            "/api/v1/rightsize", RIGHTSIZE_BODY, content_type="application/yaml"
        ).status_code
    if operation == "update_policy":
        return client.patch(
            f"/api/v1/workloads/{shop.pk}/policy",
            {"min_replicas": 2},
            content_type="application/json",
        ).status_code
    if operation in ("approve", "reject"):
        Policy.objects.filter(workload=shop).update(mode=Policy.Mode.INITIAL)
        # One pod per operation: the database holds one open change per pod.
        change = ResizeChange.objects.create(workload=shop, pod=f"web-{operation}")
        return client.post(f"/api/v1/changes/{change.pk}/{operation}").status_code
    raise AssertionError(operation)


# principal → expected status of read, rightsize, update_policy, approve, reject
MATRIX = {
    "anonymous": (401, 401, 401, 401, 401),
    "read_token": (200, 200, 403, 403, 403),
    "write_token": (200, 200, 200, 200, 200),
    "revoked_token": (401, 401, 401, 401, 401),
    "unknown_token": (401, 401, 401, 401, 401),
    "viewer": (200, 200, 403, 403, 403),
    "operator": (200, 200, 200, 200, 200),
    "no_role": (403, 403, 403, 403, 403),
}
OPERATIONS = ("read", "rightsize", "update_policy", "approve", "reject")


@pytest.mark.parametrize("principal", list(MATRIX))
def test_permission_matrix(
    principal: str,
    shop: Any,
    request: pytest.FixtureRequest,
    session_client: Any,
) -> None:
    if principal == "anonymous":
        client = Client()
    elif principal == "unknown_token":
        client = token_client("vpaweb_not-a-real-key")
    elif principal.endswith("_token"):
        key = request.getfixturevalue(principal.replace("_token", "_key"))
        client = token_client(key)
    else:
        fixture = {"viewer": "viewer", "operator": "operator", "no_role": "outsider"}
        client = session_client(request.getfixturevalue(fixture[principal]))
    got = tuple(_call(client, operation, shop) for operation in OPERATIONS)
    assert got == MATRIX[principal]


def test_missing_credentials_get_401_with_bearer_challenge() -> None:
    response = Client().get("/api/v1/workloads/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "not_authenticated"


def test_revoked_token_is_refused_with_a_clear_message(revoked_key: str) -> None:
    response = token_client(revoked_key).get("/api/v1/clusters/")
    assert response.status_code == 401
    assert response.json() == {
        "error": {
            "code": "authentication_failed",
            "message": "the token is unknown, revoked, or its owner is deactivated",
            "fields": {},
        }
    }


def test_malformed_authorization_header_is_refused(read_key: str) -> None:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {read_key} extra")
    response = client.get("/api/v1/clusters/")
    assert response.status_code == 401
    assert "Bearer <token>" in response.json()["error"]["message"]


def test_read_token_is_told_why_it_cannot_write(read_client: Client, shop: Any) -> None:
    response = read_client.patch(
        f"/api/v1/workloads/{shop.pk}/policy",
        {"mode": "Initial"},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "permission_denied",
        "fields": {},
        "message": "this change needs a write-scope token or the operator role",
    }
    shop.policy.refresh_from_db()
    assert shop.policy.mode == Policy.Mode.OFF


def test_token_changes_are_audited_with_the_token_name(
    write_client: Client, shop: Any
) -> None:
    response = write_client.patch(
        f"/api/v1/workloads/{shop.pk}/policy",
        {"mode": "Initial"},
        content_type="application/json",
    )
    assert response.status_code == 200
    event = AuditEvent.objects.get(action="policy.update")
    assert event.actor_label == "token:ci-write"
    assert event.actor is not None and event.actor.username == "olga"
    assert event.before == {"mode": "Off"} and event.after == {"mode": "Initial"}


def test_keys_are_stored_only_as_hashes() -> None:
    token, key = create_token(
        name="ci", scope="read", created_by=None, now=timezone.now()
    )
    assert key.startswith("vpaweb_") and len(key) > 40
    token.refresh_from_db()
    assert token.key_hash == hash_key(key) and key not in token.key_hash
    assert key.startswith(token.key_prefix)


def test_token_use_is_recorded(read_key: str) -> None:
    assert ApiToken.objects.get(name="ci-read").last_used_at is None
    token_client(read_key).get("/api/v1/clusters/")
    assert ApiToken.objects.get(name="ci-read").last_used_at is not None


def test_token_names_are_unique_among_active_tokens_only() -> None:
    now = timezone.now()
    token, _ = create_token(name="ci", scope="read", created_by=None, now=now)
    with pytest.raises(InvalidInput) as excinfo:
        create_token(name="ci", scope="write", created_by=None, now=now)
    assert excinfo.value.field == "name"
    revoke_token(token_id=token.pk, revoked_by=None, now=now)
    again, _ = create_token(name="ci", scope="write", created_by=None, now=now)
    assert again.pk != token.pk
    with pytest.raises(Conflict):
        revoke_token(token_id=token.pk, revoked_by=None, now=now)


@pytest.mark.parametrize(
    ("name", "scope", "field"), [("", "read", "name"), ("ci", "admin", "scope")]
)
def test_bad_token_input_names_the_field(name: str, scope: str, field: str) -> None:
    with pytest.raises(InvalidInput) as excinfo:
        create_token(name=name, scope=scope, created_by=None, now=timezone.now())
    assert excinfo.value.field == field
    assert not ApiToken.objects.exists()


def test_each_token_has_its_own_request_budget(read_key: str, write_key: str) -> None:
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": "3/min"}}
    with override_settings(REST_FRAMEWORK=rest):
        reader, writer = token_client(read_key), token_client(write_key)
        assert [reader.get("/api/v1/clusters/").status_code for _ in range(3)] == [
            200
        ] * 3
        throttled = reader.get("/api/v1/clusters/")
        assert throttled.status_code == 429
        assert throttled.json()["error"]["code"] == "throttled"
        assert int(throttled["Retry-After"]) > 0
        # Another token is not affected by the first one's budget.
        assert writer.get("/api/v1/clusters/").status_code == 200


def test_apitoken_command_creates_lists_and_revokes(operator: Any) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "apitoken",
        "create",
        "--name",
        "deploy",
        "--scope",
        "write",
        "--user",
        "olga",
        stdout=out,
        stderr=err,
    )
    key = out.getvalue().strip()
    assert "never shown again" in err.getvalue()
    assert token_client(key).get("/api/v1/clusters/").status_code == 200

    listing = io.StringIO()
    call_command("apitoken", "list", stdout=listing)
    assert "deploy" in listing.getvalue() and key not in listing.getvalue()

    call_command("apitoken", "revoke", "--name", "deploy", stdout=io.StringIO())
    assert token_client(key).get("/api/v1/clusters/").status_code == 401
    assert AuditEvent.objects.filter(action="token.revoke").count() == 1
    with pytest.raises(CommandError, match="no active token named 'deploy'"):
        call_command("apitoken", "revoke", "--name", "deploy")


def test_apitoken_command_rejects_unknown_user() -> None:
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("apitoken", "create", "--name", "x", "--user", "ghost")
    assert not ApiToken.objects.exists()


def test_a_token_never_has_more_rights_than_its_owner_has_now(
    operator: Any, write_key: str
) -> None:
    """A write token of an operator demoted to viewer reads but no longer writes, also
    where the demotion is one no signal sees (role groups edited in bulk; a new role
    given through the model revokes the token outright)."""
    client = token_client(write_key)
    workload = make_workload(make_cluster("owned"), "api")
    assert (
        client.patch(
            f"/api/v1/workloads/{workload.pk}/policy",
            {"profile": "vpa"},
            content_type="application/json",
        ).status_code
        == 200
    )
    memberships = type(operator).groups.through.objects.filter(user=operator)
    memberships.update(group=Group.objects.get(name=Role.VIEWER.value))
    response = client.patch(
        f"/api/v1/workloads/{workload.pk}/policy",
        {"profile": "vpa"},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert client.get("/api/v1/clusters/").status_code == 200
    # With no role at all, not even reads.
    memberships.delete()
    assert client.get("/api/v1/clusters/").status_code == 403
    # Through the model, the token is revoked.
    grant_role(operator, Role.OPERATOR)
    assert client.get("/api/v1/clusters/").status_code == 401


def test_tokens_of_a_deactivated_or_deleted_owner_stop_working(
    operator: Any, write_key: str
) -> None:
    client = token_client(write_key)
    assert client.get("/api/v1/clusters/").status_code == 200
    operator.is_active = False
    operator.save(update_fields=["is_active"])
    response = client.get("/api/v1/clusters/")
    assert response.status_code == 401
    assert "owner is deactivated" in response.json()["error"]["message"]
    operator.delete()
    assert not ApiToken.objects.filter(name="ci-write").exists()
    assert client.get("/api/v1/clusters/").status_code == 401


@pytest.mark.django_db
def test_a_deactivated_owners_token_reads_nothing() -> None:
    from recommender.roles import Role
    from recommender.services.access.tokens import create_token
    from tests.api.conftest import token_client
    from tests.factories import make_user

    owner = make_user("owen", Role.VIEWER)
    _, key = create_token(name="ci", scope="read", created_by=owner, now=timezone.now())
    assert token_client(key).get("/api/v1/workloads/").status_code == 200

    owner.is_active = False
    owner.save(update_fields=["is_active"])

    response = token_client(key).get("/api/v1/workloads/")
    assert response.status_code == 401
    error = response.json()["error"]
    assert "fields" in error
    assert "deactivated" in error["message"]

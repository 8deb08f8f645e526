"""Small things people notice: the rejection reason on the Changes row, audit
before/after as fields, token names validated and private to viewers, one spelling of
the mode names."""

from __future__ import annotations

import pytest
from django.utils import timezone

from recommender.models import ApiToken, AuditEvent, ResizeChange
from recommender.services.access.tokens import create_token
from recommender.services.policy.changes import update_policy
from tests.factories import make_cluster, make_workload
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db


def _change() -> ResizeChange:
    workload = make_workload(make_cluster(), "api", mode="Recreate")
    return ResizeChange.objects.create(
        workload=workload,
        pod="api-1",
        resources_before={"app": {"requests": {"cpu": 500}}},
        resources_after={"app": {"requests": {"cpu": 250}}},
    )


def test_the_rejection_reason_is_on_the_changes_row(operator_client, viewer_client):
    change = _change()

    row = operator_client.post(
        f"/changes/{change.pk}/reject",
        {"reason": "peak season, not now"},
        HTTP_HX_REQUEST="true",
    ).content.decode()

    assert 'data-testid="rejection-reason">reason: peak season, not now' in row
    page = viewer_client.get("/changes/").content.decode()
    assert 'data-testid="rejection-reason">reason: peak season, not now' in page
    assert AuditEvent.objects.get(action="change.reject").after == {
        "status": "rejected",
        "reason": "peak season, not now",
    }


def test_a_rejection_without_reason_shows_none(operator_client):
    change = _change()
    operator_client.post(f"/changes/{change.pk}/reject")

    assert 'data-testid="rejection-reason"' not in (
        operator_client.get("/changes/").content.decode()
    )


def test_audit_before_and_after_are_fields_not_python_text(
    operator, viewer_client, small_fleet
):
    update_policy(
        workload_id=small_fleet["over"].pk,
        changes={
            "mode": "InPlaceOrRecreate",
            "profile_overrides": {"margin_fraction": 0.1},
        },
        actor=operator,
        now=timezone.now(),
    )

    body = viewer_client.get("/audit/").content.decode()

    after = body[body.index('data-testid="audit-after"') :]
    after = after[: after.index("</td>")]
    assert "<code>mode</code>: InPlaceOrRecreate" in after
    assert "<code>profile_overrides.margin_fraction</code>: 0.1" in after
    before = body[body.index('data-testid="audit-before"') :]
    before = before[: before.index("</td>")]
    assert "<code>profile_overrides</code>: none" in before
    assert "{&#x27;" not in body and "{'" not in body  # no Python dict text


@pytest.mark.parametrize(
    "name", ["<b>ci</b>", "ci\ndeploy", "-ci", 'ci"quoted', "ci\tdeploy"]
)
def test_token_names_with_odd_characters_are_refused_naming_the_field(
    operator_client, name
):
    response = operator_client.post("/tokens/", {"name": name, "scope": "read"})

    assert response.status_code == 422
    (message,) = response.context["form"].errors["name"]
    assert message.startswith("a token name starts with a letter or digit")
    assert not ApiToken.objects.exists()


def test_token_names_people_use_are_accepted(operator):
    for name in ("ci-deploy", "ci/deploy prod", "grafana.read_only", "2026 report"):
        token, _ = create_token(
            name=name, scope="read", created_by=operator, now=timezone.now()
        )
        assert token.name == name


def test_a_viewer_sees_only_their_own_token_names(viewer, viewer_client, operator):
    create_token(name="mine", scope="read", created_by=viewer, now=timezone.now())
    create_token(
        name="olgas-secret-pipeline",
        scope="write",
        created_by=operator,
        now=timezone.now(),
    )
    create_token(
        name="from-manage-py", scope="read", created_by=None, now=timezone.now()
    )

    page = viewer_client.get("/tokens/").content.decode()

    assert "mine" in page
    assert "olgas-secret-pipeline" not in page
    assert "from-manage-py" not in page
    # An operator still sees every token.
    full = client_for(operator).get("/tokens/").content.decode()
    assert "olgas-secret-pipeline" in full and "mine" in full


def test_mode_names_are_spelt_as_upstream_in_the_editor(operator_client, small_fleet):
    page = operator_client.get(
        f"/workloads/{small_fleet['over'].pk}/policy"
    ).content.decode()

    assert '<option value="InPlaceOrRecreate">InPlaceOrRecreate</option>' in page
    assert "In Place Or Recreate" not in page

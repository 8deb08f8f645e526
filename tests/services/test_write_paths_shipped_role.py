"""The permission check asks what the shipped writer role really grants: against the
fake API server bound to deploy/components/actuation/rbac-writer.yaml, every write path
shows allowed, the webhook registration's ``update`` asked with the name the role
grants it for (``resourceNames: [vpaweb-webhook]``), and the registration the check
allows is the one ``webhook install`` then makes (201, then 200)."""

from __future__ import annotations

import pytest

from recommender.cluster.writer import AccessCheck
from recommender.services.actuation import permissions
from recommender.services.admission.registration import (
    CONFIGURATION_NAME,
    webhook_configuration,
)
from tests.cluster.test_kubernetes_rbac_writer import WRITER_ROLE, role_of
from tests.factories import make_cluster
from tests.k8s_fake.actuation import deployment, fake_cluster
from tests.services.test_updater_fake_api import NOW

pytestmark = pytest.mark.django_db


def test_the_shipped_role_shows_every_write_path_it_has(tmp_path):
    fake = fake_cluster(deployment("api"), tmp_path)
    try:
        fake.server.bind_role(role_of(WRITER_ROLE)["rules"])
        cluster = make_cluster(
            "fake", kind="kubernetes", context="fake", actuation_allowed=True
        )
        found = permissions.check_write_permissions(
            cluster, writer=fake.writer, now=NOW
        )
        assert {p: v["allowed"] for p, v in found["paths"].items()} == {
            p: True for p in permissions.WRITE_PATHS
        }, found
        update = next(
            r
            for r in fake.access_reviews()
            if r["resource"] == "mutatingwebhookconfigurations"
            and r["verb"] == "update"
        )
        assert update["name"] == CONFIGURATION_NAME
        # The role grants what the check says: install, then install again.
        body = webhook_configuration(url="https://vpaweb.example:8443", cluster="c")
        assert fake.writer.apply_webhook_configuration(body=body).status == 201
        assert fake.writer.apply_webhook_configuration(body=body).status == 200
    finally:
        fake.close()


def test_the_role_is_matched_as_rbac_matches(tmp_path):
    # The fake's own check: without the name, the resourceNames rule does not match
    # (what a review asking without it was answered), and another name is refused.
    fake = fake_cluster(deployment("api"), tmp_path)
    try:
        fake.server.bind_role(role_of(WRITER_ROLE)["rules"])
        group, resource = (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
        )
        answers = fake.writer.review_access(
            checks=[
                AccessCheck(group, resource, "update"),
                AccessCheck(group, resource, "update", name="someone-else"),
                AccessCheck(group, resource, "update", name=CONFIGURATION_NAME),
                AccessCheck(group, resource, "create"),
                AccessCheck("", "pods", "delete"),
            ]
        )
        assert [a.allowed for a in answers] == [False, False, True, True, False]
    finally:
        fake.close()

"""deploy/rbac-webhook.yaml grants the webhook's registration and nothing else."""

from __future__ import annotations

from pathlib import Path

import yaml

from recommender.services.admission.registration import CONFIGURATION_NAME

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "rbac-webhook.yaml"


def test_the_webhook_role_allows_only_its_own_configuration():
    role, binding = yaml.safe_load_all(RBAC.read_text())
    assert role["kind"] == "ClusterRole"
    grants = set()
    for rule in role["rules"]:
        assert rule["apiGroups"] == ["admissionregistration.k8s.io"]
        assert rule["resources"] == ["mutatingwebhookconfigurations"]
        names = tuple(rule.get("resourceNames", ()))
        # Only create may be unnamed: the object does not exist before it.
        assert names == (CONFIGURATION_NAME,) or rule["verbs"] == ["create"]
        grants.update(rule["verbs"])
    # What KubernetesWriter sends: GET then POST or PUT (install), DELETE (uninstall).
    assert grants == {"get", "create", "update", "delete"}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]

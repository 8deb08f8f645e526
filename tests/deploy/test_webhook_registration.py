"""One owner of the webhook's registration: `manage.py webhook install`.

The actuation overlays render no MutatingWebhookConfiguration; their install Job runs
the same command a user runs outside the cluster (`install --url`). Here the Job's own
arguments (rendered by `kubectl kustomize`, parsed by the command) run against the fake
API server before and after an install by URL: each install replaces the whole
configuration (exactly one of url or service, the opt-out selectors, the path and the
timeout always there), the same install twice changes nothing, and re-applying the
overlay cannot change it because the overlay holds none (test_manifests.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from recommender.models import Cluster
from recommender.services.admission.certs import create_certificates
from tests.deploy.test_manifests import named, of_kind, render
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig

pytestmark = pytest.mark.django_db

MOUNTED_CA = "/etc/vpaweb/webhook-tls/ca.crt"
OPT_OUT = {"key": "vpaweb.io/webhook", "operator": "NotIn", "values": ["disabled"]}


def job_install(overlay: str, ca_file: Path) -> tuple[list[str], dict[str, str]]:
    """The overlay's install Job: its arguments (as this machine can run them) and the
    ConfigMap its environment comes from."""
    objects = render(overlay)
    config = named(objects, "ConfigMap", "vpaweb-config")["data"]
    (job,) = [
        o
        for o in of_kind(objects, "Job")
        if o["spec"]["template"]["spec"]["containers"][0]["args"][:2]
        == ["manage", "webhook"]
    ]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = [
        arg.replace(
            "$(VPAWEB_WEBHOOK_CLUSTER)", config["VPAWEB_WEBHOOK_CLUSTER"]
        ).replace(MOUNTED_CA, str(ca_file))
        for arg in container["args"][2:]
    ]
    return args, config


def the_hook(api: FakeApiServer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one stored configuration and its one webhook, checked complete."""
    assert list(api.webhook_configurations.items) == ["vpaweb-webhook"]
    stored = api.webhook_configurations.items["vpaweb-webhook"]
    (hook,) = stored["webhooks"]
    client = hook["clientConfig"]
    # kube-apiserver refuses a configuration with both (or neither) with a 422.
    assert ("url" in client) != ("service" in client)
    assert OPT_OUT in hook["namespaceSelector"]["matchExpressions"]
    assert hook["objectSelector"] == {"matchExpressions": [OPT_OUT]}
    assert hook["failurePolicy"] == "Ignore"
    assert 1 <= hook["timeoutSeconds"] <= 5
    return stored, hook


@pytest.mark.parametrize("overlay", ["actuation", "actuation-cert-manager"])
def test_the_jobs_install_and_an_install_by_url_replace_each_other_whole(
    overlay, tmp_path, settings
):
    certs = create_certificates(
        directory=tmp_path / "certs", dns_names=["vpaweb-webhook.vpaweb.svc"]
    )
    args, config = job_install(overlay, certs.ca_cert)
    # The Job's environment: the ConfigMap the overlay renders.
    settings.WEBHOOK_NAMESPACE = config["VPAWEB_WEBHOOK_NAMESPACE"]
    cluster = config["VPAWEB_WEBHOOK_CLUSTER"]
    api = FakeApiServer().start()
    try:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", {"fake": api}, current="fake"
        )
        # Registering is a write: an admin allowed this cluster's actuation.
        Cluster.objects.create(
            name=cluster, kind="kubernetes", context="fake", actuation_allowed=True
        )
        by_url = [
            "install",
            "--cluster",
            cluster,
            "--url",
            "https://vpaweb.example:8443",
            "--kubeconfig",
            str(kubeconfig),
        ]
        by_job = [*args, "--kubeconfig", str(kubeconfig)]

        # First the documented out-of-cluster path, then the overlay's Job.
        call_command("webhook", *by_url)
        _, hook = the_hook(api)
        assert (
            hook["clientConfig"]["url"]
            == f"https://vpaweb.example:8443/mutate/{cluster}"
        )
        call_command("webhook", *by_job)
        stored, hook = the_hook(api)
        assert hook["clientConfig"]["service"] == {
            "namespace": "vpaweb",
            "name": "vpaweb-webhook",
            "path": f"/mutate/{cluster}",
            "port": 443,
        }
        names = hook["namespaceSelector"]["matchExpressions"][0]
        assert names["values"] == ["kube-system", "vpaweb"]
        if overlay == "actuation":
            assert hook["clientConfig"]["caBundle"]
        else:
            assert stored["metadata"]["annotations"] == {
                "cert-manager.io/inject-ca-from": "vpaweb/vpaweb-webhook"
            }

        # The Job again (a re-applied overlay whose Job was deleted): nothing changes.
        generation = stored["metadata"]["generation"]
        call_command("webhook", *by_job)
        again, _ = the_hook(api)
        assert again["webhooks"] == stored["webhooks"]
        assert again["metadata"]["generation"] == generation

        # And the other way round: an install by URL after the Job's.
        call_command("webhook", *by_url)
        replaced, hook = the_hook(api)
        assert set(hook["clientConfig"]) == {"url"}
        assert "annotations" not in replaced["metadata"]

        call_command(
            "webhook",
            "uninstall",
            "--cluster",
            cluster,
            "--kubeconfig",
            str(kubeconfig),
        )
        assert api.webhook_configurations.items == {}
    finally:
        api.stop()

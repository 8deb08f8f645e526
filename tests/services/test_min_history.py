"""Initial and the updater act only on recommendations backed by enough history
(VPAWEB_MIN_HISTORY_HOURS, default 24): with 1.5 h of samples the webhook leaves the
pod alone and the updater proposes nothing, both saying why."""

from __future__ import annotations

import pytest
from django.test import Client

from recommender.models import Container, Policy, ResizeChange
from recommender.services.admission.decision import LEFT_ALONE, PATCHED
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.k8s_fake.limit_range_cases import NAMESPACE, decide_case, recommendation
from tests.k8s_fake.limit_ranger import admit_pod
from tests.services.test_updater_fake_api import cleanup, cycle, setup_world

__all__ = ["cleanup"]  # the fixture, imported for pytest

MI = 2**20
NO_LIMIT_RANGE = {"spec": {"limits": []}}
# Recommendation.confidence is in days of history (upstream's unit).
HOUR_AND_A_HALF = 1.5 / 24


def new_pod() -> dict:
    return admit_pod(
        {
            "metadata": {
                "name": "web-0",
                "namespace": NAMESPACE,
                "ownerReferences": [
                    {"kind": "StatefulSet", "name": "web", "controller": True}
                ],
            },
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ]
            },
        },
        [],
    )


def test_the_webhook_leaves_a_pod_alone_until_there_is_enough_history():
    young = recommendation(250, 300 * MI)
    young.confidence = HOUR_AND_A_HALF
    decision, patched = decide_case(NO_LIMIT_RANGE, new_pod(), [], {"app": young})
    assert decision.outcome == LEFT_ALONE and patched is None
    assert "not enough history yet: 1.5 h of 24 h" in decision.reason

    grown = recommendation(250, 300 * MI)  # 8 days
    decision, patched = decide_case(NO_LIMIT_RANGE, new_pod(), [], {"app": grown})
    assert decision.outcome == PATCHED
    assert patched["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "250m"


def test_no_recorded_history_is_not_enough(settings):
    unknown = recommendation(250, 300 * MI)
    unknown.confidence = None
    decision, _ = decide_case(NO_LIMIT_RANGE, new_pod(), [], {"app": unknown})
    assert "not enough history yet: 0 h of 24 h" in decision.reason
    settings.MIN_HISTORY_HOURS = 0  # acts on any recommendation
    decision, _ = decide_case(NO_LIMIT_RANGE, new_pod(), [], {"app": unknown})
    assert decision.outcome == PATCHED


@pytest.mark.django_db
def test_the_updater_proposes_nothing_until_there_is_enough_history(tmp_path, cleanup):
    fake, cluster, workload = setup_world(tmp_path, mode="Recreate")
    cleanup.append(fake)
    container = Container.objects.get(workload=workload)
    make_recommendation(
        container,
        cpu_millicores=250,
        memory_bytes=300 * MI,
        history_days=HOUR_AND_A_HALF,
    )
    report = cycle(fake, cluster)
    assert report.proposed == 0 and not ResizeChange.objects.exists()
    assert fake.writes() == []

    make_recommendation(container, cpu_millicores=250, memory_bytes=300 * MI)
    report = cycle(fake, cluster)
    assert report.proposed == 3


@pytest.mark.django_db
def test_the_workload_page_says_how_much_history_is_missing(admin_user):
    cluster = make_cluster("prod")
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        mode=Policy.Mode.INITIAL,
        containers={"app": {"request_cpu_millicores": 500}},
    )
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=250,
        history_days=HOUR_AND_A_HALF,
    )
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/workloads/{workload.pk}/").content.decode()
    wait = "not enough history yet: 1.5 h of 24 h"
    # The "next pod" panel (the webhook: its summary and the container's row) ...
    preview = page.split('data-testid="webhook-preview"')[1].split("</section>")[0]
    assert preview.count(wait) == 2
    assert "New pods are created as submitted" in preview
    # ... and the changes panel (the updater).
    changes = page.split('data-testid="history-waits"')[1].split("</p>")[0]
    assert f"app: {wait}" in changes

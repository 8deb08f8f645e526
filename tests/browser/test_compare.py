"""Namespace comparison in a real browser on the simulated cluster: from a workload
page to profile A vs B over its namespace, through the background run's progress."""

from __future__ import annotations

import pytest
from django.conf import settings

from recommender.models import Cluster
from recommender.roles import Role
from recommender.services.connections import cluster_adapter_for
from tests.browser.conftest import screenshot
from tests.browser.test_dashboard import FLEET_SIZE, PASSWORD
from tests.factories import make_cluster, make_user, make_workload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _tasks_in_process(monkeypatch):
    """The background run in-process, as without Redis (no worker runs in tests)."""
    from vpaweb.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", True)


def test_viewer_compares_two_profiles_over_a_namespace(page):
    settings.SIMULATION_WORKLOADS = FLEET_SIZE
    make_user("vera", Role.VIEWER)
    cluster = make_cluster("sim", kind=Cluster.Kind.SIMULATED)
    found = cluster_adapter_for(cluster).discover().workloads
    sim = next(w for w in found if w.pods)
    workload = make_workload(cluster, sim.name, namespace=sim.namespace, kind=sim.kind)
    for w in found:
        if w.namespace == sim.namespace and w.name != sim.name:
            make_workload(cluster, w.name, namespace=w.namespace, kind=w.kind)

    page.goto(f"/login/?next=/workloads/{workload.pk}/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"**/workloads/{workload.pk}/")
    page.get_by_test_id("compare-link").click()
    page.get_by_test_id("compare-form").wait_for()
    assert page.get_by_test_id("compare-namespace").input_value() == sim.namespace

    # A bad override of B is named, nothing runs.
    page.get_by_test_id("compare-b").select_option("adaptive-margin")
    page.get_by_test_id("compare-days").fill("1")
    page.get_by_test_id("compare-overrides-b").fill("memory_margin_max=-1")
    page.get_by_test_id("compare-run").click()
    errors = page.get_by_test_id("compare-errors")
    errors.wait_for()
    assert "profile_overrides.memory_margin_max" in errors.inner_text()

    page.get_by_test_id("compare-overrides-b").fill("")
    page.get_by_test_id("compare-run").click()
    # The background run's page (reloading while it runs) ends with the answer.
    result = page.get_by_test_id("compare-result")
    result.wait_for(timeout=120_000)
    assert "run=" in page.url
    text = page.get_by_test_id("compare-totals").inner_text()
    assert "A: vpa" in text and "B: adaptive-margin" in text
    rows = page.get_by_test_id("compare-worst-table").locator("tbody tr")
    assert rows.count() >= 1
    assert rows.first.inner_text().startswith(f"{sim.namespace}/")
    screenshot(page, "21-compare-profiles")

"""What-if in a real browser on the simulated cluster: from the workload page to the
side-by-side replay and its charts."""

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


def test_viewer_tries_another_profile(page):
    settings.SIMULATION_WORKLOADS = FLEET_SIZE
    make_user("vera", Role.VIEWER)
    cluster = make_cluster("sim", kind=Cluster.Kind.SIMULATED)
    sim = next(w for w in cluster_adapter_for(cluster).discover().workloads if w.pods)
    workload = make_workload(cluster, sim.name, namespace=sim.namespace, kind=sim.kind)

    # Log in straight to the workload page.
    page.goto(f"/login/?next=/workloads/{workload.pk}/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"**/workloads/{workload.pk}/")
    page.wait_for_selector("body[data-charts-ready=true]")
    page.get_by_test_id("what-if-link").click()
    page.get_by_test_id("what-if-form").wait_for()

    # A bad override first: named in the form, no result.
    page.get_by_test_id("what-if-profile").select_option("recurring-peaks")
    page.get_by_test_id("what-if-days").fill("2")
    page.get_by_test_id("what-if-overrides").fill("margin_fraction=-1")
    page.get_by_test_id("what-if-run").click()
    errors = page.get_by_test_id("what-if-errors")
    errors.wait_for()
    assert "profile_overrides.margin_fraction" in errors.inner_text()
    assert page.get_by_test_id("what-if-result").count() == 0

    page.get_by_test_id("what-if-overrides").fill("margin_fraction=0.3")
    page.get_by_test_id("what-if-run").click()
    result = page.get_by_test_id("what-if-result")
    result.wait_for()
    text = result.inner_text()
    assert "current: vpa" in text
    assert "candidate: recurring-peaks[margin_fraction=0.3]" in text
    assert "resizes the updater would have proposed" in text
    # Every chart is drawn by plotly (static/js/whatif.js, under the page's CSP).
    charts = page.locator("[data-whatif-chart]")
    assert charts.count() >= 2
    page.wait_for_function(
        "[...document.querySelectorAll('[data-whatif-chart]')]"
        ".every(n => n.dataset.drawn === 'true' && n.querySelector('.main-svg'))"
    )
    screenshot(page, "20-what-if")

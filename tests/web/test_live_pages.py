"""The live parts of the dashboard, as the server renders them: poll attributes every
refresh interval, the event that re-reads the workload page after a policy save, the
recommendation history held back until it spans an hour, Copy buttons, and a ReDoc
page that names nothing outside."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from recommender.models import Recommendation
from tests.factories import make_recommendation

pytestmark = pytest.mark.django_db

# Row cp0 is the "*" container policy, cp1 the workload's container "app".
FORM = {
    "mode": "Initial",
    "profile": "vpa",
    "cp0-mode": "Auto",
    "cp0-controlled_cpu": "on",
    "cp0-controlled_memory": "on",
    "cp1-mode": "Auto",
    "cp1-controlled_cpu": "on",
    "cp1-controlled_memory": "on",
}


def test_list_and_workload_page_poll_every_refresh_interval(
    viewer_client, small_fleet, settings
):
    settings.REFRESH_INTERVAL_S = 17
    workload = small_fleet["over"]

    listing = viewer_client.get("/workloads/?namespace=default").content.decode()
    fragment = viewer_client.get(
        "/workloads/?namespace=default", HTTP_HX_REQUEST="true"
    ).content.decode()
    page = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()

    for body in (listing, fragment):  # the fragment keeps polling after each swap
        table = re.search(r'<div id="workload-table"[^>]*>', body)[0]
        assert 'hx-trigger="every 17s"' in table
        assert "data-poll-current-url" in table
        assert "data-poll-visible" in table
    live = re.search(r'<div id="workload-live"[^>]*>', page)[0]
    assert 'hx-trigger="every 17s, policy-saved from:body"' in live
    assert 'hx-select="#workload-live"' in live
    # The policy form is outside the live part: a refresh never replaces it.
    assert page.index("<h2>Policy</h2>") > page.index('id="history-data"')


def test_workload_page_copy_buttons_name_their_snippets(viewer_client, small_fleet):
    workload = small_fleet["over"]

    body = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()

    for name in ("kubectl-patch", "resources-yaml"):
        assert f'data-copy="#{name}"' in body
        assert f'<pre id="{name}"' in body
    assert re.search(r'<script src="/static/js/copy\.js" defer>', body)


def test_saving_a_policy_tells_the_page_to_reread_itself(operator_client, small_fleet):
    url = f"/workloads/{small_fleet['over'].pk}/policy"

    asked = operator_client.post(url, FORM, HTTP_HX_REQUEST="true")
    saved = operator_client.post(
        url, {**FORM, "confirm_mode": "Initial"}, HTTP_HX_REQUEST="true"
    )

    assert "HX-Trigger" not in asked  # only a confirmation: nothing changed yet
    assert 'data-testid="policy-saved"' in saved.content.decode()
    assert saved["HX-Trigger"] == "policy-saved"


@pytest.mark.parametrize(
    ("span", "chart"), [(timedelta(seconds=20), False), (timedelta(hours=2), True)]
)
def test_history_chart_waits_until_an_hour_of_history(
    viewer_client, small_fleet, span, chart
):
    workload = small_fleet["over"]
    container = workload.containers.get()
    first = Recommendation.objects.get(container=container)
    make_recommendation(
        container, cpu_millicores=300, created_at=first.created_at + span
    )

    body = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()

    assert ('data-chart="history-cpu"' in body) is chart
    assert ('data-testid="history-too-short-app"' in body) is not chart
    if not chart:
        assert "2 recommendations over 20.0 s" in body


def test_redoc_page_names_only_local_assets(viewer_client):
    body = viewer_client.get("/api/v1/redoc/").content.decode()

    assert "googleapis" not in body
    assert "<script>" not in body  # nothing inline: the CSP allows none
    sources = re.findall(r'(?:src|href)="([^"]+)"', body)
    assert sources
    assert all(s.startswith(("/", "data:")) for s in sources), sources
    assert "/static/vendor/redoc.standalone.js" in sources
    assert '"fontFamily": "system-ui' in body

"""deploy/grafana/vpaweb-recommendations.json against a real Prometheus scraping a
running vpaweb's GET /metrics/recommendations: every panel's query and every
variable's returns series, with the variables set to a workload of the fleet."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.conftest import service_missing
from tests.metrics.test_recommendation_metrics import TOKEN, make_fleet
from tests.prometheus_support.server import PrometheusServer, ensure_installed

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
DASHBOARD = (
    Path(__file__).resolve().parents[2]
    / "deploy"
    / "grafana"
    / "vpaweb-recommendations.json"
)
VARIABLES = {"$cluster": "prod", "$namespace": "shop", "$workload": "web"}
LABEL_VALUES = re.compile(r"^label_values\((?P<series>.+), (?P<label>\w+)\)$")


def panels(dashboard: dict) -> list[dict]:
    """Every panel with queries, rows' nested panels included."""
    found = []
    for panel in dashboard["panels"]:
        found.extend(panel.get("panels", []))
        if panel["type"] != "row":
            found.append(panel)
    return found


def with_variables(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


@pytest.fixture
def scraping_prometheus(live_server, settings, tmp_path):
    """A real Prometheus scraping the live server's recommendations every second."""
    binaries = ensure_installed()
    if binaries is None:
        service_missing("prometheus and promtool (Debian package 'prometheus')")
    settings.METRICS_TOKEN = TOKEN
    make_fleet()
    config = f"""\
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: vpaweb-recommendations
    metrics_path: /metrics/recommendations
    authorization: {{type: Bearer, credentials: {TOKEN}}}
    static_configs: [{{targets: ["{urlsplit(live_server.url).netloc}"]}}]
"""
    (tmp_path / "data").mkdir()
    server = PrometheusServer(binaries[0], tmp_path / "data", config=config).start()
    try:
        yield server
    finally:
        server.stop()


def query(url: str, expr: str) -> list[dict]:
    answer = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    assert answer.ok, (expr, answer.text)
    return answer.json()["data"]["result"]


def test_every_panel_and_variable_returns_series(scraping_prometheus):
    url = scraping_prometheus.url
    deadline = time.monotonic() + 60
    # Three scrapes, so the range queries have points to draw.
    while not query(url, "count_over_time(vpaweb_recommendation_series[1m]) >= 3"):
        assert time.monotonic() < deadline, query(url, "up")
        time.sleep(0.5)
    dashboard = json.loads(DASHBOARD.read_text())
    checked = 0
    for panel in panels(dashboard):
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = with_variables(target["expr"])
            assert query(url, expr), (panel["title"], expr)
            if panel["type"] == "timeseries":
                end = time.time()
                answer = requests.get(
                    f"{url}/api/v1/query_range",
                    params={"query": expr, "start": end - 60, "end": end, "step": 1},
                    timeout=10,
                ).json()
                assert answer["data"]["result"], (panel["title"], expr)
            checked += 1
    assert checked >= 10
    for variable in dashboard["templating"]["list"]:
        found = LABEL_VALUES.match(with_variables(variable["query"]["query"]))
        assert found, variable["name"]
        values = {
            series["metric"][found["label"]]
            for series in query(url, f"count by ({found['label']}) ({found['series']})")
        }
        assert VARIABLES[f"${variable['name']}"] in values, (variable["name"], values)


def test_the_dashboard_is_importable_and_says_what_it_reads():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["__inputs"][0]["name"] == "DS_PROMETHEUS"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = {p["title"] for p in panels(dashboard)}
    assert {
        "Fleet savings per month",
        "At-risk workloads",
        "CPU: request vs target",
        "Memory: request vs target",
    } <= titles
    for panel in panels(dashboard):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        assert panel["description"], panel["title"]

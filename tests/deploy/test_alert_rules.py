"""The example alert rules (deploy/prometheus/vpaweb-alerts.yml) are valid for
Prometheus and fire when they should: `promtool check rules`, then
`promtool test rules` with tests/deploy/alerts-test.yml (Debian's prometheus package,
installed when missing)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from recommender import metrics
from tests.conftest import service_missing
from tests.prometheus_support.server import ensure_installed

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[1] / "deploy" / "prometheus" / "vpaweb-alerts.yml"


@pytest.fixture(scope="module")
def promtool() -> str:
    binaries = ensure_installed()
    if binaries is None:
        service_missing("promtool (Debian package 'prometheus')")
    return binaries[1]


def test_promtool_accepts_the_rules(promtool):
    done = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


def test_the_alerts_fire_on_failure_and_stay_quiet_when_healthy(promtool):
    done = subprocess.run(
        [promtool, "test", "rules", "alerts-test.yml"],
        cwd=HERE,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_cover_refresh_webhook_and_evictions_with_real_metric_names():
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    names = {rule["alert"] for rule in rules}
    assert {
        "VpawebRefreshStale",
        "VpawebRefreshFailing",
        "VpawebWebhookFailingOpen",
        "VpawebEvictionsRefused",
    } <= names
    # Every vpaweb_* series a rule reads is one vpaweb exports.
    exported = {
        "vpaweb_refresh_last_finished_timestamp_seconds",
        "vpaweb_containers_without_recommendation",
        "vpaweb_refresh_runs_in_progress",
    }
    for counter in (
        metrics.REFRESH_RUNS,
        metrics.WEBHOOK_FAIL_OPENS,
        metrics.UPDATER_REFUSED_429,
        metrics.UPDATER_FAILED,
    ):
        exported.add(f"{counter._name}_total")
    exported.add(f"{metrics.WEBHOOK_LATENCY._name}_bucket")
    used = {
        name
        for rule in rules
        for name in re.findall(r"\bvpaweb_[a-z0-9_]+", rule["expr"])
    }
    assert used <= exported, used - exported


def test_the_compose_prometheus_config_is_valid_and_scrapes_the_recommendations(
    promtool, tmp_path
):
    source = HERE.parents[1] / "deploy" / "compose" / "prometheus.yml"
    # The container's paths, pointed at the clone's files.
    text = (
        source.read_text()
        .replace("/etc/prometheus/vpaweb-alerts.yml", str(RULES))
        .replace(
            "/run/secrets/metrics_token",
            str(HERE.parents[1] / "deploy" / "compose" / "demo-metrics-token"),
        )
    )
    (tmp_path / "prometheus.yml").write_text(text)
    done = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {job["job_name"]: job for job in yaml.safe_load(text)["scrape_configs"]}
    recommendations = jobs["vpaweb-recommendations"]
    assert recommendations["metrics_path"] == "/metrics/recommendations"
    assert recommendations["authorization"] == jobs["vpaweb"]["authorization"]

"""`manage.py scan` end to end, as a user runs it: a child process with a temporary
database, the cluster read from the fake API server (recorded shapes) through a
kubeconfig context, the history from a real Prometheus. Its recommendations equal
``manage.py recommend`` over the same samples, which test_prometheus_backfill proves
equal to what the server stores; every format (table, JSON, YAML, CSV, HTML) says the
same."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.integration.test_prometheus_backfill import offline_recommendations
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.prometheus_support.fixtures import prometheus_with_history
from tests.prometheus_support.k8s_objects import objects_for

pytestmark = pytest.mark.integration
__all__ = ["prometheus_with_history"]  # the fixture, imported for pytest
ROOT = Path(__file__).resolve().parents[2]
BOUNDS = ("target", "lowerBound", "upperBound", "uncappedTarget")


@pytest.fixture(scope="module")
def cluster(prometheus_with_history, tmp_path_factory):
    """The fake API server serving the history's workloads, and its kubeconfig."""
    loaded = prometheus_with_history
    server = FakeApiServer(objects_for(loaded.specs, live_at_s=loaded.end_s)).start()
    kubeconfig = write_kubeconfig(
        tmp_path_factory.mktemp("scan") / "kubeconfig", {"fake": server}, current="fake"
    )
    yield loaded, kubeconfig
    server.stop()


def scan(cluster, *args: str) -> subprocess.CompletedProcess[str]:
    loaded, kubeconfig = cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VPAWEB_", "PROM"))}
    env.update({"KUBECONFIG": str(kubeconfig), "SECRET_KEY": "scan-test-key"})
    now = datetime.fromtimestamp(loaded.end_s, tz=UTC).isoformat()
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "scan", "--context", "fake",
         "--prometheus", loaded.url, "--now", now, *args],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )  # fmt: skip


def test_scan_gives_the_servers_recommendations_in_every_format(cluster, tmp_path):
    done = scan(cluster, "--output", "json")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    got = {
        (r["namespace"], r["workload"], r["containerName"]): r
        for r in report["recommendations"]
    }
    expected = offline_recommendations(cluster[0], tmp_path)
    assert set(got) == set(expected)
    for key, rec in expected.items():
        for bound in BOUNDS:
            assert got[key][bound] == rec[bound], (key, bound)
    # The exit code is the verdict: 1 when a request is outside the tolerance.
    assert report["outside_tolerance"] > 0
    assert done.returncode == 1
    assert "scan: 100% of the history read" in done.stderr

    as_yaml = scan(cluster, "--output", "yaml")
    assert as_yaml.returncode == 1
    assert yaml.safe_load(as_yaml.stdout) == report

    page = scan(cluster, "--output", "html")
    assert page.returncode == 1
    assert page.stdout.startswith("<!DOCTYPE html>")
    assert page.stdout.count("<tr><td>") == len(got)
    assert page.stdout.count('<td class="outside">') == report["outside_tolerance"]

    table = scan(cluster, "--output", "table")
    assert table.returncode == 1
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAMESPACE", "WORKLOAD", "CONTAINER"]
    assert lines[-1] == (
        f"{len(got)} containers, {report['outside_tolerance']} outside the tolerance"
    )
    for namespace, workload, container in got:
        assert any(
            line.split()[:3]
            == [
                namespace,
                f"{got[namespace, workload, container]['kind']}/{workload}",
                container,
            ]
            for line in lines
        ), (namespace, workload, container)


def test_a_tolerance_wide_enough_exits_0_and_csv_has_a_row_per_container(cluster):
    done = scan(
        cluster,
        "--output", "csv",
        "--cpu-tolerance", "100000",
        "--memory-tolerance", "100000",
    )  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert rows and all(row["within_tolerance"] == "True" for row in rows), rows
    assert done.returncode == 0, done.stderr
    assert {(r["namespace"], r["workload"], r["container"]) for r in rows} == {
        ("shop", "web", "app"),
        ("shop", "web", "proxy"),
        ("shop", "db", "postgres"),
        ("batch", "worker", "app"),
    }


def test_an_unreachable_cluster_is_an_error_not_a_verdict(cluster):
    done = scan(cluster, "--output", "json", "--context", "missing")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "missing" in done.stderr

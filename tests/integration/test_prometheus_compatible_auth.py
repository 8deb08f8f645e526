"""Basic auth against both real servers: Prometheus (``--web.config.file`` with
``basic_auth_users``) and VictoriaMetrics (``-httpAuth.*``) refuse a request without
the password and answer vpaweb's source with it. Neither server checks bearer tokens
itself (a proxy in front does: vmauth, an OAuth proxy); the header vpaweb sends is
tested against the fake in tests/sources."""

from __future__ import annotations

import pytest

from recommender.errors import SourceUnavailable
from recommender.sources.prometheus import PrometheusConfig, PrometheusSource
from tests.conftest import service_missing
from tests.prometheus_support import server as prometheus
from tests.prometheus_support import victoria

pytestmark = pytest.mark.integration
USER = "vpaweb"
PASSWORD = "vpaweb-test-password"
# bcrypt of PASSWORD (cost 4), as Prometheus' web config wants it.
PASSWORD_BCRYPT = "$2b$04$YEAzgY4aGHghM0xHeDcSbObgk3NUbAN6LsjThHf.SeW1kWfoeJtZu"
T0 = 1_795_000_020.0


@pytest.fixture(params=["prometheus", "victoria-metrics"])
def protected_url(request, tmp_path):
    """The URL of a real server that asks for USER and PASSWORD."""
    (tmp_path / "data").mkdir()
    if request.param == "prometheus":
        binaries = prometheus.ensure_installed()
        if binaries is None:
            service_missing("prometheus (Debian package 'prometheus')")
        web = tmp_path / "web.yml"
        web.write_text(f"basic_auth_users:\n  {USER}: {PASSWORD_BCRYPT}\n")
        server = prometheus.PrometheusServer(
            binaries[0],
            tmp_path / "data",
            args=(f"--web.config.file={web}",),
            auth=(USER, PASSWORD),
        )
    else:
        binary = victoria.ensure_installed()
        if binary is None:
            service_missing("victoria-metrics (Debian package 'victoria-metrics')")
        server = victoria.VictoriaMetricsServer(
            binary,
            tmp_path / "data",
            args=(f"-httpAuth.username={USER}", f"-httpAuth.password={PASSWORD}"),
            auth=(USER, PASSWORD),
        )
    server.start()
    yield server.url
    server.stop()


def fetch(url: str, **credentials: str) -> None:
    config = PrometheusConfig(url=url, retries=0, backoff_s=0.0, **credentials)
    with PrometheusSource(config, sleep=lambda s: None) as source:
        source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 120, step_s=60)


def test_basic_auth_is_sent_and_needed(protected_url):
    url = protected_url
    fetch(url, username=USER, password=PASSWORD)
    with pytest.raises(SourceUnavailable, match="401"):
        fetch(url, username=USER, password="wrong")
    with pytest.raises(SourceUnavailable, match="401"):
        fetch(url)

"""One viewer floods compare-profiles from 16 tokens, 32 threads at once, against the
production web server (gunicorn, 2 workers x 8 threads): /healthz answers every probe
well within the kubelet's 5-second timeout, because each process runs comparisons on at
most a quarter of its threads and refuses the rest at once (503 ``busy``), and the
person's budgets refuse the others (429). The budgets (and the request rate) are
raised here, so only the thread share holds the flood back, as it must when many people
ask at once.
``make bench BENCH=heavy_flood`` measures the same for longer."""

from __future__ import annotations

import pytest
from django.utils import timezone

from benchmarks.bench_heavy_flood import flood, sim_namespace
from recommender.roles import Role
from recommender.services.access.tokens import create_token
from tests.factories import make_user
from tests.faults.test_database_outage import web_on_the_test_database

pytestmark = pytest.mark.faults

TOKENS = 16


def test_a_flood_of_comparisons_from_one_viewer_leaves_healthz_answering(
    own_postgres, own_redis, settings
):
    settings.API_TOKENS_PER_USER = TOKENS
    viewer = make_user("flood", Role.VIEWER)
    keys = [
        create_token(
            name=f"flood-{index}", scope="read", created_by=viewer, now=timezone.now()
        )[1]
        for index in range(TOKENS)
    ]
    cluster, namespace = sim_namespace("sim-flood")

    with web_on_the_test_database(
        WEB_CONCURRENCY="2",
        GUNICORN_THREADS="8",
        VPAWEB_HEAVY_JOBS_RUNNING="64",
        VPAWEB_HEAVY_JOBS_PER_MINUTE="10000",
        VPAWEB_API_RATE="100000/min",
        # Worker recycling off: over 2,000 requests in 15 s make both workers reach
        # GUNICORN_MAX_REQUESTS together, and while both finish their comparisons
        # before they are replaced a probe waited up to 3 s (an open problem of
        # recycling under a flood; test_worker_recycling tests recycling itself).
        GUNICORN_MAX_REQUESTS="0",
    ) as port:
        result = flood(
            port, keys, cluster=cluster, namespace=namespace, threads=32, seconds=15
        )

    probes = result.probe_ms
    assert len(probes) >= 20, result
    assert result.probe_failures == 0, result
    # The kubelet's probe times out after 5 s; far below that, whatever the load.
    assert max(probes) < 2500, result
    # The flood ran: some comparisons ran, most were refused at once, none crashed.
    assert result.statuses.get(200, 0) + result.statuses.get(503, 0) > 0, result
    assert result.statuses.get(503, 0) > 0, result
    assert set(result.statuses) <= {200, 429, 503}, result
    assert result.busy_codes <= {"busy", "timeout"}, result

"""The production server (gunicorn_conf.py) keeps answering /healthz while slow
clients hold connections open; the 45 s measurement is `make bench BENCH=slowloris`."""

from __future__ import annotations

from benchmarks.bench_slowloris import production_server, run_slowloris


def test_ten_slowloris_connections_leave_healthz_answered():
    # One header line a second: a sync worker would wait for the rest for good.
    with production_server(GUNICORN_READ_TIMEOUT="3") as port:
        probes = run_slowloris(port, connections=10, every_s=1.0, duration_s=8.0)
    assert probes
    assert [status for status, _ in probes] == [200] * len(probes)

"""gunicorn replaces a worker after GUNICORN_MAX_REQUESTS requests: the production
server (2 workers, the project's threaded worker) recycles several times under 8
clients sending /healthz back to back, and every request gets its answer: none reset,
none left waiting (the worker serves the connections it accepted before it exits)."""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter

import pytest

from benchmarks.bench_slowloris import production_server

pytestmark = pytest.mark.faults

MAX_REQUESTS = 50
CLIENTS = 8
SECONDS = 15.0
# A client's patience: far above an answer's time, well below a hang's.
TIMEOUT_S = 5.0


def hammer(port: int, stop: threading.Event, outcomes: Counter[str]) -> None:
    while not stop.is_set():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
        try:
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            response.read()
            outcome = str(response.status)
        except TimeoutError:
            outcome = "timeout"
        except (OSError, http.client.HTTPException) as exc:
            outcome = type(exc).__name__
        finally:
            connection.close()
        outcomes[outcome] += 1


def test_recycled_workers_drop_no_request():
    outcomes: Counter[str] = Counter()
    stop = threading.Event()
    with production_server(
        WEB_CONCURRENCY="2", GUNICORN_MAX_REQUESTS=str(MAX_REQUESTS)
    ) as port:
        clients = [
            threading.Thread(target=hammer, args=(port, stop, outcomes))
            for _ in range(CLIENTS)
        ]
        for client in clients:
            client.start()
        time.sleep(SECONDS)
        stop.set()
        for client in clients:
            client.join(timeout=30)

    served = outcomes["200"]
    # Each worker is replaced after 50 to 55 requests: at least 4 recycles.
    assert served >= 4 * (MAX_REQUESTS + MAX_REQUESTS // 10), outcomes
    assert outcomes == Counter({"200": served}), outcomes

"""A tiny HTTP server that answers like (or unlike) Prometheus, for failure tests.

The real Prometheus (``tests/prometheus_support/server.py``) is used for everything it
can do; this one only plays what a real server cannot be made to do on demand: garbage,
a body cut off mid-JSON, a hang, a 503 burst.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

# A reply: (HTTP status, body bytes) or a callable producing it from the request form.
Reply = tuple[int, bytes]
Responder = Callable[[str, dict[str, str], dict[str, str]], Reply]


@dataclass
class Request:
    """One request the fake received."""

    path: str
    form: dict[str, str]
    headers: dict[str, str]


@dataclass
class FakePrometheus:
    """A local server answering what the test scripts, one responder per request."""

    responders: list[Responder] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    default: Responder | None = None
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakePrometheus:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                headers = {k.lower(): v for k, v in self.headers.items()}
                fake.requests.append(Request(self.path, form, headers))
                responder = fake.responders.pop(0) if fake.responders else fake.default
                assert responder is not None, f"unexpected request {self.path} {form}"
                try:
                    status, body = responder(self.path, form, headers)
                except (BrokenPipeError, ConnectionResetError):
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def reply(status: int, payload: Any) -> Responder:
    """Always answer ``payload`` as JSON with ``status``."""
    body = json.dumps(payload).encode()
    return lambda path, form, headers: (status, body)


def raw(status: int, body: bytes) -> Responder:
    """Always answer these exact bytes."""
    return lambda path, form, headers: (status, body)


def hang(seconds: float) -> Responder:
    """Answer an empty success only after ``seconds`` (longer than the client waits)."""

    def respond(path: str, form: dict[str, str], headers: dict[str, str]) -> Reply:
        time.sleep(seconds)
        return 200, json.dumps(matrix([])).encode()

    return respond


def matrix(result: list[dict[str, Any]]) -> dict[str, Any]:
    """A successful range-query answer."""
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def grid_responder(
    series: dict[tuple[str, str, str], Callable[[float], float | None]],
    *,
    max_points: int = 11_000,
) -> Responder:
    """Answer range queries with ``series`` evaluated on the asked grid, as Prometheus
    does, including its 11,000-points-per-series refusal."""

    def respond(path: str, form: dict[str, str], headers: dict[str, str]) -> Reply:
        start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
        points = int((end - start) / step) + 1
        if points > max_points:
            error = {
                "status": "error",
                "errorType": "bad_data",
                "error": "exceeded maximum resolution of 11,000 points per timeseries. "
                "Try decreasing the query resolution (?step=XX)",
            }
            return 400, json.dumps(error).encode()
        result = []
        for (namespace, pod, container), value_at in series.items():
            values = []
            for i in range(points):
                t = start + i * step
                value = value_at(t)
                if value is not None:
                    values.append([t, repr(float(value))])
            if values:
                metric = {"namespace": namespace, "pod": pod, "container": container}
                result.append({"metric": metric, "values": values})
        return 200, json.dumps(matrix(result)).encode()

    return respond


def samples_responder(
    series: dict[tuple[str, str, str], Callable[[float], float | None]],
    *,
    scrape_s: float = 60.0,
) -> Responder:
    """Answer range-vector instant queries (``metric{...}[Nms]`` at ``time``) with the
    samples ``series`` has at the scrape times (multiples of ``scrape_s``) in
    ``[time - N ms, time]``, as Prometheus 2.x does; None = no sample then."""

    def respond(path: str, form: dict[str, str], headers: dict[str, str]) -> Reply:
        found = re.search(r"\[(\d+)ms\]$", form["query"])
        assert path.endswith("/query") and found, f"not a samples query: {form}"
        end = float(form["time"])
        start = end - int(found.group(1)) / 1000
        first = -(-start // scrape_s) * scrape_s
        result = []
        for (namespace, pod, container), value_at in series.items():
            values = []
            t = first
            while t <= end:
                value = value_at(t)
                if value is not None:
                    values.append([t, repr(float(value))])
                t += scrape_s
            if values:
                metric = {"namespace": namespace, "pod": pod, "container": container}
                result.append({"metric": metric, "values": values})
        return 200, json.dumps(matrix(result)).encode()

    return respond

"""The AdmissionReview endpoint: HTTPS, fail-open, a hard deadline."""
# ``WebhookApp.handle`` answers one HTTP request:
#
# - ``POST /mutate`` (the first cluster served) or ``POST /mutate/<cluster>``: an
#   AdmissionReview in, the reply out (``services/admission/review.py``). The clusters
#   served are fixed when the server starts (``manage.py webhook serve --cluster``); any
#   other name is a 404 that changes nothing. The API server appends ``?timeout=5s``; it
#   is ignored. The decision runs in a worker thread and the reply is sent within
#   ``VPAWEB_WEBHOOK_DEADLINE_S`` whatever happens: past it, or on any exception, the
#   pod is allowed unchanged (failed open, counted and logged).
# - A body that is not an AdmissionReview (not JSON, wrong apiVersion or kind, no uid,
#   over 5 MiB, nested deeper than ``VPAWEB_API_MAX_DEPTH``, not application/json) gets
#   400 with vpaweb's error shape and no traceback in the log; the API server's
#   ``failurePolicy: Ignore`` then admits the pod.
# - ``GET /healthz`` (liveness): 200 unless a cache served has not loaded for longer
#   than ``VPAWEB_WEBHOOK_MAX_SNAPSHOT_AGE_S`` (the background thread stuck, or unable
#   to reach the database): then 503, and the kubelet restarts the process.
# - ``GET /readyz`` (readiness): 200 when the cache of every cluster served is loaded
#   and younger than ``VPAWEB_WEBHOOK_MAX_SNAPSHOT_AGE_S`` (an older one is not used),
#   else 503; each cache says how far it has loaded the journal (the acknowledgement
#   the updater waits for, ``services/readmodels/webhook_acks.py``).
# - ``GET /metrics``: this process's counters (``vpaweb_webhook_*`` of recommender/
#   metrics.py, incremented by ``counters.count``) for ``Authorization: Bearer
#   $VPAWEB_METRICS_TOKEN``, the web's rule: 404 without a token set, 401 without it.
#
# ``serve_webhook`` runs it over TLS (1.2 or newer) from certificate and key files,
# reloaded when they change (cert-manager rotates them in place), with HTTP/1.1
# keep-alive as kube-apiserver uses it. A background thread reloads the cache
# (``snapshot.py``: only the workloads that changed, in paced steps, swapped in whole)
# and flushes the decision counters.

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import ssl
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socket import IPPROTO_TCP, SHUT_WR, TCP_NODELAY, socket
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from recommender import metrics
from recommender.services.admission import counters
from recommender.services.admission.decision import FAILED_OPEN, AdmissionDecision
from recommender.services.admission.review import (
    MAX_BODY_BYTES,
    Answered,
    MalformedReview,
    admit_review,
    parse_review,
    record_decision,
    review_response,
)
from recommender.services.admission.snapshot import SnapshotHolder, holder_for
from recommender.services.readmodels import webhook_acks as acks
from recommender.webhook_connections import (
    PRESSURE_SHARE,
    SMALL_BODY_BYTES,
    SMALL_BODY_SHARE,
    WRITE_TIMEOUT_S,
    ByteBudget,
    ConnectionLimits,
    DeadlineReader,
    handshake,
    return_large_blocks_to_the_system,
)
from recommender.webhook_connections import drain as drain_body

logger = logging.getLogger(__name__)

MUTATE_PATH = "/mutate"
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
# How often the background thread looks for a new cache generation and flushes counts.
TICK_S = 1.0
FLUSH_EVERY_S = 5.0


@dataclass(frozen=True)
class Reply:
    """One HTTP answer."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def _json(status: int, payload: Mapping[str, Any]) -> Reply:
    return Reply(status, json.dumps(payload, separators=(",", ":")).encode())


def _error(status: int, code: str, message: str, field: str | None = None) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["fields"] = {field: [message]}
    return _json(status, {"error": error})


class WebhookApp:
    """The endpoint, independent of the HTTP server running it."""

    def __init__(
        self,
        *,
        default_cluster: str,
        deadline_s: float,
        clusters: Sequence[str] = (),
        workers: int = 8,
    ) -> None:
        self.default_cluster = default_cluster
        self.deadline_s = deadline_s
        self.started_at = timezone.now()
        self._pool = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="admission"
        )
        # Fixed for the life of the process: a request never adds a cluster.
        self._clusters = frozenset(clusters) | (
            {default_cluster} if default_cluster else frozenset()
        )

    def holders(self) -> list[SnapshotHolder]:
        """The caches of the clusters this endpoint serves."""
        return [holder_for(name) for name in sorted(self._clusters)]

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def handle(
        self,
        *,
        method: str,
        path: str,
        content_type: str,
        body: bytes | bytearray,
        authorization: str = "",
    ) -> Reply:
        """Answer one request (``body`` already read, at most MAX_BODY_BYTES + 1)."""
        route = urlsplit(path).path.rstrip("/") or "/"
        if route == HEALTH_PATH and method == "GET":
            return self._liveness()
        if route == READY_PATH and method == "GET":
            return self._readiness()
        if route == METRICS_PATH and method == "GET":
            return self._metrics(authorization)
        if route != MUTATE_PATH and not route.startswith(MUTATE_PATH + "/"):
            return _error(404, "not_found", f"no endpoint at {route}")
        if method != "POST":
            return _error(405, "method_not_allowed", f"{method} is not allowed here")
        started = time.perf_counter()
        try:
            return self._mutate(route, content_type=content_type, body=body)
        finally:
            metrics.WEBHOOK_LATENCY.labels(resource="pods").observe(
                time.perf_counter() - started
            )

    def _metrics(self, authorization: str) -> Reply:
        expected = settings.METRICS_TOKEN
        if not expected:
            return _error(404, "not_found", "/metrics is off: set VPAWEB_METRICS_TOKEN")
        if not metrics.token_matches(expected, {"Authorization": authorization}):
            reply = _error(401, "not_authenticated", "/metrics needs its bearer token")
            return Reply(
                reply.status,
                reply.body,
                headers=(("WWW-Authenticate", 'Bearer realm="metrics"'),),
            )
        body, content_type = metrics.exposition(with_database=False)
        return Reply(200, body, content_type)

    def _mutate(
        self, route: str, *, content_type: str, body: bytes | bytearray
    ) -> Reply:
        cluster = route[len(MUTATE_PATH) + 1 :] or self.default_cluster
        if not cluster:
            return _error(
                404,
                "not_found",
                "no cluster: use /mutate/<cluster> or set VPAWEB_WEBHOOK_CLUSTER",
            )
        if cluster not in self._clusters:
            # Nothing is counted or kept for a name the process does not serve.
            return _error(
                404, "not_found", f"cluster {cluster[:100]!r} is not served here"
            )
        try:
            parsed = parse_review(body, content_type=content_type)
        except MalformedReview as exc:
            # Not a decision: anyone reaching the port can send garbage, and the
            # counts of pods patched, left alone and failed open stay the pods'.
            logger.info("admission %s: malformed review: %s", cluster, exc)
            metrics.WEBHOOK_REFUSED.labels(reason="malformed").inc()
            return _error(400, "malformed", str(exc), exc.field)
        holder = holder_for(cluster)
        answered = Answered()
        future = self._pool.submit(
            admit_review, parsed, holder=holder, now=timezone.now(), answered=answered
        )
        try:
            reply, _ = future.result(timeout=self.deadline_s)
        except FutureTimeout:
            future.cancel()
            if not answered.claim():  # the decision won the race after all
                reply, _ = future.result()
                return _json(200, reply)
            record_decision(
                AdmissionDecision(
                    FAILED_OPEN,
                    f"no decision within the {self.deadline_s:g} s deadline",
                    namespace=str(parsed.request.get("namespace") or ""),
                    pod="?",
                ),
                cluster_name=cluster,
                dry_run=parsed.dry_run,
                at=timezone.now(),
            )
            reply = review_response(parsed.uid)
        return _json(200, reply)

    def _liveness(self) -> Reply:
        """200 unless a cache served has not loaded for longer than it may be used
        (``WEBHOOK_MAX_SNAPSHOT_AGE_S``, counted from the start when it never loaded):
        then the process cannot serve what operators decide and a restart loses
        nothing, so the kubelet should restart it."""
        now = timezone.now()
        limit_s = settings.WEBHOOK_MAX_SNAPSHOT_AGE_S
        lost = {}
        for holder in self.holders():
            snapshot = holder.current()
            since = self.started_at if snapshot is None else snapshot.loaded_at
            age_s = (now - since).total_seconds()
            if age_s > limit_s:
                lost[holder.cluster_name] = {
                    "loaded": snapshot is not None,
                    "unloaded_for_s": round(age_s, 1),
                    "last_error": holder.last_error,
                }
        if not lost:
            return _json(200, {"status": "ok"})
        return _json(
            503,
            {
                "status": "stale",
                "message": f"no cache loaded for over {limit_s:g} s: restart me",
                "caches": lost,
            },
        )

    def _readiness(self) -> Reply:
        now = timezone.now()
        caches = {}
        for holder in self.holders():
            snapshot = holder.current()
            loaded = holder.loaded()
            age_s = (
                None
                if snapshot is None
                else round((now - snapshot.loaded_at).total_seconds(), 1)
            )
            caches[holder.cluster_name] = {
                "loaded": snapshot is not None,
                "loaded_at": None
                if snapshot is None
                else snapshot.loaded_at.isoformat(),
                "age_s": age_s,
                "is_fresh": age_s is not None
                and age_s <= settings.WEBHOOK_MAX_SNAPSHOT_AGE_S,
                "last_error": holder.last_error,
                # What the updater waits for (webhook_acks.py): the journal loaded.
                "process": acks.PROCESS,
                "journal_loaded": None if loaded is None else loaded.after,
                "journal_holes": [] if loaded is None else list(loaded.holes),
            }
        ok = all(c["is_fresh"] for c in caches.values())
        status = (
            "ok"
            if ok
            else "stale"
            if all(c["loaded"] for c in caches.values())
            else "loading"
        )
        return _json(200 if ok else 503, {"status": status, "caches": caches})

    def tick(self) -> None:
        """Reload caches that are due (called by the background thread)."""
        for holder in self.holders():
            before = holder.current()
            holder.refresh_if_needed(paced=True)
            # The updater waits for this before evicting (webhook_acks.py).
            holder.acknowledge(now=timezone.now())
            after = holder.current()
            if after is not before and after is not None and after.reloaded is None:
                # A rebuilt cache leaves the cyclic collector's generations, as the
                # first one does at start: a full collection never walks it.
                gc.freeze()


class CertificateFiles:
    """A server TLS context from cert/key files, rebuilt when either file changes;
    with ``client_ca``, a client certificate is asked for and, when presented,
    verified against that CA (``is_client_verified``)."""

    def __init__(
        self,
        cert: Path,
        key: Path,
        *,
        client_ca: Path | None = None,
        check_every_s: float = 2.0,
    ) -> None:
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self.check_every_s = check_every_s
        self._stamp: tuple[float, ...] | None = None
        self._checked = 0.0
        self._context = self._load()

    def _mtimes(self) -> tuple[float, ...]:
        files = [self.cert, self.key] + ([self.client_ca] if self.client_ca else [])
        return tuple(path.stat().st_mtime for path in files)

    def _load(self) -> ssl.SSLContext:
        stamp = self._mtimes()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(certfile=str(self.cert), keyfile=str(self.key))
        if self.client_ca is not None:
            # Optional at the TLS layer: the kubelet's probes present no
            # certificate; a request that needs one is refused by the handler.
            context.verify_mode = ssl.CERT_OPTIONAL
            context.load_verify_locations(cafile=str(self.client_ca))
        self._stamp = stamp
        return context

    def context(self) -> ssl.SSLContext:
        """The current context, reloaded if the files changed (checked every 2 s)."""
        now = time.monotonic()
        if now - self._checked >= self.check_every_s:
            self._checked = now
            try:
                if self._mtimes() != self._stamp:
                    self._context = self._load()
                    logger.info("webhook TLS certificate reloaded from %s", self.cert)
            except (OSError, ssl.SSLError) as exc:
                logger.warning("webhook TLS certificate not reloaded: %s", exc)
        return self._context

    def is_client_verified(self, connection: ssl.SSLSocket) -> bool:
        """Whether the connection may post reviews: always without a client CA,
        else when it presented a certificate that CA signed."""
        return self.client_ca is None or bool(connection.getpeercert())


class _SocketWriter(io.BufferedIOBase):
    """The connection's output: every write sent whole (``sendall``)."""

    def __init__(self, sock: socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: WebhookServer
    request: ssl.SSLSocket

    def log_message(self, format: str, *args: Any) -> None:
        pass  # every decision is logged by the service

    def setup(self) -> None:
        self.connection = self.request
        self.connection.setsockopt(IPPROTO_TCP, TCP_NODELAY, True)
        self.reader = DeadlineReader(
            self.connection,
            read_deadline_s=self.server.limits.read_deadline_s,
            under_pressure=self.server.is_under_pressure,
        )
        self.rfile = io.BufferedReader(self.reader)
        self.wfile = _SocketWriter(self.connection)

    def handle_one_request(self) -> None:
        super().handle_one_request()
        if self.reader.timed_out:
            metrics.WEBHOOK_REFUSED.labels(reason="slow").inc()
        self.reader.idle()

    def _content_length(self) -> int | None:
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            return None
        return length if length >= 0 else None

    def handle_expect_100(self) -> bool:
        length = self._content_length()
        if length is not None and length > MAX_BODY_BYTES:
            self._refuse_too_large(length, drain=False)  # the body is not sent
            return False
        return super().handle_expect_100()

    def _answer(self) -> None:
        server = self.server
        length = self._content_length()
        if length is None:
            self._refuse(
                _error(
                    400,
                    "malformed",
                    f"Content-Length {self.headers.get('Content-Length')!r}: the body "
                    f"must be 0 to {MAX_BODY_BYTES} bytes",
                    "body",
                ),
                reason="malformed",
            )
        elif length > MAX_BODY_BYTES:
            self._refuse_too_large(length, drain=True)
        elif self.command != "GET" and not server.certs.is_client_verified(
            self.connection
        ):
            self._refuse(
                _error(
                    401,
                    "not_authenticated",
                    "this webhook admits reviews only from a client certificate "
                    "signed by its --client-ca",
                ),
                reason="unauthenticated",
                drain=length,
            )
        elif not server.buffered.reserve(
            length,
            # Waiting costs a thread and nothing else (the body stays in the
            # client); a client that keeps it waiting past the deadline is refused.
            timeout_s=self.reader.left_s(),
            keep_free=0
            if length <= SMALL_BODY_BYTES
            else int(server.buffered.limit * SMALL_BODY_SHARE),
        ):
            self._refuse_busy()
        else:
            with server.buffered.held(length):
                reply = self._read_and_handle(length)
            if reply is not None:
                self._send(reply)

    def _read_and_handle(self, length: int) -> Reply | None:
        """Read the body (into its reservation) and answer it; None when the client
        went away first."""
        body = bytearray(length)
        view = memoryview(body)
        got = 0
        while got < length:
            read = self.rfile.readinto(view[got:])
            if not read:
                self.close_connection = True
                return None
            got += read
        view.release()
        # Parsed, a body may take tens of times its size: one maximum body's worth
        # is parsed and decided at a time.
        server = self.server
        if not server.parsing.reserve(length, timeout_s=server.app.deadline_s):
            del body
            self._refuse_busy()
            return None
        with server.parsing.held(length):
            self.reader.deadline = None  # the decision has its own deadline
            return server.app.handle(
                method=self.command,
                path=self.path,
                content_type=self.headers.get("Content-Type") or "",
                body=body,
                authorization=self.headers.get("Authorization") or "",
            )

    def _refuse_too_large(self, length: int, *, drain: bool) -> None:
        self._refuse(
            _error(
                413,
                "too_large",
                f"the body is {length} bytes; at most {MAX_BODY_BYTES} are accepted",
                "body",
            ),
            reason="too_large",
            drain=length if drain else 0,
        )

    def _refuse_busy(self) -> None:
        # Not drained: reading the rest would add work when the server has too much.
        self._refuse(
            _error(
                503,
                "busy",
                "the webhook holds as many request bodies as it may; the API server "
                "admits the pod unchanged (failurePolicy Ignore)",
            ),
            reason="busy",
        )

    def _refuse(self, reply: Reply, *, reason: str, drain: int = 0) -> None:
        """Answer before (or instead of) reading the body, then close; with
        ``drain``, up to that much of the body is read and discarded first, so a
        client still sending it gets the answer, not a reset."""
        metrics.WEBHOOK_REFUSED.labels(reason=reason).inc()
        self._send(replace(reply, headers=(*reply.headers, ("Connection", "close"))))
        if drain:
            # The answer is whole; a client waiting for it sees the end at once,
            # one still sending is read until it is done (or the deadline).
            with contextlib.suppress(OSError):
                socket.shutdown(self.connection, SHUT_WR)
            drain_body(self.rfile, self.reader, drain)

    def _send(self, reply: Reply) -> None:
        self.connection.settimeout(WRITE_TIMEOUT_S)
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer


class WebhookServer(ThreadingHTTPServer):
    """A threading HTTPS server whose TLS context can change between connections,
    bounded by ``limits`` (``webhook_connections.py``)."""

    daemon_threads = True
    allow_reuse_address = True
    # Connections the kernel holds until accepted (socketserver's default is 5): a
    # burst past it waits a second for a retransmitted SYN.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        *,
        app: WebhookApp,
        certs: CertificateFiles,
        limits: ConnectionLimits,
        reuse_port: bool = False,
    ) -> None:
        self.app = app
        self.certs = certs
        self.limits = limits
        self.buffered = ByteBudget(limits.buffered_bytes)
        self.parsing = ByteBudget(limits.parsing_bytes)
        self.open_connections = 0
        self._open_lock = threading.Lock()
        # SO_REUSEPORT: several processes listen on one port, the kernel spreads the
        # connections over them (``webhook serve --processes``).
        self.allow_reuse_port = reuse_port
        super().__init__(address, _Handler)

    def is_under_pressure(self) -> bool:
        """Whether idle connections should give their slots back."""
        return self.open_connections >= PRESSURE_SHARE * self.limits.max_connections

    def get_request(self) -> tuple[socket, Any]:
        raw, address = self.socket.accept()
        # The handshake runs in the connection's own thread, not the accept loop.
        wrapped = self.certs.context().wrap_socket(
            raw, server_side=True, do_handshake_on_connect=False
        )
        return wrapped, address

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            is_full = self.open_connections >= self.limits.max_connections
            if not is_full:
                self.open_connections += 1
        if is_full:
            # Closed before the handshake: no thread, no TLS state.
            metrics.WEBHOOK_REFUSED.labels(reason="connections").inc()
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed_one()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed_one()

    def _closed_one(self) -> None:
        with self._open_lock:
            self.open_connections -= 1

    def finish_request(self, request: Any, client_address: Any) -> None:
        deadline = time.monotonic() + self.limits.read_deadline_s
        if not handshake(request, deadline=deadline):
            if time.monotonic() >= deadline:
                metrics.WEBHOOK_REFUSED.labels(reason="slow").inc()
            logger.debug("TLS handshake with %s failed or was too slow", client_address)
            return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("connection from %s ended with an error", client_address)


def connection_limits() -> ConnectionLimits:
    """The bounds of the server's connections the settings give."""
    return ConnectionLimits(
        max_connections=settings.WEBHOOK_MAX_CONNECTIONS,
        buffered_bytes=settings.WEBHOOK_MAX_BUFFERED_MIB * 1024 * 1024,
        parsing_bytes=MAX_BODY_BYTES,
        read_deadline_s=settings.WEBHOOK_READ_DEADLINE_S,
    )


def run_background(app: WebhookApp, stop: threading.Event) -> threading.Thread:
    """Reload caches and flush counters until ``stop`` is set (a daemon thread)."""

    def loop() -> None:
        last_flush = time.monotonic()
        while not stop.is_set():
            try:
                # This thread's connection lives as long as the process: one broken
                # by a database restart (or past CONN_MAX_AGE) is closed here, and
                # the next query opens a new one.
                close_old_connections()
                app.tick()
                if time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    counters.flush_counts()
                    last_flush = time.monotonic()
            except Exception:
                logger.warning("webhook background work failed", exc_info=True)
            stop.wait(TICK_S)
        counters.flush_counts()

    thread = threading.Thread(target=loop, name="webhook-background", daemon=True)
    thread.start()
    return thread


def start_webhook_server(
    *,
    host: str,
    port: int,
    cert: Path,
    key: Path,
    default_cluster: str,
    deadline_s: float,
    clusters: Sequence[str] = (),
    reuse_port: bool = False,
    client_ca: Path | None = None,
    limits: ConnectionLimits | None = None,
) -> tuple[WebhookServer, threading.Event, list[threading.Thread]]:
    """Start serving in daemon threads; returns the server, a stop event, the threads.

    ``/mutate`` answers for ``default_cluster``, ``/mutate/<name>`` for it and each of
    ``clusters``. Their caches are loaded before the first request is accepted. With
    ``reuse_port``, other processes may listen on the same port (SO_REUSEPORT). With
    ``client_ca``, reviews are taken only from clients presenting a certificate it
    signed. ``limits``: the settings' (``connection_limits``) unless given.
    """
    app = WebhookApp(
        default_cluster=default_cluster, deadline_s=deadline_s, clusters=clusters
    )
    app.tick()
    # The cache and Django's modules are long-lived: move them out of the cyclic
    # garbage collector's generations, so a full collection (tens of ms with a
    # 10,000-workload cache) never lands on a request. Reloads free the old cache by
    # reference counting (it holds no cycles).
    gc.freeze()
    # Requests are short and wait on the GIL behind each other: hand it over every
    # millisecond instead of every 5 ms, so a queued request is not held behind one
    # that is parsing a body.
    sys.setswitchinterval(0.001)
    return_large_blocks_to_the_system()
    server = WebhookServer(
        (host, port),
        app=app,
        certs=CertificateFiles(cert, key, client_ca=client_ca),
        limits=limits or connection_limits(),
        reuse_port=reuse_port,
    )
    stop = threading.Event()
    threads = [
        run_background(app, stop),
        threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="webhook-https",
            daemon=True,
        ),
    ]
    threads[1].start()
    logger.info(
        "admission webhook serving https://%s:%d%s (cluster %s, deadline %g s)",
        host,
        server.server_address[1],
        MUTATE_PATH,
        default_cluster or "from the path",
        deadline_s,
    )
    return server, stop, threads


def stop_webhook_server(
    server: WebhookServer, stop: threading.Event, threads: list[threading.Thread]
) -> None:
    """Stop serving, flush the counters, free the port."""
    stop.set()
    server.shutdown()
    server.server_close()
    server.app.close()
    for thread in threads:
        thread.join(timeout=5)

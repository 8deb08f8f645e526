"""The webhook over real HTTPS (a test CA), replaying kube-apiserver's recorded reviews,
and every way it fails open; registration against the fake API server."""

from __future__ import annotations

import base64
import http.client
import json
import os
import select
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from django.core.management import CommandError, call_command

from recommender.models import AdmissionCount, Cluster
from recommender.services.admission import counters, decision, review
from recommender.services.admission.certs import create_certificates
from recommender.services.admission.decision import FAILED_OPEN, PATCHED
from recommender.services.admission.snapshot import forget_holders
from recommender.webhook import start_webhook_server, stop_webhook_server
from recommender.webhook_connections import ConnectionLimits
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.services.test_admission import MI, recorded, workload_with

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def certs(tmp_path: Path):
    return create_certificates(
        directory=tmp_path / "certs",
        dns_names=["localhost"],
        ip_addresses=["127.0.0.1"],
    )


@pytest.fixture
def served(certs, settings) -> Iterator[Any]:
    forget_holders()
    counters.flush_counts()
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload_with(
        cluster, "hooked", "wire-hook", {"app": (250, 300 * MI), "side": (20, 32 * MI)}
    )
    server, stop, threads = start_webhook_server(
        host="127.0.0.1",
        port=0,
        cert=certs.cert,
        key=certs.key,
        default_cluster="wire",
        deadline_s=0.3,
    )
    yield server
    stop_webhook_server(server, stop, threads)


def client(server, certs, **context_options) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    for name, value in context_options.items():
        setattr(context, name, value)
    return http.client.HTTPSConnection(
        "localhost", server.server_address[1], context=context, timeout=5
    )


def post(
    conn, body: bytes, *, path="/mutate?timeout=5s", content_type="application/json"
):
    conn.request("POST", path, body=body, headers={"Content-Type": content_type})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def saved_counts() -> dict[str, int]:
    counters.flush_counts()
    return {row.outcome: row.count for row in AdmissionCount.objects.all()}


def test_recorded_reviews_replayed_over_https(served, certs):
    conn = client(served, certs)
    for name in ("a-replicaset-pod", "b-bare-pod", "c-statefulset-pod", "e-dryrun-pod"):
        body = recorded(name)
        status, answer = post(
            conn, json.dumps(body).encode()
        )  # one keep-alive connection
        assert status == 200
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["kind"] == "AdmissionReview"
        assert answer["response"]["uid"] == body["request"]["uid"]
        assert answer["response"]["allowed"] is True
        if name == "a-replicaset-pod":
            assert answer["response"]["patchType"] == "JSONPatch"
            patch = json.loads(base64.b64decode(answer["response"]["patch"]))
            pod = jsonpatch.apply_patch(body["request"]["object"], patch)
            assert (
                pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "250m"
            )
        else:
            assert (
                "patch" not in answer["response"]
                and "patchType" not in answer["response"]
            )
    assert saved_counts() == {
        "patched": 1,
        "left_alone": 2,
    }  # the dry run is not counted


@pytest.mark.parametrize(
    ("body", "content_type", "field"),
    [
        (b"{not json", "application/json", "body"),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}
            ).encode(),
            "application/json",
            "apiVersion",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}).encode(),
            "application/json",
            "kind",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {},
                }
            ).encode(),
            "application/json",
            "request.uid",
        ),
        (b"[]", "application/json", "body"),
        (b"{}", "text/plain", "Content-Type"),
    ],
)
def test_malformed_reviews_get_a_clear_400_without_traceback(
    served, certs, caplog, body, content_type, field
):
    status, answer = post(client(served, certs), body, content_type=content_type)
    assert status == 400
    assert answer["error"]["code"] == "malformed"
    assert field in answer["error"]["fields"]
    assert not any(r.exc_info for r in caplog.records)
    # Not a pod's decision: garbage anyone can post does not count as failing open.
    assert saved_counts() == {}


def test_body_over_5_mib_is_refused_before_it_is_read(served, certs):
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    with (
        socket.create_connection(
            ("127.0.0.1", served.server_address[1]), timeout=5
        ) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n{" % (review.MAX_BODY_BYTES + 1)
        )
        answer = b""
        while chunk := tls.recv(65536):  # the server closes the connection
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"Connection: close" in head
    error = json.loads(body)["error"]
    assert error["code"] == "too_large"
    assert error["message"] == "the body is 5242881 bytes; at most 5242880 are accepted"
    assert error["fields"] == {"body": [error["message"]]}


def _ends(sock: socket.socket, *, within_s: float) -> bool:
    """Whether the server answers or ends the connection within ``within_s``."""
    ends_at = time.monotonic() + within_s
    while (left_s := ends_at - time.monotonic()) > 0:
        if not select.select([sock], [], [], left_s)[0]:
            return False
        sock.settimeout(0.05)
        try:
            sock.recv(65536)
        except TimeoutError:
            continue  # a TLS record without data (a TLS 1.3 session ticket)
        except OSError:
            return True
        finally:
            sock.settimeout(5)
        return True
    return False


def _wait_for(condition, *, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "the webhook server never got there"
        time.sleep(0.01)


def test_slow_clients_connections_past_the_cap_and_large_bodies_are_bounded(
    certs, settings
):
    forget_holders()
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    limits = ConnectionLimits(
        max_connections=6,
        buffered_bytes=8 * 2**20,  # one 5 MiB body, and 2 MiB kept for small ones
        parsing_bytes=review.MAX_BODY_BYTES,
        read_deadline_s=2.0,
    )
    server, stop, threads = start_webhook_server(
        host="127.0.0.1",
        port=0,
        cert=certs.cert,
        key=certs.key,
        default_cluster="wire",
        deadline_s=0.3,
        limits=limits,
    )
    port = server.server_address[1]
    context = ssl.create_default_context(cafile=str(certs.ca_cert))

    def tls() -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        return context.wrap_socket(raw, server_hostname="localhost")

    large_head = (
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % review.MAX_BODY_BYTES
    )
    body = json.dumps(recorded("a-replicaset-pod")).encode()
    try:
        # A head sent a line at a time is dropped at the deadline, not after minutes.
        with tls() as slow:
            slow.sendall(b"POST /mutate HTTP/1.1\r\n")
            assert not _ends(slow, within_s=1.0)
            slow.sendall(b"Host: x\r\n")
            assert _ends(slow, within_s=2.5)
        # One large body takes the large share of the budget; a second one, whose
        # deadline comes first, waits for it until then and gets 503; a pod's review
        # is answered meanwhile.
        with tls() as second:
            time.sleep(0.6)
            with tls() as first:
                first.sendall(large_head + b" " * 65536)
                time.sleep(0.2)
                second.sendall(large_head)
                status, answer = post(client(server, certs), body)
                assert status == 200 and "patch" in answer["response"]
                assert second.recv(65536).startswith(b"HTTP/1.1 503")
        # Past the cap (6), a connection is closed at accept. The connections above
        # give their slots back first, and the six held ones are counted before the
        # seventh arrives (a loaded machine runs the server's threads late).
        _wait_for(lambda: server.open_connections == 0)
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(6)]
        try:
            _wait_for(lambda: server.open_connections == 6)
            with socket.create_connection(("127.0.0.1", port)) as extra:
                assert _ends(extra, within_s=0.5)
        finally:
            for sock in held:
                sock.close()
        assert server.buffered.peak <= limits.buffered_bytes
    finally:
        stop_webhook_server(server, stop, threads)


def test_a_slow_decision_is_answered_unchanged_within_the_deadline(
    served, certs, monkeypatch
):
    def slow(**kwargs):
        time.sleep(2)
        raise AssertionError("unreachable in time")

    monkeypatch.setattr(review, "decide_admission", slow)
    body = recorded("a-replicaset-pod")
    started = time.monotonic()
    status, answer = post(client(served, certs), json.dumps(body).encode())
    assert time.monotonic() - started < 1.5
    assert status == 200
    assert answer["response"] == {"uid": body["request"]["uid"], "allowed": True}
    assert saved_counts() == {"failed_open": 1}
    time.sleep(2.2)  # the late decision finishes (and crashes): not counted twice
    assert saved_counts() == {"failed_open": 1}


def test_an_exception_admits_the_pod_unchanged_and_is_counted(
    served, certs, monkeypatch
):
    def broken(**kwargs):
        raise RuntimeError("database exploded")

    monkeypatch.setattr(review, "decide_admission", broken)
    body = recorded("a-replicaset-pod")
    status, answer = post(client(served, certs), json.dumps(body).encode())
    assert (status, answer["response"]) == (
        200,
        {"uid": body["request"]["uid"], "allowed": True},
    )
    assert saved_counts() == {FAILED_OPEN: 1}


def test_database_down_keeps_serving_from_the_cache(served, certs, monkeypatch):
    holder = served.app.holders()[0]

    def down(**kwargs):
        raise ConnectionError("database unreachable")

    monkeypatch.setattr("recommender.services.admission.snapshot.load_snapshot", down)
    holder.invalidate()
    holder.refresh_if_needed()
    assert "database unreachable" in holder.last_error
    _status, answer = post(
        client(served, certs), json.dumps(recorded("a-replicaset-pod")).encode()
    )
    assert "patch" in answer["response"]  # the previous snapshot still answers
    assert saved_counts() == {PATCHED: 1}


def test_tls_1_2_is_the_minimum(served, certs):
    assert served.certs.context().minimum_version == ssl.TLSVersion.TLSv1_2
    conn = client(served, certs, maximum_version=ssl.TLSVersion.TLSv1_2)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    assert conn.sock.version() == "TLSv1.2"


def get(conn, path: str) -> tuple[int, dict[str, Any]]:
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_unknown_clusters_and_deep_bodies_leave_the_webhook_healthy(served, certs):
    conn = client(served, certs)
    body = json.dumps(recorded("a-replicaset-pod")).encode()
    for name in ("ghost-1", "ghost-2", "ghost-3"):
        status, answer = post(conn, body, path=f"/mutate/{name}?timeout=5s")
        assert status == 404
        assert answer["error"]["code"] == "not_found"
        assert name in answer["error"]["message"]
    deep = b'{"a":' * 3000 + b"1" + b"}" * 3000
    status, answer = post(conn, deep)
    assert status == 400
    assert answer["error"]["fields"] == {"body": [answer["error"]["message"]]}
    served.app.tick()  # what the background thread does every second
    assert [h.cluster_name for h in served.app.holders()] == ["wire"]
    assert get(conn, "/healthz")[0] == 200
    status, ready = get(conn, "/readyz")
    assert (status, list(ready["caches"])) == (200, ["wire"])
    assert saved_counts() == {}  # neither the deep body nor a ghost
    status, answer = post(conn, body, path="/mutate/wire")
    assert (status, "patch" in answer["response"]) == (200, True)


def test_a_cache_too_old_to_use_fails_readiness_and_liveness(served, certs, settings):
    conn = client(served, certs)
    assert get(conn, "/readyz")[0] == 200
    assert get(conn, "/healthz") == (200, {"status": "ok"})
    settings.WEBHOOK_MAX_SNAPSHOT_AGE_S = -1.0  # every cache is now too old to use
    status, ready = get(conn, "/readyz")
    assert (status, ready["status"]) == (503, "stale")
    assert ready["caches"]["wire"]["is_fresh"] is False
    # No cache loaded for longer than one may be used: a restart loses nothing.
    status, health = get(conn, "/healthz")
    assert (status, health["status"]) == (503, "stale")
    assert health["caches"]["wire"]["loaded"] is True


def test_serve_refuses_a_cluster_that_is_not_registered(certs):
    with pytest.raises(CommandError, match="no such cluster: nowhere"):
        call_command(
            "webhook",
            "serve",
            f"--cert={certs.cert}",
            f"--key={certs.key}",
            "--cluster=nowhere",
        )


def test_readyz_and_certificate_reload(served, certs, tmp_path):
    conn = client(served, certs)
    conn.request("GET", "/readyz")
    response = conn.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["caches"]["wire"]["loaded"] is True
    first = conn.sock.getpeercert()["serialNumber"]
    renewed = create_certificates(directory=tmp_path / "new", dns_names=["localhost"])
    certs.cert.write_bytes(renewed.cert.read_bytes())
    certs.key.write_bytes(renewed.key.read_bytes())
    later = time.time() + 10
    os.utime(certs.cert, (later, later))
    served.certs._checked = 0.0  # do not wait the 2 s between checks
    fresh = client(served, renewed)  # only the new CA trusts the new certificate
    fresh.request("GET", "/healthz")
    assert fresh.getresponse().status == 200
    assert fresh.sock.getpeercert()["serialNumber"] != first


def test_install_and_uninstall_against_the_fake_api_server(tmp_path, certs, capsys):
    api = FakeApiServer().start()
    try:
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", {"fake": api}, current="fake"
        )
        # Registering is a write: an admin allowed this cluster's actuation.
        Cluster.objects.create(
            name="prod", kind="kubernetes", context="fake", actuation_allowed=True
        )
        common = ["--cluster", "prod", "--kubeconfig", str(kubeconfig)]
        call_command(
            "webhook",
            "install",
            "--service",
            "vpaweb/vpaweb-webhook",
            "--ca-bundle",
            str(certs.ca_cert),
            "--timeout",
            "4",
            *common,
        )
        stored = api.webhook_configurations.items["vpaweb-webhook"]
        hook = stored["webhooks"][0]
        assert hook["admissionReviewVersions"] == ["v1"]
        assert (hook["sideEffects"], hook["failurePolicy"], hook["timeoutSeconds"]) == (
            "None",
            "Ignore",
            4,
        )
        assert hook["clientConfig"]["service"] == {
            "namespace": "vpaweb",
            "name": "vpaweb-webhook",
            "path": "/mutate/prod",
            "port": 443,
        }
        assert (
            base64.b64decode(hook["clientConfig"]["caBundle"])
            == certs.ca_cert.read_bytes()
        )
        names = hook["namespaceSelector"]["matchExpressions"][0]
        assert names == {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "vpaweb"],
        }
        opt_out = {
            "key": "vpaweb.io/webhook",
            "operator": "NotIn",
            "values": ["disabled"],
        }
        assert opt_out in hook["namespaceSelector"]["matchExpressions"]
        assert hook["objectSelector"] == {"matchExpressions": [opt_out]}
        assert hook["rules"] == [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ]
        assert stored["metadata"]["generation"] == 1
        # Installing again updates in place (GET, then PUT at its resourceVersion).
        call_command(
            "webhook", "install", "--url", "https://hooks.example:8443", *common
        )
        updated = api.webhook_configurations.items["vpaweb-webhook"]
        assert updated["metadata"]["generation"] == 2
        assert updated["webhooks"][0]["clientConfig"] == {
            "url": "https://hooks.example:8443/mutate/prod"
        }
        methods = [(r.method, r.path.rsplit("/", 1)[-1]) for r in api.write_verbs()]
        assert methods == [
            ("POST", "mutatingwebhookconfigurations"),
            ("PUT", "vpaweb-webhook"),
        ]
        call_command("webhook", "uninstall", *common)
        assert api.webhook_configurations.items == {}
        call_command("webhook", "uninstall", *common)  # already gone: fine
    finally:
        api.stop()


def test_install_print_with_cert_manager_annotation(capsys):
    call_command(
        "webhook",
        "install",
        "--cluster",
        "prod",
        "--service",
        "vpaweb/vpaweb-webhook",
        "--cert-manager",
        "vpaweb/vpaweb-webhook",
        "--print",
    )
    body = json.loads(capsys.readouterr().out)
    assert body["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "vpaweb/vpaweb-webhook"
    }
    assert "caBundle" not in body["webhooks"][0]["clientConfig"]
    assert body["webhooks"][0]["timeoutSeconds"] == 3  # VPAWEB_WEBHOOK_TIMEOUT_S


def test_install_refuses_a_timeout_above_5_seconds(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="timeoutSeconds must be 1 to 5"):
        call_command(
            "webhook",
            "install",
            "--cluster",
            "x",
            "--url",
            "https://h",
            "--timeout",
            "10",
            "--print",
        )


def test_decision_module_has_no_database_access():
    # The hot path reads the snapshot only: no ORM import in the decision or patch.
    for module in (decision,):
        source = Path(module.__file__).read_text()
        assert "recommender.models" not in source and ".objects" not in source


def test_certs_command_writes_a_ca_and_a_serving_certificate_for_the_service(
    tmp_path, capsys
):
    from cryptography import x509

    call_command("webhook", "certs", "--out", str(tmp_path), "--service", "vpaweb/hook")
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert "hook.vpaweb.svc" in names.value.get_values_for_type(x509.DNSName)
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0  # private to its owner
    assert not (tmp_path / "ca.key").exists()


def test_with_a_client_ca_only_the_api_servers_certificate_may_post_reviews(
    tmp_path, certs
):
    forget_holders()
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    call_command(
        "webhook", "certs", "--out", str(tmp_path), "--ip", "1.2.3.4", "--client", "kas"
    )
    # Another CA's client certificate: refused in the handshake.
    stranger = create_certificates(
        directory=tmp_path / "stranger", dns_names=["x"], client_name="kas"
    )
    server, stop, threads = start_webhook_server(
        host="127.0.0.1",
        port=0,
        cert=certs.cert,
        key=certs.key,
        default_cluster="wire",
        deadline_s=0.3,
        client_ca=tmp_path / "client-ca.crt",
    )
    body = json.dumps(recorded("a-replicaset-pod")).encode()
    try:
        status, answer = post(client(server, certs), body)
        assert (status, answer["error"]["code"]) == (401, "not_authenticated")
        conn = http.client.HTTPSConnection(
            "localhost",
            server.server_address[1],
            context=_with_client(certs, stranger.client_cert, stranger.client_key),
            timeout=5,
        )
        with pytest.raises((ssl.SSLError, ConnectionError)):
            post(conn, body)
        # The kubelet's probes present no certificate.
        assert get(client(server, certs), "/healthz")[0] == 200
        assert get(client(server, certs), "/readyz")[0] == 200
        conn = http.client.HTTPSConnection(
            "localhost",
            server.server_address[1],
            context=_with_client(
                certs, tmp_path / "client.crt", tmp_path / "client.key"
            ),
            timeout=5,
        )
        status, answer = post(conn, body)
        assert status == 200 and "patch" in answer["response"]
    finally:
        stop_webhook_server(server, stop, threads)
    assert saved_counts() == {PATCHED: 1}  # the refused post is not a decision


def _with_client(certs, cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    context.load_cert_chain(str(cert), str(key))
    return context


def _scrape(server, certs, token: str | None) -> tuple[int, dict[str, str], str]:
    conn = client(server, certs)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    conn.request("GET", "/metrics", headers=headers)
    response = conn.getresponse()
    return response.status, dict(response.getheaders()), response.read().decode()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_webhook_metrics_count_each_decision_and_need_the_token(
    served, certs, settings
):
    settings.METRICS_TOKEN = "hook-metrics-token"
    assert _scrape(served, certs, None)[0] == 401
    status, headers, _text = _scrape(served, certs, "wrong")
    assert (status, headers["WWW-Authenticate"]) == (401, 'Bearer realm="metrics"')
    status, _headers, text = _scrape(served, certs, "hook-metrics-token")
    assert status == 200
    before = _samples(text)

    conn = client(served, certs)
    _status, patched = post(conn, json.dumps(recorded("a-replicaset-pod")).encode())
    operations = len(json.loads(base64.b64decode(patched["response"]["patch"])))
    post(conn, json.dumps(recorded("b-bare-pod")).encode())
    post(conn, json.dumps(recorded("e-dryrun-pod")).encode())  # not counted
    post(conn, b"{not json")
    after = _samples(_scrape(served, certs, "hook-metrics-token")[2])

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    requests = "vpaweb_webhook_requests_total"
    assert delta(requests, resource="pods", outcome=PATCHED) == 1
    assert delta(requests, resource="pods", outcome="left_alone") == 1
    assert delta(requests, resource="pods", outcome=FAILED_OPEN) == 0
    assert operations > 0
    assert delta("vpaweb_webhook_patches_total", resource="pods") == operations
    # The garbage body is refused, not a pod failing open.
    assert delta("vpaweb_webhook_refused_total", reason="malformed") == 1
    latency = "vpaweb_webhook_request_duration_seconds_count"
    assert delta(latency, resource="pods") == 4  # every POST /mutate, dry run too
    assert saved_counts() == {PATCHED: 1, "left_alone": 1}

    settings.METRICS_TOKEN = ""
    assert _scrape(served, certs, "hook-metrics-token")[0] == 404


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("no decision within the 0.3 s deadline", "deadline"),
        ("internal error: RuntimeError", "internal_error"),
        ("the admission cache is not loaded yet", "cache"),
        ("ns/web: the patch would break the namespace's LimitRange (x)", "limit_range"),
        ("something new", "other"),
    ],
)
def test_fail_open_reasons_map_to_a_fixed_label_set(reason, kind):
    assert counters.fail_open_reason(reason) == kind
    assert kind in counters.FAIL_OPEN_REASONS


@pytest.mark.integration
def test_serve_with_two_processes_shares_the_port_and_stops_both(certs, tmp_path):
    """``webhook serve --processes 2``: two processes listen on one port
    (SO_REUSEPORT), every connection is answered, and SIGTERM to the parent stops
    both."""
    import signal
    import subprocess
    import sys

    from django.db import connection

    from tests.conftest import service_missing

    if connection.vendor != "postgresql":
        service_missing("PostgreSQL (DATABASE_URL): the server processes share it")
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
    }
    root = Path(__file__).resolve().parents[1]
    parent = subprocess.Popen(
        [
            *(sys.executable, "manage.py", "webhook", "serve", "--host", "127.0.0.1"),
            *("--port", str(port), "--processes", "2", "--cluster", "wire"),
            *("--cert", str(certs.cert), "--key", str(certs.key)),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        children_file = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
                children = children_file.read_text().split()
                if children and len(listening(port)) == 2:
                    break
            except OSError:
                pass
            assert parent.poll() is None, parent.stdout.read().decode()
            assert time.monotonic() < deadline, "the servers did not start"
            time.sleep(0.2)
        (child,) = children
        body = json.dumps(recorded("a-replicaset-pod")).encode()
        for _ in range(20):  # new connections: the kernel spreads them
            conn = http.client.HTTPSConnection(
                "localhost",
                port,
                context=ssl.create_default_context(cafile=str(certs.ca_cert)),
                timeout=10,
            )
            status, answer = post(conn, body)
            conn.close()
            assert status == 200 and answer["response"]["allowed"] is True
    finally:
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
    assert parent.returncode == 0
    assert (
        not Path(f"/proc/{child}").exists()
        or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    )


def listening(port: int) -> list[str]:
    """The listening TCP sockets on ``port`` (from /proc/net/tcp)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return [
        row
        for row in rows
        if int(row.split()[1].split(":")[1], 16) == port and row.split()[3] == "0A"
    ]

"""Checks the compose stack's admission webhook from inside it (make test-deploy).

Runs in a stack container (the web's: the standard library only), which reaches the
webhook over the compose network:

    docker-compose exec -T web python3 -c "$(cat check_webhook.py)" \
        HOST CA_PEM METRICS_TOKEN < a-replicaset-pod.admissionreview.json"""
# stdin is a recording of tests/fixtures/k8s-wire/admission/ (kube-apiserver v1.36's own
# AdmissionReview, in ``body``). It is POSTed to https://HOST:8443/mutate, trusting only
# the webhook's CA (its ``ca.crt``) and checking the name HOST, and the answer must be
# an ``admission.k8s.io/v1`` AdmissionReview echoing the request's uid with ``allowed:
# true`` (and a valid base64 JSONPatch if it patches). Then ``/metrics`` must refuse a
# request without the bearer token and, with it, count that request. Exits non-zero
# naming the first failed check.

from __future__ import annotations

import base64
import http.client
import json
import re
import ssl
import sys

PORT = 8443


def fail(message: str) -> None:
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def request(
    host: str, context: ssl.SSLContext, method: str, path: str, **kwargs: object
) -> tuple[int, bytes]:
    conn = http.client.HTTPSConnection(host, PORT, context=context, timeout=15)
    try:
        conn.request(method, path, **kwargs)  # type: ignore[arg-type]
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def main() -> None:
    host, ca_pem, token = sys.argv[1:4]
    review = json.load(sys.stdin)["body"]
    uid = review["request"]["uid"]
    context = ssl.create_default_context(cadata=ca_pem)  # verifies HOST as well

    status, raw = request(
        host,
        context,
        "POST",
        "/mutate?timeout=5s",
        body=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
    )
    if status != 200:
        fail(f"POST /mutate answered {status}: {raw[:300]!r}")
    answer = json.loads(raw)
    if (answer.get("apiVersion"), answer.get("kind")) != (
        "admission.k8s.io/v1",
        "AdmissionReview",
    ):
        fail(f"not an AdmissionReview v1: {answer}")
    response = answer.get("response") or {}
    if response.get("uid") != uid:
        fail(f"uid {response.get('uid')!r} is not the request's {uid!r}")
    if response.get("allowed") is not True:
        fail(f"allowed is {response.get('allowed')!r}, not true")
    if "patch" in response:
        if response.get("patchType") != "JSONPatch":
            fail(f"a patch with patchType {response.get('patchType')!r}")
        operations = json.loads(base64.b64decode(response["patch"]))
        what = f"patched ({len(operations)} operations)"
    else:
        what = "unchanged"
    print(f"webhook: AdmissionReview {uid} answered allowed, {what}, over TLS")

    status, _ = request(host, context, "GET", "/metrics")
    if status != 401:
        fail(f"the webhook's /metrics without the token answered {status}, not 401")
    status, raw = request(
        host,
        context,
        "GET",
        "/metrics",
        headers={"Authorization": f"Bearer {token}"},
    )
    text = raw.decode()
    counted = sum(
        float(value)
        for value in re.findall(
            r'^vpaweb_webhook_requests_total\{[^}]*resource="pods"[^}]*\} (\S+)$',
            text,
            re.M,
        )
    )
    latency = re.search(
        r'^vpaweb_webhook_request_duration_seconds_count\{resource="pods"\} (\S+)$',
        text,
        re.M,
    )
    if status != 200 or counted < 1 or latency is None or float(latency.group(1)) < 1:
        fail(f"the webhook's /metrics ({status}) does not count it:\n{text[-2000:]}")
    print(f"webhook /metrics: {counted:g} request(s) counted")
    print("webhook check passed")


if __name__ == "__main__":
    main()

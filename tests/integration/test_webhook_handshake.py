"""The updater evicts only once a separate `webhook serve` process has loaded the new
policy: 20 switches of a workload from Off to Recreate with automatic approval,
without Redis (the process reloads on its timer), and not one eviction repeated.

Per switch: the workload's two pods carry the old requests while it is Off; it is
switched to Recreate; updater cycles run back to back against the fake API server
(recorded shapes). Each eviction is followed at once by its replacement, admitted by
the webhook process as kube-apiserver would (the review posted to it, its patch
applied), so a process that has not loaded the switch admits the replacement with the
old requests, the change fails verification and the pod is evicted again. With the
handshake the updater waits ("waiting for the webhook to load the new policy") and
each pod is evicted once."""

from __future__ import annotations

import base64
import copy
import json
import time
from datetime import UTC, datetime

import jsonpatch
import pytest
from django.db import connection
from django.utils import timezone

from recommender.models import Container, Policy, ResizeChange
from recommender.services.actuation.cycle import run_cycle
from recommender.services.policy.changes import update_policy
from recommender.services.readmodels import webhook_acks as acks
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.faults.webhook_process import webhook_process
from tests.k8s_fake.actuation import deployment, fake_cluster, pod
from tests.services.test_admission import recorded
from tests.test_webhook import certs

__all__ = ["certs"]  # a fixture, for pytest

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MI = 2**20
SWITCHES = 20
RELOAD_S = 2
RS = "api-6b9c8d7f5"
OLD = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}
S = ResizeChange.Status


def review_for(name: str) -> bytes:
    """The AdmissionReview kube-apiserver sends for a new pod of the ReplicaSet
    (admission/a-replicaset-pod, its object made the fake's pod)."""
    review = copy.deepcopy(recorded("a-replicaset-pod"))
    template = pod(name, "shop", "api", RS, copy.deepcopy(OLD))
    obj = review["request"]["object"]
    obj["metadata"].update(
        generateName=f"{RS}-",
        namespace="shop",
        labels=template["metadata"]["labels"],
        ownerReferences=template["metadata"]["ownerReferences"],
    )
    obj["spec"]["containers"] = template["spec"]["containers"]
    obj["spec"].pop("initContainers", None)
    review["request"]["namespace"] = "shop"
    return json.dumps(review).encode()


def admitted(server, name: str) -> dict:
    """The replacement pod as the webhook process admitted it, running now."""
    status, reply = server.post(review_for(name))
    assert status == 200, reply
    obj = json.loads(review_for(name))["request"]["object"]
    patch = reply["response"].get("patch")
    if patch:
        obj = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(patch)))
    resources = obj["spec"]["containers"][0]["resources"]
    replacement = pod(name, "shop", "api", RS, resources)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    replacement["metadata"]["creationTimestamp"] = stamp
    replacement["status"]["startTime"] = stamp
    return replacement


def switch(workload, mode: str) -> None:
    update_policy(
        workload_id=workload.pk,
        changes={"mode": mode},
        actor=None,
        actor_label="handshake test",
        now=timezone.now(),
    )


def test_twenty_switches_without_redis_evict_each_pod_once(tmp_path, certs):
    if connection.vendor != "postgresql":
        pytest.skip("a separate webhook process needs the PostgreSQL test database")
    fake = fake_cluster(deployment("api", replicas=0), tmp_path)
    cluster = make_cluster(
        "fake", kind="kubernetes", context="fake", actuation_allowed=True
    )
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        mode="Off",
        replicas=2,
        containers={"app": {"request_cpu_millicores": 500}},
    )
    Policy.objects.filter(workload=workload).update(approval="automatic")
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=250,
        memory_bytes=300 * MI,
    )
    env = {"REDIS_URL": "", "VPAWEB_WEBHOOK_RELOAD_S": str(RELOAD_S)}
    evictions: list[str] = []
    waited = 0
    try:
        with webhook_process(
            cluster="fake",
            cert=certs.cert,
            key=certs.key,
            ca_cert=certs.ca_cert,
            env=env,
        ) as server:
            ready = server.get("/readyz")[1]["caches"]["fake"]
            assert ready["journal_loaded"] is not None, ready
            for round_ in range(SWITCHES):
                switch(workload, "Off")
                for p in fake.server.objects("Pod"):
                    fake.server.remove("Pod", "shop", p["metadata"]["name"])
                names = [f"{RS}-r{round_}p{i}" for i in range(2)]
                for name in names:
                    fake.server.add(pod(name, "shop", "api", RS, copy.deepcopy(OLD)))
                switch(workload, "Recreate")
                deadline = time.monotonic() + 10 * RELOAD_S + 20
                while time.monotonic() < deadline:
                    seen = len(fake.server.evicted)
                    report = run_cycle(
                        cluster,
                        now=timezone.now(),
                        snapshot=fake.adapter.discover(),
                        writer=fake.writer,
                        holder="t",
                    )
                    waited += report.waiting_for_webhook
                    for _, evicted in fake.server.evicted[seen:]:
                        # The ReplicaSet replaces it at once (16 ms in the recording
                        # of the incident): admitted by the webhook process.
                        evictions.append(evicted)
                        fake.server.remove("Pod", "shop", evicted)
                        fake.server.add(admitted(server, f"{evicted}-new"))
                    done = ResizeChange.objects.filter(
                        workload=workload, pod__in=names, status=S.APPLIED
                    ).count()
                    if done == 2:
                        break
                    time.sleep(0.2)
                failed = ResizeChange.objects.filter(workload=workload, status=S.FAILED)
                assert not failed.exists(), [(c.pod, c.error) for c in failed]
                assert (
                    ResizeChange.objects.filter(
                        workload=workload, pod__in=names, status=S.APPLIED
                    ).count()
                    == 2
                ), f"round {round_}: not applied in time"
    finally:
        fake.close()
    # Every pod evicted once: 2 per switch, none repeated.
    assert len(evictions) == 2 * SWITCHES
    assert len(set(evictions)) == len(evictions)
    # The handshake held writes back at least once (the process reloads on a timer).
    assert waited > 0
    print(
        f"{SWITCHES} switches: {len(evictions)} evictions, none repeated; "
        f"{waited} change-cycles waited for the webhook ({acks.WAITING!r})"
    )

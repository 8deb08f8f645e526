"""Notification channels against a local HTTP receiver on loopback: one message per
channel per cycle, deduplicated, rate-limited, filtered, failures kept and never
raised into the cycle."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from recommender import tasks
from recommender.models import (
    Cluster,
    NotificationChannel,
    NotificationDelivery,
    OomKill,
    ResizeChange,
    Workload,
)
from recommender.services.admission.snapshot import forget_holders
from recommender.services.operations.notifications import (
    encrypt_url,
    notify_after_cycle,
)
from recommender.services.policy.changes import update_policy
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_cluster, make_workload

pytestmark = pytest.mark.django_db

DASHBOARD = "https://vpaweb.example.com"


class Receiver:
    """An HTTP server on 127.0.0.1 keeping every POST (/fail: 500, /slow: waits)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/slow":
                    time.sleep(1.0)
                received.append((self.path, json.loads(body)))
                try:
                    self.send_response(500 if self.path == "/fail" else 200)
                    self.end_headers()
                    self.wfile.write(b"ok")
                except BrokenPipeError:
                    pass  # /slow: the client gave up, as it should

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def paths(self) -> list[str]:
        return sorted(path for path, _ in self.received)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def proposal(db: Any) -> ResizeChange:
    cluster = make_cluster("prod")
    workload = make_workload(cluster, "web", namespace="shop")
    Workload.objects.filter(pk=workload.pk).update(labels={"team": "shop"})
    return ResizeChange.objects.create(
        workload=workload, pod="web-1", reason="cpu 1 -> 587m"
    )


def _channel(name: str, kind: str, url: str, **fields: Any) -> NotificationChannel:
    fields.setdefault("min_interval_s", 0)
    return NotificationChannel.objects.create(
        name=name, kind=kind, url_encrypted=encrypt_url(url), **fields
    )


NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def simulated(settings: Any) -> Cluster:
    """The simulated fleet, refreshed once: recommendations, no proposals yet."""
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    # A day of simulated samples spans a minute less than 24 h: enough here.
    settings.MIN_HISTORY_HOURS = 12
    forget_holders()
    cluster = Cluster.objects.create(
        name="sim-a", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    return cluster


@override_settings(DASHBOARD_URL=DASHBOARD)
def test_a_new_proposal_is_one_message_per_channel_in_one_cycle_with_links(
    receiver: Receiver, simulated: Cluster
) -> None:
    for name, kind in (("chat", "slack"), ("teams", "teams"), ("ops", "webhook")):
        _channel(name, kind, f"{receiver.url}/{kind}", events=["proposal"])
    # Switch workloads to InPlaceOrRecreate one at a time until an updater cycle
    # (the task, with its hook) proposes a change.
    for workload in Workload.objects.filter(
        cluster=simulated, kind="Deployment", replicas__gte=2
    ).order_by("name"):
        update_policy(
            workload_id=workload.pk,
            changes={"mode": "InPlaceOrRecreate"},
            actor=None,
            now=NOW,
        )
        tasks.update_cluster(simulated.pk, NOW.isoformat())
        proposed = list(ResizeChange.objects.filter(status="proposed"))
        if proposed:
            break
        assert receiver.received == []  # no proposal, no message
    else:
        pytest.fail("no simulated workload needs a change")
    assert receiver.paths() == ["/slack", "/teams", "/webhook"]  # one per channel
    bodies = dict(receiver.received)
    link = f"{DASHBOARD}/changes/"
    # One line per workload and container, with its pods counted, not per pod.
    first = proposed[0]
    names = sorted(first.resources_after)
    pks = ",".join(str(pk) for pk in sorted(c.pk for c in proposed))
    for name in names:
        start = f"- {first.workload} container {name}: "
        slack = [
            ln for ln in bodies["/slack"]["text"].splitlines() if ln.startswith(start)
        ]
        assert len(slack) == 1, bodies["/slack"]["text"]
        assert f"on {len(proposed)} pods, " in slack[0]
        assert slack[0].endswith(f" USD a month; awaits approval <{link}|open>")
        assert f"{start}" in bodies["/teams"]["text"]
    assert bodies["/teams"]["@type"] == "MessageCard"
    assert f"awaits approval [open]({link})" in bodies["/teams"]["text"]
    events = bodies["/webhook"]["events"]
    assert sorted(e["key"] for e in events) == sorted(
        f"proposed:{pks}:{name}" for name in names
    )
    assert {e["url"] for e in events} == {link}
    # The next cycle proposes nothing new: nothing is sent again.
    tasks.update_cluster(simulated.pk, (NOW + timedelta(minutes=1)).isoformat())
    assert len(receiver.received) == 3


@override_settings(DASHBOARD_URL=DASHBOARD)
def test_rate_limited_events_wait_for_the_next_message(
    receiver: Receiver, proposal: ResizeChange
) -> None:
    _channel("chat", "slack", f"{receiver.url}/slack", min_interval_s=600)
    now = timezone.now()
    notify_after_cycle(cluster_id=proposal.workload.cluster_id, now=now)
    second = ResizeChange.objects.create(workload=proposal.workload, pod="web-2")
    outcome = notify_after_cycle(
        cluster_id=proposal.workload.cluster_id, now=now + timedelta(seconds=60)
    )
    assert outcome == {"waiting": 1}
    assert len(receiver.received) == 1
    notify_after_cycle(
        cluster_id=proposal.workload.cluster_id, now=now + timedelta(seconds=601)
    )
    assert len(receiver.received) == 2
    # The workload's line again, now with both pods.
    assert (
        "shop/Deployment/web: no request changed on 2 pods"
        in (receiver.received[1][1]["text"])
    )
    key = f"proposed:{proposal.pk},{second.pk}:"
    assert NotificationDelivery.objects.filter(key=key).count() == 1


def test_filters_by_cluster_namespace_label_and_event(
    receiver: Receiver, proposal: ResizeChange
) -> None:
    _channel("other-ns", "webhook", f"{receiver.url}/ns", namespaces=["payments"])
    _channel("other-team", "webhook", f"{receiver.url}/label", labels={"team": "x"})
    _channel("other-cluster", "webhook", f"{receiver.url}/cl", clusters=["staging"])
    _channel("ooms-only", "webhook", f"{receiver.url}/oom", events=["at_risk"])
    _channel("shop", "webhook", f"{receiver.url}/shop", labels={"team": "shop"})
    notify_after_cycle(cluster_id=proposal.workload.cluster_id, now=timezone.now())
    # The weekly digest has no namespace: a namespace or label filter drops it, a
    # cluster filter for another cluster too.
    assert receiver.paths() == ["/shop"]
    OomKill.objects.create(
        container=proposal.workload.containers.get(),
        pod="web-1",
        occurred_at=timezone.now(),
    )
    notify_after_cycle(cluster_id=proposal.workload.cluster_id, now=timezone.now())
    assert receiver.paths() == ["/oom", "/shop", "/shop"]
    oom = dict(receiver.received)["/oom"]["events"]
    assert [e["event"] for e in oom] == ["at_risk"]


@override_settings(NOTIFY_TIMEOUT_S=0.3)
def test_a_failing_channel_is_visible_and_never_stops_the_cycle(
    receiver: Receiver, proposal: ResizeChange, monkeypatch: pytest.MonkeyPatch
) -> None:
    _channel("broken", "slack", f"{receiver.url}/fail")
    _channel("slow", "slack", f"{receiver.url}/slow")
    NotificationChannel.objects.create(name="unset", kind="slack", url_env="NO_SUCH")
    monkeypatch.setenv("VPAWEB_TEST_HOOK", f"{receiver.url}/env")
    NotificationChannel.objects.create(
        name="from-env", kind="slack", url_env="VPAWEB_TEST_HOOK"
    )
    report = tasks.update_cluster(proposal.workload.cluster_id)
    assert report["cluster"] == "prod"  # the cycle ran to its end
    channels = {c.name: c for c in NotificationChannel.objects.all()}
    assert channels["broken"].last_error.startswith("HTTPError: HTTP Error 500")
    assert "timed out" in channels["slow"].last_error
    assert channels["unset"].last_error == (
        "ValueError: the environment variable NO_SUCH is not set"
    )
    assert channels["from-env"].last_error == ""
    assert channels["from-env"].last_sent_at is not None
    # Undelivered events are tried again in the next cycle.
    assert not NotificationDelivery.objects.filter(channel=channels["broken"]).exists()


def test_the_stored_url_is_encrypted(proposal: ResizeChange) -> None:
    secret = "https://hooks.slack.example/services/T000/B000/XXXX"
    channel = _channel("chat", "slack", secret)
    assert "hooks.slack" not in channel.url_encrypted
    from recommender.services.operations.notifications import channel_url

    assert channel_url(channel) == secret
    assert Cluster.objects.count() == 1

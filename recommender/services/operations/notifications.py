"""Digests where teams talk: what needs people, posted to chat after each cycle.

After each updater cycle of a cluster (``tasks.update_cluster``: one call), every
enabled ``NotificationChannel`` gets at most one message listing the events it has not
been told about yet: new proposals awaiting approval, workloads newly at risk (OOM
kills this week), failed changes, a failing cluster, and once a week the cluster's
savings digest. Each links back to the dashboard (``VPAWEB_DASHBOARD_URL``)."""
# - **Filters**: a channel takes the events it lists (none listed: all), of the
#   clusters, namespaces and workload labels it lists (none: all).
# - **Deduplicated**: an event (its key) reaches a channel once
#   (``NotificationDelivery``, unique per channel and key).
# - **Rate-limited**: at most one message per ``min_interval_s``; events that wait are
#   sent together in the next message.
# - **Secrets**: a webhook URL is stored encrypted with a key derived from
#   ``SECRET_KEY`` (``encrypt_url``), or read from the environment variable the channel
#   names.
# - **Never blocking**: a short timeout (``VPAWEB_NOTIFY_TIMEOUT_S``), and any failure
#   is kept on the channel (``last_error``, shown in the admin) and logged; the events
#   stay undelivered and are sent with the next message. Nothing here raises into a
#   cycle.

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db.models import Max

from recommender.engine.quantity import format_cpu, format_memory_readable
from recommender.models import (
    Cluster,
    NotificationChannel,
    NotificationDelivery,
    OomKill,
    ResizeChange,
    Workload,
)
from recommender.services.operations.cluster_health import cluster_failure
from recommender.services.readmodels.namespace_savings import namespace_savings
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.readmodels.realized import change_savings
from recommender.text import money_text

logger = logging.getLogger(__name__)

Event = NotificationChannel.Event
# At most this many events of a kind are listed in one message (the rest are counted).
MAX_LISTED = 20


def _fernet() -> Fernet:
    digest = hashlib.sha256(
        b"vpaweb notification channels:" + settings.SECRET_KEY.encode()
    ).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt_url(url: str) -> str:
    """A webhook URL as stored (``NotificationChannel.url_encrypted``)."""
    return _fernet().encrypt(url.encode()).decode()


def channel_url(channel: NotificationChannel) -> str:
    """The channel's webhook URL; ValueError saying why there is none."""
    if channel.url_env:
        url = os.environ.get(channel.url_env, "")
        if not url:
            raise ValueError(f"the environment variable {channel.url_env} is not set")
        return url
    try:
        return _fernet().decrypt(channel.url_encrypted.encode()).decode()
    except InvalidToken:
        raise ValueError(
            "the stored URL cannot be decrypted (was SECRET_KEY changed?); set it again"
        ) from None


@dataclass(frozen=True)
class Notice:
    """One event, as a channel's filters and messages read it."""

    event: str
    key: str
    cluster: str
    text: str
    url: str
    namespace: str = ""
    labels: dict[str, Any] = field(default_factory=dict)


def _workload_url(base: str, workload: Workload) -> str:
    return f"{base}/workloads/{workload.pk}/"


def _resources_text(before: dict[str, Any], after: dict[str, Any]) -> str:
    """ "cpu 500m → 203m, memory 256Mi → 335Mi": the requests a change moves."""
    parts = []
    for resource, show in (("cpu", format_cpu), ("memory", format_memory_readable)):
        old = (before.get("requests") or {}).get(resource)
        new = (after.get("requests") or {}).get(resource)
        if new is not None and new != old:
            parts.append(
                f"{resource} {'none' if old is None else show(old)} → {show(new)}"
            )
    return ", ".join(parts) or "no request changed"


def _change_notices(
    cluster: Cluster, changes: list[ResizeChange], base: str
) -> list[Notice]:
    """One line per workload, container and change (its pods counted): the requests
    from → to and what they save a month at the workload's prices
    (``change_savings``); proposals and failures apart."""
    groups: dict[tuple[Any, ...], list[tuple[ResizeChange, dict[str, Any]]]] = {}
    for change in changes:
        # A change of no container (none recorded) still gets its line.
        for name, after in sorted((change.resources_after or {}).items()) or [("", {})]:
            before = (change.resources_before or {}).get(name) or {}
            moved = _resources_text(before, after)
            key = (change.status, change.workload_id, name, moved)
            groups.setdefault(key, []).append((change, before))
    notices = []
    prices = Prices.from_settings()
    for (status, _, name, moved), members in groups.items():
        workload = members[0][0].workload
        is_proposal = status == ResizeChange.Status.PROPOSED
        saved = sum(
            change_savings(
                before,
                (change.resources_after or {}).get(name) or {},
                prices=prices.of(workload),
            )
            for change, before in members
        )
        pods = len(members)
        verb = "awaits approval" if is_proposal else f"failed: {members[0][0].reason}"
        notices.append(
            Notice(
                event=Event.PROPOSAL if is_proposal else Event.CHANGE_FAILED,
                # A new pod of the same change is a new line (with the others).
                key=f"{status}:"
                + ",".join(str(pk) for pk in sorted(c.pk for c, _ in members))
                + f":{name}",
                cluster=cluster.name,
                namespace=workload.namespace,
                labels=workload.labels or {},
                text=f"{workload}{f' container {name}' if name else ''}: {moved} "
                f"on {pods} pod{'s' if pods != 1 else ''}, {money_text(saved)} a "
                f"month; {verb}",
                url=f"{base}/changes/"
                if is_proposal
                else _workload_url(base, workload),
            )
        )
    return notices


def _notices(cluster: Cluster, now: datetime) -> list[Notice]:
    """Every event of the cluster a channel could be told about now."""
    base = settings.DASHBOARD_URL.rstrip("/")
    notices = []
    changes = (
        ResizeChange.objects.filter(
            workload__cluster=cluster,
            status__in=[ResizeChange.Status.PROPOSED, ResizeChange.Status.FAILED],
        )
        .select_related("workload")
        .order_by("-created_at")[:500]
    )
    notices.extend(_change_notices(cluster, list(changes), base))
    week_ago = now - timedelta(days=7)
    kills = (
        OomKill.objects.filter(
            container__workload__cluster=cluster, occurred_at__gte=week_ago
        )
        .values("container__workload")
        .annotate(latest=Max("occurred_at"))
    )
    at_risk = {row["container__workload"]: row["latest"] for row in kills}
    for workload in Workload.objects.filter(pk__in=list(at_risk)[:500]):
        year, week, _ = at_risk[workload.pk].isocalendar()
        notices.append(
            Notice(
                event=Event.AT_RISK,
                key=f"at_risk:{workload.pk}:{year}-W{week:02d}",
                cluster=cluster.name,
                namespace=workload.namespace,
                labels=workload.labels or {},
                text=f"{workload} is at risk: OOM killed "
                f"{at_risk[workload.pk]:%Y-%m-%d %H:%M} UTC",
                url=_workload_url(base, workload),
            )
        )
    failure = cluster_failure(cluster)
    if failure is not None:
        notices.append(
            Notice(
                event=Event.CLUSTER_FAILING,
                key=f"cluster_failing:{cluster.pk}:{failure.since.isoformat()}",
                cluster=cluster.name,
                text=f"cluster {cluster.name} fails to refresh since "
                f"{failure.since:%Y-%m-%d %H:%M} UTC: {failure.error[:300]}",
                url=f"{base}/runs/",
            )
        )
    year, week, _ = now.isocalendar()
    notices.append(_weekly_digest(cluster, now, f"{year}-W{week:02d}", base))
    return notices


def _weekly_digest(cluster: Cluster, now: datetime, week: str, base: str) -> Notice:
    """The cluster's week: its workloads, their net savings as the dashboard's
    headline counts them (``namespace_savings``: negative ones included) and those
    at risk."""
    prices = Prices.from_settings()
    savings = sum(
        amount
        for (name, _), amount in namespace_savings(prices=prices, now=now).items()
        if name == cluster.name
    )
    risks = list(
        Workload.objects.shown()
        .filter(cluster=cluster)
        .with_provisioning(prices=prices, rules=risk_rules(now))
        # Annotations of with_provisioning, which the django stubs cannot see.
        .values_list("risk", flat=True)  # type: ignore[misc]
    )
    at_risk = sum(1 for risk in risks if risk > 0)
    return Notice(
        event=Event.WEEKLY_DIGEST,
        key=f"weekly_digest:{cluster.pk}:{week}",
        cluster=cluster.name,
        text=f"week {week}, cluster {cluster.name}: {len(risks)} workloads could save "
        f"{money_text(savings)} per month net at the recommendations; "
        f"{at_risk} at risk",
        url=f"{base}/rollups/?cluster={cluster.name}",
    )


def _wanted(channel: NotificationChannel, notice: Notice) -> bool:
    if channel.events and notice.event not in channel.events:
        return False
    if channel.clusters and notice.cluster not in channel.clusters:
        return False
    if channel.namespaces and notice.namespace not in channel.namespaces:
        return False
    return all(notice.labels.get(k) == v for k, v in (channel.labels or {}).items())


def message_body(channel: NotificationChannel, notices: list[Notice]) -> dict[str, Any]:
    """What is posted: Slack's ``text``, a Teams MessageCard, or plain JSON."""
    title = f"vpaweb: {len(notices)} new event(s) in cluster {notices[0].cluster}"
    if channel.kind == NotificationChannel.Kind.WEBHOOK:
        return {
            "source": "vpaweb",
            "title": title,
            "dashboard_url": settings.DASHBOARD_URL,
            "events": [
                {"event": n.event, "key": n.key, "cluster": n.cluster,
                 "namespace": n.namespace, "text": n.text, "url": n.url}
                for n in notices
            ],
        }  # fmt: skip
    lines = []
    for event in Event:
        of_kind = [n for n in notices if n.event == event.value]
        if not of_kind:
            continue
        lines.append(
            f"*{event.label}*" if channel.kind == "slack" else f"**{event.label}**"
        )
        for notice in of_kind[:MAX_LISTED]:
            link = (
                f"<{notice.url}|open>"
                if channel.kind == NotificationChannel.Kind.SLACK
                else f"[open]({notice.url})"
            )
            lines.append(f"- {notice.text} {link}")
        if len(of_kind) > MAX_LISTED:
            lines.append(f"- and {len(of_kind) - MAX_LISTED} more")
    text = "\n".join(lines)
    if channel.kind == NotificationChannel.Kind.SLACK:
        return {"text": f"*{title}*\n{text}"}
    return {
        "@type": "MessageCard",
        "@context": "https://schema.org/extensions",
        "summary": title,
        "title": title,
        "text": text.replace("\n", "\n\n"),
    }


def _post(url: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "vpaweb"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=settings.NOTIFY_TIMEOUT_S) as response:
        response.read(65536)


def _deliver(channel: NotificationChannel, notices: list[Notice], now: datetime) -> str:
    """Send one channel its new notices: "sent", "nothing", "waiting" or "failed"."""
    wanted = [n for n in notices if _wanted(channel, n)]
    told = set(
        NotificationDelivery.objects.filter(
            channel=channel, key__in=[n.key for n in wanted]
        ).values_list("key", flat=True)
    )
    new = [n for n in wanted if n.key not in told]
    if not new:
        return "nothing"
    interval = timedelta(seconds=channel.min_interval_s)
    if channel.last_sent_at is not None and now - channel.last_sent_at < interval:
        return "waiting"  # rate-limited: sent with the next message
    try:
        url = channel_url(channel)
        if not url.startswith(("http://", "https://")):
            raise ValueError("the URL is not http(s)")
        _post(url, message_body(channel, new))
    except Exception as exc:  # a channel's failure never reaches the cycle
        error = f"{type(exc).__name__}: {exc}"[:1000]
        logger.warning("notification channel %s failed: %s", channel.name, error)
        NotificationChannel.objects.filter(pk=channel.pk).update(
            last_error=error, last_error_at=now
        )
        return "failed"
    NotificationDelivery.objects.bulk_create(
        [NotificationDelivery(channel=channel, key=n.key, event=n.event, sent_at=now)
         for n in new],
        ignore_conflicts=True,
    )  # fmt: skip
    NotificationChannel.objects.filter(pk=channel.pk).update(
        last_sent_at=now, last_error=""
    )
    logger.info("notification channel %s: %d events sent", channel.name, len(new))
    return "sent"


def notify_after_cycle(*, cluster_id: int, now: datetime) -> dict[str, int]:
    """Tell every enabled channel about the cluster's new events (one message each at
    most); counts of channels by outcome. Never raises."""
    outcomes: dict[str, int] = {}
    try:
        cluster = Cluster.objects.filter(pk=cluster_id).first()
        channels = list(NotificationChannel.objects.filter(is_enabled=True))
        if cluster is None or not channels:
            return outcomes
        notices = _notices(cluster, now)
        for channel in channels:
            outcome = _deliver(channel, notices, now)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    except Exception:
        logger.exception("notifications after the cycle of cluster %s", cluster_id)
        outcomes["error"] = outcomes.get("error", 0) + 1
    return outcomes

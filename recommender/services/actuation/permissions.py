"""Which write paths vpaweb has on a cluster, and which a refusal stopped.

A cluster is written only when an operator allowed actuation for it
(``Cluster.actuation_allowed``, ``control.set_actuation_allowed``). Then vpaweb asks
the API server what it may do, one SelfSubjectAccessReview per permission a write
path needs (``WRITE_PATHS``), at the first updater cycle and every ``RECHECK_S``
after (or at once after an operator asks again); the answers are stored on the
cluster and shown per path. A path the review denies is not tried."""
# A path whose write is refused by authorization anyway (a role removed since the
# review: a 403 with ``X-Content-Type-Options: nosniff`` and no cause) is
# stopped with an exponential back-off: one updater interval, then twice that, up to
# ``MAX_BACKOFF_S``; the error and the time of the next try are shown, and it is
# logged as a WARNING once, when the path stops, not every cycle. A write that succeeds
# clears it.
#
# SelfSubjectAccessReview needs no role of its own (every authenticated user may create
# one: the default ``system:basic-user`` ClusterRole), and creates nothing; it is still
# a POST, so it is sent only to a cluster whose actuation is allowed.

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from recommender.cluster.writer import (
    WEBHOOK_CONFIGURATION_NAME,
    AccessCheck,
    ClusterWriter,
    WriteResult,
)
from recommender.errors import SourceUnavailable
from recommender.models import Cluster

logger = logging.getLogger(__name__)

# The write paths and the permissions each needs, asked as the role grants them
# (deploy/components/actuation/rbac-writer.yaml).
WEBHOOK_REGISTRATION = "webhook_registration"
RESIZE = "resize"
EVICTION = "eviction"
EVENTS = "events"
VPA_STATUS = "vpa_status"
HPA_TARGETS = "hpa_targets"
WRITE_PATHS: dict[str, tuple[AccessCheck, ...]] = {
    WEBHOOK_REGISTRATION: (
        AccessCheck(
            "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "create"
        ),
        # Asked with the name: the shipped role grants update only on vpaweb's own
        # configuration (resourceNames), and a review without the name is denied.
        AccessCheck(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "update",
            name=WEBHOOK_CONFIGURATION_NAME,
        ),
    ),
    RESIZE: (AccessCheck("", "pods", "patch", subresource="resize"),),
    EVICTION: (AccessCheck("", "pods", "create", subresource="eviction"),),
    EVENTS: (AccessCheck("", "events", "create"),),
    VPA_STATUS: (
        AccessCheck(
            "autoscaling.k8s.io",
            "verticalpodautoscalers",
            "patch",
            subresource="status",
        ),
    ),
    # Coordinated HPA mode: the HPA target patch (k8s-wire hpa/33-35).
    HPA_TARGETS: (AccessCheck("autoscaling", "horizontalpodautoscalers", "patch"),),
}
PATH_LABELS = {
    WEBHOOK_REGISTRATION: "webhook registration",
    RESIZE: "in-place resize",
    EVICTION: "eviction",
    EVENTS: "events",
    VPA_STATUS: "VPA status (drop-in)",
    HPA_TARGETS: "HPA targets (coordinated HPA mode)",
}
RECHECK_S = 3600.0  # permissions are asked again after an hour
MAX_BACKOFF_S = 6 * 3600.0


def _text(when: datetime) -> str:
    return when.isoformat()


def _time(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def permissions_due(cluster: Cluster, *, now: datetime) -> bool:
    """Whether the cluster's permissions should be asked (again) now."""
    checked = _time((cluster.write_permissions or {}).get("checked_at"))
    return checked is None or now - checked >= timedelta(seconds=RECHECK_S)


def check_write_permissions(
    cluster: Cluster, *, writer: ClusterWriter, now: datetime
) -> dict[str, Any]:
    """Ask the API server (SelfSubjectAccessReview) what each write path may do and
    store the answers on the cluster. Only for a cluster whose actuation is allowed."""
    if not cluster.actuation_allowed:
        raise ValueError(f"cluster {cluster.name}: actuation is not allowed")
    checks = [check for path in WRITE_PATHS.values() for check in path]
    found: dict[str, Any] = {"checked_at": _text(now), "error": "", "paths": {}}
    try:
        answers = dict(zip(checks, writer.review_access(checks=checks), strict=True))
    except SourceUnavailable as exc:
        found["error"] = exc.message
        answers = {}
    for path, needed in WRITE_PATHS.items():
        denied = [
            f"{check.describe()}: {answers[check].reason or 'denied'}"
            for check in needed
            if check in answers and not answers[check].allowed
        ]
        known = all(check in answers for check in needed)
        found["paths"][path] = {
            "allowed": known and not denied,
            "reason": "; ".join(denied) if denied else ("" if known else "unknown"),
        }
    missing = [p for p, v in found["paths"].items() if not v["allowed"]]
    logger.info(
        "cluster %s: write permissions checked; missing: %s",
        cluster.name,
        ", ".join(missing) or "none",
    )
    cluster.write_permissions = found
    Cluster.objects.filter(pk=cluster.pk).update(write_permissions=found)
    return found


def path_block_reason(cluster: Cluster, path: str, *, now: datetime) -> str | None:
    """Why vpaweb must not write through ``path`` to ``cluster`` now, or None."""
    if not cluster.actuation_allowed:
        return f"actuation is not allowed for cluster {cluster.name}"
    answer = (cluster.write_permissions or {}).get("paths", {}).get(path)
    if answer is not None and not answer["allowed"]:
        return f"no permission for {PATH_LABELS[path]}: {answer['reason']}"
    stopped = (cluster.write_backoff or {}).get(path)
    if stopped is not None:
        until = _time(stopped["until"])
        if until is not None and now < until:
            return (
                f"{PATH_LABELS[path]} stopped after HTTP 403 ({stopped['error']}); "
                f"next try at {stopped['until']}"
            )
    return None


def record_write_result(
    cluster: Cluster, path: str, result: WriteResult, *, now: datetime
) -> None:
    """Note a write's answer: an authorization 403 stops the path with back-off, a
    success clears it (other answers belong to the caller: an admission 403, such as
    a resize larger than the pod's node, is that one write's, not the path's)."""
    backoff = dict(cluster.write_backoff or {})
    if result.permission_refused:
        before = backoff.get(path) or {}
        failures = int(before.get("failures", 0)) + 1
        delay_s = min(
            float(settings.UPDATER_INTERVAL_S) * 2 ** (failures - 1), MAX_BACKOFF_S
        )
        error = result.message or "HTTP 403 Forbidden"
        backoff[path] = {
            "failures": failures,
            "since": before.get("since") or _text(now),
            "until": _text(now + timedelta(seconds=delay_s)),
            "error": error,
        }
        # Once when the path stops; its retries are quieter.
        log = logger.warning if failures == 1 else logger.info
        log(
            "cluster %s: %s refused (HTTP 403: %s); stopped, next try in %.0f s "
            "(refusal %d)",
            cluster.name,
            PATH_LABELS[path],
            error,
            delay_s,
            failures,
        )
    elif result.ok and path in backoff:
        del backoff[path]
        logger.info("cluster %s: %s works again", cluster.name, PATH_LABELS[path])
    else:
        return
    cluster.write_backoff = backoff
    Cluster.objects.filter(pk=cluster.pk).update(write_backoff=backoff)


@dataclass(frozen=True)
class WritePath:
    """One write path of a cluster as the pages and the API show it."""

    path: str
    label: str
    allowed: bool | None  # None: not checked yet
    reason: str
    stopped_until: str | None
    error: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "path": self.path,
            "label": self.label,
            "allowed": self.allowed,
            "reason": self.reason,
            "stopped_until": self.stopped_until,
            "error": self.error,
        }


def write_paths(cluster: Cluster) -> list[WritePath]:
    """Each write path: permitted or missing (and why), stopped by a 403 or not."""
    answers = (cluster.write_permissions or {}).get("paths", {})
    backoff = cluster.write_backoff or {}
    found = []
    for path, label in PATH_LABELS.items():
        answer = answers.get(path)
        stopped = backoff.get(path) or {}
        found.append(
            WritePath(
                path=path,
                label=label,
                allowed=None if answer is None else bool(answer["allowed"]),
                reason="" if answer is None else answer["reason"],
                stopped_until=stopped.get("until"),
                error=stopped.get("error", ""),
            )
        )
    return found

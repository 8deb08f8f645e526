"""An ``admission.k8s.io/v1`` AdmissionReview in, the reply out: ``admit_review``.

The shapes follow what kube-apiserver v1.36 sent and accepted
(tests/fixtures/k8s-wire/admission/): the request's ``uid`` is echoed, ``allowed`` is
always true, and a patch goes as ``patchType: JSONPatch`` with the patch
base64-encoded. A body that is not an AdmissionReview raises ``MalformedReview``
(answered 400 by the HTTP layer; ``failurePolicy: Ignore`` then admits the pod)."""
# Every decision is counted (``counters.py``, except dry runs: a ``dryRun`` request gets
# the same patch and leaves no trace but its log line) and logged once with the pod, the
# workload and each container's change; the reasons for failing open are also logged at
# WARNING, at most once a minute per reason.

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from recommender.services.admission import counters
from recommender.services.admission.boost import count_boost
from recommender.services.admission.decision import (
    FAILED_OPEN,
    PATCHED,
    AdmissionDecision,
    decide_admission,
)
from recommender.services.admission.snapshot import SnapshotHolder, holder_for

logger = logging.getLogger("recommender.webhook")

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
# Upstream's admission controller refuses bodies over 5 MiB.
MAX_BODY_BYTES = 5 * 1024 * 1024
# A failing-open reason is logged at WARNING at most this often.
WARN_EVERY_S = 60.0

_warned: dict[str, float] = {}
_warned_lock = threading.Lock()


class MalformedReview(ValueError):
    """Not an AdmissionReview vpaweb can answer; ``field`` names the bad part."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ParsedReview:
    """The parts of a review the webhook uses."""

    uid: str
    request: Mapping[str, Any]
    dry_run: bool


def parse_review(body: bytes | bytearray, *, content_type: str) -> ParsedReview:
    """Check the body is an AdmissionReview v1 with a request and a uid."""
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise MalformedReview(
            f"Content-Type must be application/json, not {content_type!r}",
            field="Content-Type",
        )
    if len(body) > MAX_BODY_BYTES:
        raise MalformedReview(
            f"the body is {len(body)} bytes; at most {MAX_BODY_BYTES} are accepted",
            field="body",
        )
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedReview(f"the body is not JSON: {exc}", field="body") from None
    except RecursionError:
        # The C decoder refuses nesting past the interpreter's recursion limit (about
        # 1,000 levels; a pod is a few dozen): answered like any malformed body, where
        # it used to end the connection's thread without an answer.
        raise MalformedReview(
            "the body is nested too deeply to be an AdmissionReview", field="body"
        ) from None
    if not isinstance(review, dict):
        raise MalformedReview("the body must be a JSON object", field="body")
    if review.get("apiVersion") != API_VERSION:
        raise MalformedReview(
            f"apiVersion must be {API_VERSION}, not {review.get('apiVersion')!r}",
            field="apiVersion",
        )
    if review.get("kind") != KIND:
        raise MalformedReview(
            f"kind must be {KIND}, not {review.get('kind')!r}", field="kind"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("request is required (an object)", field="request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("request.uid is required", field="request.uid")
    return ParsedReview(uid=uid, request=request, dry_run=request.get("dryRun") is True)


def review_response(uid: str, patch: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """The reply: the uid echoed, allowed, and the patch if there is one."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(
            json.dumps(list(patch), separators=(",", ":")).encode()
        ).decode()
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def record_decision(
    decision: AdmissionDecision, *, cluster_name: str, dry_run: bool, at: datetime
) -> None:
    """Log the decision and count it (dry runs are logged only)."""
    if not dry_run:
        counters.count(
            cluster_name=cluster_name,
            outcome=decision.outcome,
            at=at,
            patches=len(decision.patch) if decision.outcome == PATCHED else 0,
            fail_open=counters.fail_open_reason(decision.reason)
            if decision.outcome == FAILED_OPEN
            else "",
        )
        count_boost(decision.patch if decision.outcome == PATCHED else ())
    changes = "; ".join(
        f"{p.name}: {p.changes_text()}" for p in decision.containers if p.is_changed
    )
    logger.info(
        "admission %s pod=%s/%s workload=%s outcome=%s%s reason=%s%s",
        cluster_name,
        decision.namespace,
        decision.pod,
        decision.workload or "-",
        decision.outcome,
        " (dry run)" if dry_run else "",
        decision.reason,
        f" changes={changes}" if changes else "",
    )
    if decision.outcome == FAILED_OPEN:
        warn_once(f"{cluster_name}: {decision.reason}")


def warn_once(reason: str) -> None:
    """Log a failing-open reason at WARNING, at most once a minute per reason."""
    now = time.monotonic()
    with _warned_lock:
        last = _warned.get(reason)
        if last is not None and now - last < WARN_EVERY_S:
            return
        _warned[reason] = now
        if len(_warned) > 1000:  # reasons carry names: keep the memory bounded
            _warned.clear()
    logger.warning("admission failed open: %s", reason)


class Answered:
    """Who answers a review: the decision or the deadline, whichever comes first.

    The first ``claim()`` wins; the loser records nothing, so a decision finishing
    after the deadline answer is not counted twice.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed = False

    def claim(self) -> bool:
        """True for the first caller only."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True


def admit_review(
    parsed: ParsedReview,
    *,
    holder: SnapshotHolder,
    now: datetime,
    answered: Answered | None = None,
) -> tuple[dict[str, Any], AdmissionDecision]:
    """Decide, record and build the reply for one parsed review (recorded only if
    ``answered`` is claimed by this decision, i.e. the deadline has not answered)."""
    try:
        decision = decide_admission(
            request=parsed.request, snapshot=holder.current(), now=now
        )
    except Exception as exc:  # fail open: never let a bug block a pod
        logger.exception("admission decision crashed for uid %s", parsed.uid)
        decision = AdmissionDecision(
            FAILED_OPEN,
            f"internal error: {type(exc).__name__}",
            namespace=str(parsed.request.get("namespace") or ""),
            pod="?",
        )
    if answered is None or answered.claim():
        record_decision(
            decision, cluster_name=holder.cluster_name, dry_run=parsed.dry_run, at=now
        )
    patch = decision.patch if decision.outcome == PATCHED else ()
    return review_response(parsed.uid, patch), decision


def in_process_admission(
    cluster_name: str,
    *,
    clock: Callable[[], datetime] = timezone.now,
    flush: bool = True,
) -> Callable[[dict[str, Any]], Mapping[str, Any]]:
    """Admission as a callable, for a cluster whose API server runs in this process:
    the same service as ``POST /mutate`` (parse, decide, count, log), minus HTTP and
    TLS. ``clock`` is that cluster's time (an updater cycle's ``now``). With ``flush``
    False the counts wait for the caller's ``counters.flush_counts()`` (a refresh
    flushes once per discovery pass: a statement per pod grew with the fleet)."""

    def admit(review: dict[str, Any]) -> Mapping[str, Any]:
        holder = holder_for(cluster_name)
        holder.refresh_if_needed()
        parsed = parse_review(
            json.dumps(review).encode(), content_type="application/json"
        )
        reply, _ = admit_review(parsed, holder=holder, now=clock())
        if flush:
            counters.flush_counts()  # a few pods a minute: saved at once
        return reply

    return admit

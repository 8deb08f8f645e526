"""Celery tasks: thin, JSON-only interfaces to the services, named like them.

Import them with a ``_task`` suffix (``refresh_cluster as refresh_cluster_task``) so
they are not confused with the services. Without ``REDIS_URL`` they run eagerly,
in-process; the base class still sends their arguments through the JSON serializer so
that eager mode cannot accept what a real broker would refuse.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime, timedelta
from typing import Any

from celery import shared_task
from celery.contrib.django.task import DjangoTask
from celery.exceptions import Retry
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError
from django.utils import timezone
from kombu.utils.json import dumps, loads

from recommender.errors import InvalidInput, NotFound, SourceUnavailable
from recommender.models import Cluster, Workload
from recommender.services.access import heavy_jobs
from recommender.services.operations import retention, runs
from recommender.services.refresh import chunking, cycle, expiry
from recommender.services.replay import namespace_compare, whatif_jobs
from recommender.services.replay.whatif import check_what_if

logger = logging.getLogger(__name__)

# Failures worth another try: the source or the database is briefly away.
TRANSIENT_ERRORS = (SourceUnavailable, OperationalError, InterfaceError)
MAX_RETRIES = 3
# With a broker, a cluster is refreshed whole (one pass over every namespace: finds new
# ones, brings back namespaces whose workloads vanished and returned) at most this long
# after its last whole pass, and in namespace shards in between.
WHOLE_CLUSTER_EVERY_S = 600.0
# The claim of a queued or running refresh (a shard, or "*" for the whole cluster). A
# queued task's claim lasts the task time limit; the worker running it renews it with a
# heartbeat, so it lapses within one refresh interval of that worker's death.
CLAIM_KEY = "vpaweb:refresh-claim:{cluster_id}:{shard}"


class JsonTask(DjangoTask):  # type: ignore[misc]
    """A task whose arguments survive a JSON round trip, even when run eagerly."""

    def apply(
        self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any
    ) -> Any:
        """Run in-process (eager mode) with arguments as a broker delivers them."""
        args, kwargs = loads(dumps([list(args or ()), dict(kwargs or {})]))
        return super().apply(args, kwargs, *rest, **options)

    def retry_transient(self, exc: Exception) -> Exception:
        """Retry later with exponential backoff and jitter, at most MAX_RETRIES times.

        In eager mode the caller's loop is the retry: re-running at once would only
        repeat the failure.
        """
        if self.request.is_eager or self.request.retries >= MAX_RETRIES:
            return exc
        countdown = 2**self.request.retries * 5 + random.uniform(0, 5)
        retry: Exception = self.retry(
            exc=exc, countdown=countdown, max_retries=MAX_RETRIES
        )
        return retry


def _parse_now(now: str | None) -> datetime:
    """An ISO timestamp with a zone, or the current time when None."""
    if now is None:
        return timezone.now()
    try:
        parsed = datetime.fromisoformat(now)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"now={now!r} is not an ISO 8601 timestamp", field="now"
        ) from None
    if timezone.is_naive(parsed):
        raise InvalidInput(f"now={now!r} has no time zone", field="now")
    return parsed


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.refresh_cluster")
def refresh_cluster(
    self: JsonTask,
    cluster_id: int,
    now: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """One refresh cycle of one cluster, or of one namespace of it (a shard).

    Idempotent: the service reads only what lies after each container's watermark and
    writes checkpoints with compare-and-swap, so a redelivered or retried task loses
    and double-counts nothing. Returns the run's id, status and counts. Ends the
    fan-out's claim of this shard, unless a retry is queued (the retry keeps it).
    On a worker it holds the claim with a heartbeat (``_held_claim``).
    """
    key = _claim_key(cluster_id, namespace)
    is_retrying = False
    # In-process (eager), the claim ends with its caller: there is nothing to outlive.
    holding = nullcontext() if self.request.is_eager else _held_claim(key)
    # On a worker, a whole-cluster refresh leaves its first contacts to shard tasks,
    # queued as soon as it has stored what they start from.
    queued: list[list[str]] = []
    by_shard = (
        chunking.first_contact_by_shard(
            lambda namespaces: queued.extend(
                _queue_first_contact(cluster_id, now, namespaces)
            )
        )
        if not self.request.is_eager
        and namespace is None
        and settings.FIRST_CONTACT_BY_SHARD
        else nullcontext(set[str]())
    )
    try:
        with holding, by_shard:
            run = cycle.refresh_cluster(
                cluster_id=cluster_id, now=_parse_now(now), namespace=namespace
            )
    except NotFound:
        logger.warning("refresh of cluster %s skipped: it no longer exists", cluster_id)
        return {"cluster_id": cluster_id, "status": "gone"}
    except TRANSIENT_ERRORS as exc:
        try:
            error = self.retry_transient(exc)
        except Retry:
            # Queued again: the claim lasts like a queued task's (its worker renews it).
            is_retrying = True
            cache.set(key, 1, timeout=settings.CELERY_TASK_TIME_LIMIT)
            raise
        raise error from exc
    finally:
        if not is_retrying:
            cache.delete(key)
    return {
        "run_id": run.pk,
        "status": run.status,
        "counts": run.counts,
        "worker": self.request.hostname,
        "first_contact_shards": queued,
    }


def _queue_first_contact(
    cluster_id: int, now: str | None, namespaces: list[str]
) -> list[list[str]]:
    """Queue the refresh of each namespace whose first contact a whole-cluster refresh
    left to the workers (``chunking.first_contact_by_shard``); [namespace, task id]
    of each queued.

    Each holds its shard's claim as a fan-out's shard does, so the next fan-out skips
    it while it is queued or running; one whose worker died is taken again by the
    first fan-out after its claim lapsed (its committed chunks stay: it goes on with
    the containers still without a watermark).
    """
    queued = []
    for namespace in namespaces:
        if not cache.add(
            _claim_key(cluster_id, namespace),
            1,
            timeout=settings.CELERY_TASK_TIME_LIMIT,
        ):
            continue  # queued or running already
        task = refresh_cluster.delay(cluster_id, now, namespace)
        queued.append([namespace, task.id])
    return queued


@contextmanager
def _held_claim(key: str) -> Iterator[None]:
    """Hold a refresh claim while the block runs on this worker: it lives one refresh
    interval and a heartbeat renews it, so it lapses within an interval of a kill."""
    cache.set(key, 1, timeout=runs.lost_after_s())
    with runs.heartbeat(
        lambda: cache.touch(key, timeout=runs.lost_after_s()), name=f"claim {key}"
    ):
        yield


def _claim_key(cluster_id: int, namespace: str | None) -> str:
    return CLAIM_KEY.format(cluster_id=cluster_id, shard=namespace or "*")


def _claim(cluster_id: int, namespace: str | None) -> bool:
    """Claim a refresh of a shard (None: the whole cluster); False when one is
    already queued or running (a refresh of the whole cluster blocks its shards)."""
    if namespace is not None and cache.get(_claim_key(cluster_id, None)) is not None:
        return False
    return bool(
        cache.add(
            _claim_key(cluster_id, namespace),
            1,
            timeout=settings.CELERY_TASK_TIME_LIMIT,
        )
    )


def _shards_of(cluster: Cluster, now: datetime) -> list[str | None]:
    """The namespaces a cluster's refresh fans out to, or [None] (the whole cluster)
    when it was never discovered whole or not for ``WHOLE_CLUSTER_EVERY_S``."""
    last = cluster.last_discovered_at
    if last is None or now - last >= timedelta(seconds=WHOLE_CLUSTER_EVERY_S):
        return [None]
    # order_by() first: the model's default ordering would make distinct() per row.
    namespaces = (
        Workload.objects.filter(cluster=cluster, is_active=True)
        .order_by("namespace")
        .values_list("namespace", flat=True)
        .distinct()
    )
    return list(namespaces) or [None]


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.refresh_all_clusters")
def refresh_all_clusters(self: JsonTask, now: str | None = None) -> dict[str, Any]:
    """Queue the refresh of every enabled cluster; one failing does not stop the rest.

    With a broker (``REDIS_URL``) a cluster fans out into one task per namespace of
    its active workloads, so workers refresh namespaces in parallel and each reads
    only its namespace; every ``WHOLE_CLUSTER_EVERY_S`` (and before its first
    discovery) it is refreshed whole instead, which finds new namespaces. Without a
    broker (eager mode) each cluster is refreshed whole, in-process. A shard whose
    previous refresh is still queued or running is skipped, not queued twice.
    """
    is_sharded = bool(settings.REDIS_URL)
    when = _parse_now(now)
    queued: list[Any] = []
    failed: list[int] = []
    skipped: list[Any] = []
    for cluster in Cluster.objects.filter(is_enabled=True).order_by("pk"):
        cluster_id = cluster.pk
        shards = _shards_of(cluster, when) if is_sharded else [None]
        for namespace in shards:
            label = cluster_id if namespace is None else [cluster_id, namespace]
            if not _claim(cluster_id, namespace):
                logger.warning(
                    "refresh of cluster %s shard %r skipped: the previous one is "
                    "still queued or running",
                    cluster.name,
                    namespace or "*",
                )
                skipped.append(label)
                continue
            try:
                if is_sharded:
                    # After the caller's transaction, if any: the shard must see it.
                    refresh_cluster.delay_on_commit(cluster_id, now, namespace)
                else:
                    refresh_cluster.delay(cluster_id, now)
            except Exception:
                # Only eager mode runs the refresh here; its run row holds the error.
                # (With a broker, queueing failed: nothing holds the claim any more.)
                logger.exception("refresh of cluster %s failed", cluster_id)
                cache.delete(_claim_key(cluster_id, namespace))
                failed.append(cluster_id)
                continue
            queued.append(label)
    return {"queued": queued, "failed": failed, "skipped": skipped}


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.expire_idle_aggregates")
def expire_idle_aggregates(self: JsonTask, now: str | None = None) -> dict[str, Any]:
    """Drop aggregates idle for 8 days (upstream's hourly garbage collection)."""
    try:
        run = expiry.expire_idle_aggregates(now=_parse_now(now))
    except (OperationalError, InterfaceError) as exc:
        raise self.retry_transient(exc) from exc
    return {"run_id": run.pk, "counts": run.counts}


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.prune_history")
def prune_history(self: JsonTask, now: str | None = None) -> dict[str, Any]:
    """Prune history past its retention, within the run's time budget."""
    try:
        run = retention.prune_history(now=_parse_now(now))
    except (OperationalError, InterfaceError) as exc:
        raise self.retry_transient(exc) from exc
    return {"run_id": run.pk, "counts": run.counts}


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.update_cluster")
def update_cluster(
    self: JsonTask, cluster_id: int, now: str | None = None
) -> dict[str, Any]:
    """One updater cycle of one cluster (docs/updater.md).

    Only the holder of the cluster's updater lease acts (``control.acquire_lock``);
    any other worker returns ``not_leader``. Every write is a compare-and-swap on the
    change's status, so a redelivered task applies nothing twice.
    """
    from recommender.services.actuation.cycle import run_cycle
    from recommender.services.operations.notifications import notify_after_cycle

    cluster = Cluster.objects.filter(pk=cluster_id, is_enabled=True).first()
    if cluster is None:
        return {"cluster_id": cluster_id, "status": "gone"}
    when = _parse_now(now)
    try:
        report = run_cycle(cluster, now=when)
    except TRANSIENT_ERRORS as exc:
        raise self.retry_transient(exc) from exc
    # Digests to the notification channels: never raises, never blocks for long.
    notify_after_cycle(cluster_id=cluster_id, now=when)
    return report.as_dict()


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.update_all_clusters")
def update_all_clusters(self: JsonTask, now: str | None = None) -> dict[str, Any]:
    """Queue the updater cycle of every enabled cluster."""
    queued: list[int] = []
    failed: list[int] = []
    for cluster_id in Cluster.objects.filter(is_enabled=True).values_list(
        "pk", flat=True
    ):
        try:
            update_cluster.delay(cluster_id, now)
        except Exception:
            logger.exception("updater cycle of cluster %s failed", cluster_id)
            failed.append(cluster_id)
            continue
        queued.append(cluster_id)
    return {"queued": queued, "failed": failed}


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.compare_namespace")
def compare_namespace(
    self: JsonTask,
    token: str,
    params: dict[str, Any],
    now: str | None = None,
    who: str | None = None,
) -> dict[str, Any]:
    """A namespace comparison (profile A vs B) in the background, on the heavy queue
    (settings.CELERY_TASK_ROUTES); its progress and answer go to the cache under
    ``token`` (services/replay/namespace_compare.py); ``who``'s job slot is given
    back."""
    namespace_compare.run_stored(token, params, now=_parse_now(now), who=who)
    return {"token": token}


def start_compare_namespace(params: dict[str, Any], *, who: str) -> str:
    """Queue a namespace comparison (``params``: ``compare_namespace``'s keyword
    arguments but ``now``) on the heavy queue, or follow an identical one: its token.
    Throttled and SourceUnavailable as ``start_what_if``: a comparison the broker
    refused holds no slot and is not followed."""
    return heavy_jobs.start_background(
        kind=namespace_compare.KIND,
        params=params,
        who=who,
        new_token=namespace_compare.new_token,
        send=lambda token: compare_namespace.delay(token, params, who=who),
        now_s=time.time(),
    )


def start_what_if(params: dict[str, Any], *, who: str, now: datetime) -> str:
    """Queue a what-if (``params``: ``what_if``'s keyword arguments but ``now``) on
    the heavy queue, or follow an identical one: its token. Throttled past ``who``'s
    budgets; SourceUnavailable while the cache or the broker is away (a job that could
    not be queued is not followed by identical requests and holds no slot:
    ``heavy_jobs.start_background``). The request's mistakes are InvalidInput or
    NotFound here, before anything is queued."""
    check_what_if(**params)
    return heavy_jobs.start_background(
        kind=whatif_jobs.KIND,
        params=params,
        who=who,
        new_token=whatif_jobs.new_token,
        send=lambda token: what_if.delay(token, params, now=now.isoformat(), who=who),
        now_s=time.time(),
    )


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.what_if")
def what_if(
    self: JsonTask,
    token: str,
    params: dict[str, Any],
    now: str | None = None,
    who: str | None = None,
) -> dict[str, Any]:
    """A what-if past the synchronous budget, on the heavy queue; its state and answer
    go to the cache under ``token`` (services/replay/whatif_jobs.py); ``who``'s job
    slot is given back."""
    whatif_jobs.run_stored(token, params, now=_parse_now(now), who=who)
    return {"token": token}

"""The OOM kills of a window: from every place that reports them, each one once.

Two places report OOM kills (upstream's OOM observer reads both):

- the usage source's history (Prometheus' kube-state-metrics series): every kill,
  at the grid time whose scrape saw the container restart after it;
- the pod statuses discovery reads (``lastState.terminated.reason: OOMKilled``): the
  last kill of each container, at its ``finishedAt``, for as long as the pod shows it;
  and the memory evictions of Events, which only discovery sees."""
# Both are merged. A status kill is the same kill as a history observation of its pod's
# container that lies in ``(finishedAt - STEP_S, finishedAt + SAME_KILL_S]`` (the
# restart comes at most kubelet's back-off after the kill, and the scrape and the grid
# add at most two steps); the history's observation is kept, which puts the kill on the
# sample grid. A status kill younger than ``SAME_KILL_S`` waits while the source keeps
# OOM series (its scrape may not have seen the restart yet); one never observed is
# taken once that time is over, so a kill the history missed still counts. When the
# source keeps no OOM history, or its OOM series are absent (Prometheus without
# kube-state-metrics), the status kills are all there is: they are taken at once, and
# the cluster shows that its OOM history is missing (``record_oom_history``).

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter

from recommender.cluster.base import OomKill
from recommender.errors import SourceUnavailable, VpawebError
from recommender.models import Cluster
from recommender.models import OomKill as OomKillRow
from recommender.services.refresh import warm_state
from recommender.services.refresh.discovery import BATCH
from recommender.services.refresh.ingest import STEP_S, Row, Window
from recommender.sources.base import UsageSource

logger = logging.getLogger(__name__)

# How long after a kill the source's history may observe it: kubelet's restart
# back-off is capped at 300 s (MaxContainerBackOff), plus a scrape and the grid step.
SAME_KILL_S = 300.0 + 2 * STEP_S
# Containers per lookup of their stored kills (SQLite binds at most 32,766 values).
KILL_LOOKUP_BATCH = 10_000

__all__ = [
    "SAME_KILL_S",
    "SharedHistory",
    "SharedKillLookup",
    "attach_ooms",
    "kill_key",
    "oom_history",
    "record_oom_history",
]


def oom_history(
    source: UsageSource, *, namespace: str | None, start_s: float, end_s: float
) -> list[OomKill] | None:
    """OOM kills the source remembers in ``(start_s, end_s]``; None if it keeps none,
    or if its OOM series are absent (no kube-state-metrics): nothing to merge with."""
    if not source.keeps_oom_history:
        return None
    if not start_s < end_s:
        return []
    try:
        kills = list(
            source.fetch_oom_kills(
                namespace=namespace, start_s=start_s, end_s=end_s, step_s=STEP_S
            )
        )
        # No kill: an OOM-free window, or a source without OOM series; ask which.
        if not kills and not source.has_oom_series(at_s=end_s):
            return None
        return kills
    except VpawebError:
        raise
    except (OSError, ValueError) as exc:
        raise SourceUnavailable(
            f"OOM history failed for {_iso(start_s)}..{_iso(end_s)}: {exc}"
        ) from exc


class SharedHistory:
    """The source's OOM history read once for the windows of one cycle: the first
    window reads its scope's (``namespace``: the cycle's, None for a whole cluster),
    each window takes the kills of its namespaces after its own start. A window
    that starts earlier than what was read reads again, from its start."""

    def __init__(self, namespace: str | None) -> None:
        self.namespace = namespace
        self._read: tuple[float, float, list[OomKill] | None] | None = None
        # The read kills by namespace, each with its position in the history and
        # its time: a window goes through its namespaces' kills only (a steady
        # cycle's history held 121,599 kills at 100,000 containers, in 8 windows).
        self._by_namespace: dict[str, list[tuple[int, float, OomKill]]] = {}

    def kills(
        self,
        source: UsageSource,
        *,
        namespaces: Collection[str],
        start_s: float,
        end_s: float,
    ) -> list[OomKill] | None:
        """``oom_history`` of a window of ``namespaces`` from ``start_s``, in the
        history's order."""
        read = self._read
        if read is None or start_s < read[0] or end_s != read[1]:
            history = oom_history(
                source, namespace=self.namespace, start_s=start_s, end_s=end_s
            )
            read = self._read = (start_s, end_s, history)
            self._by_namespace = defaultdict(list)
            for position, kill in enumerate(history or ()):
                self._by_namespace[kill.namespace].append(
                    (position, kill.occurred_at.timestamp(), kill)
                )
        if read[2] is None:
            return None
        found = [
            (position, kill)
            for namespace in namespaces
            for position, at_s, kill in self._by_namespace.get(namespace, ())
            if at_s > start_s
        ]
        found.sort(key=itemgetter(0))
        return [kill for _, kill in found]

    def read_kills(self) -> Sequence[OomKill]:
        """The kills read so far (none before the first window's read)."""
        return () if self._read is None else (self._read[2] or ())


def kill_key(kill: OomKill) -> warm_state.KillKey:
    """What tells one reported kill from another."""
    return (kill.namespace, kill.pod, kill.container, kill.occurred_at)


def attach_ooms(
    window: Window,
    *,
    snapshot_kills: Sequence[OomKill],
    history: Sequence[OomKill] | None,
    lookup: SharedKillLookup | None = None,
) -> None:
    """Give each row the kills up to ``end_s`` not stored yet (the history's and the
    pod statuses', merged: module docstring), and each rebuilt row its stored kills
    of its window: each enters the engine once. With ``keep_state``, the kills the
    scope's last window knew stored are not looked up again. ``lookup``: the stored
    kills as the cycle's windows read them once (``SharedKillLookup``)."""
    _attach_stored_ooms(window)
    known = known_stored(window)
    # (row, kill, is the history's observation)
    matched: list[tuple[Row, OomKill, bool]] = []
    reported = [(k, True) for k in history or ()] + [(k, False) for k in snapshot_kills]
    end_s = window.settled_end_s
    for kill, is_observation in reported:
        if kill.occurred_at.timestamp() > end_s:
            continue  # stored now but fed in a later window, it would be lost
        key = (kill.namespace, kill.pod, kill.container, kill.occurred_at)  # kill_key
        if key in known:
            window.stored_kills.add(key)
            continue
        row = window.row_of(
            kill.namespace,
            kill.pod,
            kill.container,
            kind=kill.workload_kind,
            name=kill.workload_name,
        )
        if row is not None:
            matched.append((row, kill, is_observation))
    if not matched:
        return
    oldest = min(kill.occurred_at for _, kill, _ in matched)
    # The stored kills of the matched containers only: not the whole cluster's, which
    # every chunk of a first contact (and every shard beside it) would read again.
    ids = {row.container.pk for row, _, _ in matched}
    since = oldest - timedelta(seconds=STEP_S)
    stored = (
        read_stored_kills(ids, since=since)
        if lookup is None
        else lookup.stored(window, ids, since=since)
    )
    # Where the history saw each pod's container restart after a kill: stored, or
    # reported in this window.
    observed: dict[tuple[int, str], list[datetime]] = defaultdict(list)
    for (container_id, pod, at), is_eviction in stored.items():
        if not is_eviction:
            observed[(container_id, pod)].append(at)
    for row, kill, is_observation in matched:
        if is_observation:
            observed[(row.container.pk, kill.pod)].append(kill.occurred_at)
    new: set[tuple[int, str, datetime]] = set()
    for row, kill, is_observation in matched:
        row_key = (row.container.pk, kill.pod, kill.occurred_at)
        if row_key in stored:
            window.stored_kills.add(kill_key(kill))
            continue
        if history is not None and not is_observation and not kill.is_eviction:
            times = observed[(row.container.pk, kill.pod)]
            if _is_observed(kill.occurred_at, times):
                # The history's observation of this kill stands for it.
                window.stored_kills.add(kill_key(kill))
                window.counts["oom_kills_merged"] += 1
                continue
            if kill.occurred_at.timestamp() > window.settled_end_s - SAME_KILL_S:
                window.counts["oom_kills_waiting"] += 1
                continue  # the source may observe it in a later window
        if row_key not in new:
            new.add(row_key)  # the snapshot may report one kill twice
            row.ooms.append(kill)
            window.counts["oom_kills_new"] += 1


def known_stored(window: Window) -> frozenset[warm_state.KillKey]:
    """The kills the window's scope knew stored (none without kept state)."""
    return warm_state.stored_kills(window.scope) if window.keep_state else frozenset()


def read_stored_kills(
    ids: Collection[int], *, since: datetime
) -> dict[tuple[int, str, datetime], bool]:
    """The stored kills of containers ``ids`` after ``since``: whether each is an
    eviction, by (container, pod, time). ``KILL_LOOKUP_BATCH`` containers a
    statement."""
    ordered = sorted(ids)
    stored: dict[tuple[int, str, datetime], bool] = {}
    for start in range(0, len(ordered), KILL_LOOKUP_BATCH):
        stored.update(
            ((c, p, at), is_eviction)
            for c, p, at, is_eviction in OomKillRow.objects.filter(
                container_id__in=ordered[start : start + KILL_LOOKUP_BATCH],
                occurred_at__gt=since,
            ).values_list("container_id", "pod", "occurred_at", "is_eviction")
        )
    return stored


class SharedKillLookup:
    """The stored kills the windows of one cycle look up, read once.

    The first window that looks any up reads those of every container a kill not
    known stored may be of, its own and the later windows' (``candidates``: their
    container pks and the oldest of those kills), in one statement; a later window
    whose containers or times that read does not cover reads its own
    (``read_stored_kills``), so the answer is always what it would read alone. A process
    that knows no kill stored (a cold one: every kill the cluster reports, days of
    them, is to look up), or a cycle with more such containers than one statement
    takes, reads window by window (``candidates`` gives None): what it holds stays
    one window's (a cold cycle's one read held 30 MB more at 100,000 containers)."""

    def __init__(
        self,
        candidates: Callable[[Window], tuple[set[int], datetime | None] | None],
    ) -> None:
        self._candidates = candidates
        self._read: (
            tuple[frozenset[int], datetime, dict[tuple[int, str, datetime], bool]]
            | None
        ) = None
        self._tried = False

    def stored(
        self, window: Window, ids: Collection[int], *, since: datetime
    ) -> dict[tuple[int, str, datetime], bool]:
        """``read_stored_kills(ids, since=since)``, from the cycle's one read when it
        covers them."""
        if not self._tried:
            self._tried = True
            found = self._candidates(window)
            more, oldest = found if found is not None else (set(), None)
            every = set(ids) | more
            if found is not None and len(every) <= KILL_LOOKUP_BATCH:
                start = since if oldest is None else min(since, oldest)
                self._read = (
                    frozenset(every),
                    start,
                    read_stored_kills(every, since=start),
                )
        read = self._read
        if read is None or read[1] > since or not read[0].issuperset(ids):
            return read_stored_kills(ids, since=since)
        wanted = set(ids)
        return {
            key: is_eviction
            for key, is_eviction in read[2].items()
            if key[0] in wanted and key[2] > since
        }


def _is_observed(killed_at: datetime, observations: Sequence[datetime]) -> bool:
    """Whether one of the history's observations is of a kill at ``killed_at``."""
    first = killed_at - timedelta(seconds=STEP_S)
    last = killed_at + timedelta(seconds=SAME_KILL_S)
    return any(first < at <= last for at in observations)


def _attach_stored_ooms(window: Window) -> None:
    """Stored kills in ``(row.start_s, end_s]`` of each rebuilt row, in time order.

    A rebuilt row re-reads its usage from history, but the source's kills of that
    history are stored already and so skipped as not new; without this the memory
    recommendation would lose its OOM bump after a profile edit.
    """
    rebuilt = {
        row.container.pk: row
        for row in window.rows_by_container.values()
        if row.is_rebuilt
    }
    if not rebuilt:
        return
    oldest = datetime.fromtimestamp(min(r.start_s for r in rebuilt.values()), tz=UTC)
    newest = datetime.fromtimestamp(window.settled_end_s, tz=UTC)
    ids = list(rebuilt)
    for start in range(0, len(ids), BATCH):
        stored = OomKillRow.objects.filter(
            container_id__in=ids[start : start + BATCH],
            occurred_at__gt=oldest,
            occurred_at__lte=newest,
        ).order_by("occurred_at", "pk")
        for kill in stored:
            row = rebuilt[kill.container_id]
            if kill.occurred_at.timestamp() <= row.start_s:
                continue
            row.ooms.append(
                OomKill(
                    namespace=row.container.namespace,
                    pod=kill.pod,
                    container=row.container.name,
                    occurred_at=kill.occurred_at,
                    memory_request_bytes=kill.memory_request_bytes,
                    is_eviction=kill.is_eviction,
                )
            )
            window.counts["oom_kills_refed"] += 1


def record_oom_history(cluster: Cluster, *, is_missing: bool, now: datetime) -> None:
    """Remember on the cluster since when its source has no OOM series (None: it has
    them, or keeps none by design); logged once when that changes."""
    was_missing = cluster.oom_history_missing_since is not None
    if is_missing == was_missing:
        return
    since = now if is_missing else None
    Cluster.objects.filter(pk=cluster.pk).update(oom_history_missing_since=since)
    cluster.oom_history_missing_since = since
    if is_missing:
        logger.warning(
            "cluster %s: the usage source has no OOM series (kube-state-metrics); "
            "OOM kills come from pod statuses only",
            cluster.name,
        )
    else:
        logger.info("cluster %s: the usage source's OOM series are back", cluster.name)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()

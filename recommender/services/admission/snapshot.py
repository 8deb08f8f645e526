"""What the admission webhook needs to know, loaded once, looked up once per pod.

The webhook must answer in milliseconds and must not depend on the database being up at
the moment a pod is created. So it never queries the database on its hot path: an
``AdmissionSnapshot`` holds, for one cluster, every active workload keyed by
``(namespace, kind, name)`` with its mode, whether vpaweb may act on it, its container
policies and the latest recommendation of each container, plus the namespaces'
LimitRanges and the kill switch. One dict lookup per pod finds everything; the capping
itself runs on the pod as received (``decision.py``). A reload builds a new snapshot
and swaps it in whole: a request sees the old one or the new one, never a mix."""

# ``SnapshotHolder`` keeps the current snapshot of a cluster in the process. It reloads
# after each refresh cycle, policy change and kill switch (the generation,
# ``generation.py``) and every ``WEBHOOK_RELOAD_S`` regardless; a snapshot older than
# ``WEBHOOK_MAX_SNAPSHOT_AGE_S`` (the database unreachable that long) is not used: pods
# are admitted unchanged.
#
# A reload is INCREMENTAL: the writers journal which workloads they changed
# (``AdmissionChange``, in the same transaction as the change), and the holder reloads
# only the workloads journaled since its last reload (``JournalMark``: the highest id
# read, and the ids below it not committed yet when it read, re-read until
# ``HOLE_WAIT_S``), plus the LimitRanges and the kill switch (a row per namespace, one
# row). A FULL rebuild runs at the first load, on ``invalidate``, when more than
# ``FULL_REBUILD_SHARE`` of the fleet changed, when the journal may have been pruned
# past the mark, and every ``FULL_REBUILD_EVERY_S``: the safety net for a change no
# service journaled (SQL, the shell). Either way the work runs in steps of ``CHUNK``
# workloads (when nothing waits on it: ``UNPACED_CHUNK``, and ``UNPACED_RELOAD_CHUNK``
# changed ones); paced (the webhook server's background thread), it sleeps after each
# step three times as long as the step took and hands the GIL over every 0.1 ms while
# it runs, so request threads get the GIL at least three quarters of the time and do
# not wait a millisecond behind the reload each time they need it back.
from __future__ import annotations

import logging
import math
import sys
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import FilteredRelation, Max, Min, Q
from django.utils import timezone

from recommender.cluster.base import WorkloadKey
from recommender.engine.capping import LimitRangeItem
from recommender.models import (
    AdmissionChange,
    Cluster,
    NamespaceLimitRange,
    Policy,
    Workload,
)
from recommender.models.actuation import kill_switch_reason
from recommender.services.advice.advise import AdviceInputs, load_advice_inputs
from recommender.services.advice.limits import item_from_dict
from recommender.services.readmodels import webhook_acks as acks
from recommender.services.readmodels.generation import JOURNAL_KEEP, shared_generation
from recommender.services.readmodels.node_pools import node_allocatables
from recommender.services.readmodels.reverts import reverts_of

logger = logging.getLogger(__name__)

# Workloads per step of a paced reload (one query each, the advice inputs joined):
# the webhook's background thread hands the interpreter to requests between steps.
CHUNK = 100
# Workloads per step of a reload nothing waits on (the simulated cluster's admission
# inside a refresh): a few statements for a whole fleet.
UNPACED_CHUNK = 5000
# Changed workloads per step of an incremental reload nothing waits on, read by id
# (bound parameters: under SQLite's 32,766): more than a quarter of a fleet of
# 65,000 workloads would be a full rebuild, so one statement.
UNPACED_RELOAD_CHUNK = 20_000
# A change set larger than this share of the fleet (and than FULL_REBUILD_MIN) is a
# full rebuild.
FULL_REBUILD_SHARE = 0.25
FULL_REBUILD_MIN = 500
# A full rebuild at least this often: the safety net under the journal.
FULL_REBUILD_EVERY_S = 900.0
# Journal ids not visible when read are re-read this long (an open transaction).
HOLE_WAIT_S = 600.0
# A paced reload pauses this many times as long as each step took (at most
# MAX_PAUSE_S): it has the interpreter at most a quarter of the time.
PAUSE_FACTOR = 3.0
MAX_PAUSE_S = 0.5
# While a paced reload runs, the interpreter hands the GIL to a waiting thread after
# this long (the webhook server's own interval is 1 ms): a request thread back from a
# socket read waits at most this for the reloading thread, a few dozen times a request.
RELOAD_SWITCH_INTERVAL_S = 0.0001
# What the snapshot reads of each workload row (tuples, not model objects: at 100,000
# containers whole rows cost seconds).
_COLUMNS = (
    "pk",
    "namespace",
    "kind",
    "name",
    "last_seen_at",
    "policy__pk",
    "policy__mode",
    "policy__source",
    "policy__vpa_object",
    "policy__vpa_object_mode",
)

# The same, the policy read through the page's bounded join (``_page_after``).
_PAGE_COLUMNS = tuple(c.replace("policy__", "page_policy__") for c in _COLUMNS)

LimitRangePair = tuple[LimitRangeItem | None, LimitRangeItem | None]


@dataclass(frozen=True)
class WorkloadEntry:
    """One workload as the webhook sees it."""

    workload_id: int
    namespace: str
    kind: str
    name: str
    mode: str  # Policy.Mode value (Off when the workload has no policy row)
    is_actionable: bool
    why_not: str  # why vpaweb does not act on it ("" when it does)
    last_seen_at: datetime
    inputs: AdviceInputs | None = None  # for actionable workloads only
    # Reverts that hold (services/actuation/revert.py): per container, the band of
    # the reverted change's requests and the resources admitted instead.
    reverts: Mapping[str, tuple[dict[str, int], dict[str, Any]]] = field(
        default_factory=dict
    )

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def key(self) -> WorkloadKey:
        """(namespace, kind, name): the snapshot's key."""
        return (self.namespace, self.kind, self.name)

    @classmethod
    def of(cls, workload: Workload, policy: Policy | None) -> WorkloadEntry:
        """The entry of ``workload`` (its policy as loaded), without advice inputs."""
        ok, why_not = policy_is_actionable(policy)
        return cls(
            workload_id=workload.pk,
            namespace=workload.namespace,
            kind=workload.kind,
            name=workload.name,
            mode=policy.mode if policy is not None else Policy.Mode.OFF,
            is_actionable=ok,
            why_not=why_not,
            last_seen_at=workload.last_seen_at,
        )


@dataclass(frozen=True)
class AdmissionSnapshot:
    """Everything the webhook reads for one cluster, as of ``loaded_at``."""

    cluster_name: str
    loaded_at: datetime
    workloads: Mapping[WorkloadKey, WorkloadEntry]
    # namespace -> (combined Container item, combined Pod item)
    limit_ranges: Mapping[str, LimitRangePair]
    load_seconds: float = 0.0
    # Why every pod is left as submitted (``kill_switch_reason``); "" when none is on.
    kill_switch: str = ""
    # workload id -> its key: the entry a journaled change replaces.
    keys_by_id: Mapping[int, WorkloadKey] = field(default_factory=dict)
    # The CPU time the loading thread spent, and the workloads an incremental reload
    # read (None: a full rebuild).
    cpu_seconds: float = 0.0
    reloaded: int | None = None
    # The cluster's largest nodes (AdviceInputs.node_allocatables), read once a load.
    node_allocatables: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class JournalMark:
    """How far a holder read the journal: every id up to ``after`` except ``holes``,
    ranges of ids not visible then (a transaction still open, or rolled back), each
    with the monotonic time it was first missed."""

    after: int = 0
    holes: tuple[tuple[int, int, float], ...] = ()

    def unread(self) -> Q:
        """The journal rows not read yet."""
        query = Q(pk__gt=self.after)
        for low, high, _ in self.holes:
            query |= Q(pk__gte=low, pk__lte=high)
        return query

    def advanced(self, ids: Iterable[int], *, now_s: float) -> JournalMark:
        """The mark after reading ``ids`` (rows of ``unread``) at ``now_s``."""
        found = sorted(set(ids))
        holes = []
        for low, high, since in self.holes:
            if now_s - since > HOLE_WAIT_S:
                continue  # rolled back (or very late: the full rebuild covers it)
            start = low
            for pk in found[bisect_left(found, low) : bisect_right(found, high)]:
                if pk > start:
                    holes.append((start, pk - 1, since))
                start = pk + 1
            if start <= high:
                holes.append((start, high, since))
        top = self.after
        for pk in found[bisect_right(found, self.after) :]:
            if pk > top + 1:
                holes.append((top + 1, pk - 1, now_s))
            top = pk
        return JournalMark(after=top, holes=tuple(holes))


def policy_is_actionable(policy: Policy | None) -> tuple[bool, str]:
    """``Policy.is_actionable`` (the one actuation predicate), and why not in words."""
    if policy is not None and policy.is_actionable:
        return True, ""
    if policy is not None and policy.is_mirrored:
        return False, (
            f"its policy mirrors an upstream {policy.managed_by} (its own admission "
            "controller acts on it, not vpaweb)"
        )
    return False, "its mode is Off"


def _judged(policy: list[Any] | None) -> tuple[str, bool, str]:
    """(mode, actionable, why not) of a policy's (mode, source, vpa_object,
    vpa_object_mode), or of a workload without a policy (None): ``WorkloadEntry.of``'s
    answer, from columns."""
    row = (
        None
        if policy is None
        else Policy(
            mode=policy[0],
            source=policy[1],
            vpa_object=policy[2],
            vpa_object_mode=policy[3],
        )
    )
    ok, why_not = policy_is_actionable(row)
    return (row.mode if row is not None else Policy.Mode.OFF), ok, why_not


def _limit_ranges(cluster_id: int) -> dict[str, LimitRangePair]:
    """The cluster's LimitRanges by namespace (a row per namespace that has some)."""
    return {
        row.namespace: (
            item_from_dict(row.container_item),
            item_from_dict(row.pod_item),
        )
        for row in NamespaceLimitRange.objects.filter(cluster_id=cluster_id)
    }


def _entries(
    rows: Sequence[tuple[Any, ...]],
    *,
    cluster_id: int,
    limit_ranges: Mapping[str, LimitRangePair],
    nodes: tuple[tuple[int, int], ...] | None,
) -> list[WorkloadEntry]:
    """The entries of workload rows (``_COLUMNS``), with the advice inputs of the
    actionable ones: read the one way advice reads them, the static coefficient
    dropped (the webhook leaves a container without a recommendation as it is), the
    LimitRanges those of the snapshot."""
    judged: dict[tuple[Any, ...], tuple[str, bool, str]] = {}
    entries = []
    for pk, namespace, kind, name, last_seen_at, policy_pk, *policy in rows:
        # The policy judged once per distinct (mode, source, VPA object) by the one
        # predicate, on an unsaved Policy.
        key = (policy_pk is None, *policy)
        if key not in judged:
            judged[key] = _judged(None if policy_pk is None else policy)
        mode, ok, why_not = judged[key]
        entries.append(
            WorkloadEntry(
                workload_id=pk,
                namespace=namespace,
                kind=kind,
                name=name,
                mode=mode,
                is_actionable=ok,
                why_not=why_not,
                last_seen_at=last_seen_at,
            )
        )
    actionable = [e.key for e in entries if e.is_actionable]
    if not actionable:
        return entries
    inputs = load_advice_inputs(cluster_id=cluster_id, keys=actionable)
    reverts = reverts_of(e.workload_id for e in entries if e.is_actionable)
    return [
        replace(
            _with_inputs(e, inputs[e.key], limit_ranges, nodes),
            reverts=reverts.get(e.workload_id, {}),
        )
        if e.is_actionable
        else e
        for e in entries
    ]


def _with_inputs(
    entry: WorkloadEntry,
    inputs: AdviceInputs,
    limit_ranges: Mapping[str, LimitRangePair],
    nodes: tuple[tuple[int, int], ...] | None,
) -> WorkloadEntry:
    container_range, pod_range = limit_ranges.get(entry.namespace, (None, None))
    return replace(
        entry,
        inputs=replace(
            inputs,
            coefficient=None,
            container_range=container_range,
            pod_range=pod_range,
            node_allocatables=nodes,
        ),
    )


def _never_pause() -> None:
    return None


def _page_after(cluster: Cluster, last: int, page: int) -> Iterable[tuple[Any, ...]]:
    """The next ``page`` active workloads of ``cluster`` after id ``last``
    (``_COLUMNS``), by keyset. The policy's side of the join carries the same bound:
    a merge join on the policy's workload index then starts at ``last`` instead of
    the index's first row, so every page reads about as many rows as it returns
    wherever it is."""
    return (
        Workload.objects.filter(cluster=cluster, is_active=True, pk__gt=last)
        .annotate(
            page_policy=FilteredRelation(
                "policy", condition=Q(policy__workload_id__gt=last)
            )
        )
        .order_by("pk")
        .values_list(*_PAGE_COLUMNS)[:page]
    )


def load_snapshot(
    *,
    cluster: Cluster,
    pause: Callable[[], None] = _never_pause,
    page: int | None = None,
) -> AdmissionSnapshot:
    """Read one cluster's webhook inputs from the database: the full rebuild, in steps
    of ``page`` workloads (``CHUNK`` by default; a constant number of queries each),
    ``pause()`` after each."""
    page = CHUNK if page is None else page
    started, cpu_started = time.perf_counter(), time.thread_time()
    kill_switch = kill_switch_reason() or ""
    limit_ranges = _limit_ranges(cluster.pk)
    nodes = node_allocatables(cluster_id=cluster.pk)
    workloads: dict[WorkloadKey, WorkloadEntry] = {}
    keys_by_id: dict[int, WorkloadKey] = {}
    last = 0
    while rows := list(_page_after(cluster, last, page)):
        last = rows[-1][0]
        _add_entries(rows, cluster, (limit_ranges, nodes), workloads, keys_by_id)
        pause()
    return AdmissionSnapshot(
        cluster_name=cluster.name,
        loaded_at=timezone.now(),
        workloads=workloads,
        limit_ranges=limit_ranges,
        load_seconds=time.perf_counter() - started,
        kill_switch=kill_switch,
        keys_by_id=keys_by_id,
        cpu_seconds=time.thread_time() - cpu_started,
        node_allocatables=nodes,
    )


def _add_entries(
    rows: list[tuple[Any, ...]],
    cluster: Cluster,
    shared: tuple[Mapping[str, LimitRangePair], tuple[tuple[int, int], ...] | None],
    workloads: dict[WorkloadKey, WorkloadEntry],
    keys_by_id: dict[int, WorkloadKey],
) -> None:
    """Put the entries of ``rows`` (``_COLUMNS``) into a snapshot being built, with
    the inputs every workload shares (the LimitRanges, the largest nodes)."""
    limit_ranges, nodes = shared
    for entry in _entries(
        rows, cluster_id=cluster.pk, limit_ranges=limit_ranges, nodes=nodes
    ):
        workloads[entry.key] = entry
        keys_by_id[entry.workload_id] = entry.key


def reload_snapshot(
    previous: AdmissionSnapshot,
    *,
    cluster: Cluster,
    workload_ids: Iterable[int],
    pause: Callable[[], None] = _never_pause,
    page: int | None = None,
) -> AdmissionSnapshot:
    """``previous`` with the entries of ``workload_ids`` read again (gone when the
    workload is inactive or deleted), the LimitRanges and the kill switch read again:
    the incremental reload, in steps of ``page`` workloads (``CHUNK`` by default). A
    new snapshot; ``previous`` is not changed."""
    started, cpu_started = time.perf_counter(), time.thread_time()
    kill_switch = kill_switch_reason() or ""
    limit_ranges = _limit_ranges(cluster.pk)
    nodes = node_allocatables(cluster_id=cluster.pk)
    workloads = dict(previous.workloads)
    keys_by_id = dict(previous.keys_by_id)
    moved = {
        namespace
        for namespace in limit_ranges.keys() | previous.limit_ranges.keys()
        if limit_ranges.get(namespace) != previous.limit_ranges.get(namespace)
    }
    nodes_moved = nodes != previous.node_allocatables
    if moved or nodes_moved:  # the cached inputs follow what they share
        for key, entry in list(workloads.items()):
            if entry.inputs is not None and (nodes_moved or entry.namespace in moved):
                workloads[key] = _with_inputs(entry, entry.inputs, limit_ranges, nodes)
    ids = sorted(set(workload_ids))
    page = CHUNK if page is None else page
    for start in range(0, len(ids), page):
        chunk = ids[start : start + page]
        for pk in chunk:
            held = keys_by_id.get(pk)
            if held is not None:
                del keys_by_id[pk]
                if workloads[held].workload_id == pk:
                    del workloads[held]
        rows = list(
            Workload.objects.filter(cluster=cluster, is_active=True, pk__in=chunk)
            .order_by()
            .values_list(*_COLUMNS)
        )
        _add_entries(rows, cluster, (limit_ranges, nodes), workloads, keys_by_id)
        pause()
    return AdmissionSnapshot(
        cluster_name=cluster.name,
        loaded_at=timezone.now(),
        workloads=workloads,
        limit_ranges=limit_ranges,
        load_seconds=time.perf_counter() - started,
        kill_switch=kill_switch,
        keys_by_id=keys_by_id,
        cpu_seconds=time.thread_time() - cpu_started,
        reloaded=len(ids),
        node_allocatables=nodes,
    )


def _first_mark() -> JournalMark:
    """Where a holder starts reading the journal: before the rows of the last
    ``HOLE_WAIT_S`` (their gaps may be open transactions), else after the last row."""
    recent = AdmissionChange.objects.filter(
        created_at__gte=timezone.now() - timedelta(seconds=HOLE_WAIT_S)
    ).aggregate(low=Min("pk"))["low"]
    if recent is not None:
        return JournalMark(after=recent - 1)
    return JournalMark(
        after=AdmissionChange.objects.aggregate(top=Max("pk"))["top"] or 0
    )


class _Pacer:
    """A pause after each step of a reload, ``PAUSE_FACTOR`` times as long as the
    step took (at most ``MAX_PAUSE_S``): request threads get the GIL at least three
    quarters of the time; and, while it is entered, a GIL handed over every
    ``RELOAD_SWITCH_INTERVAL_S``."""

    def __init__(self, *, paced: bool) -> None:
        self.paced = paced
        self._since = time.perf_counter()
        self._interval = sys.getswitchinterval()

    def __enter__(self) -> _Pacer:
        if self.paced:
            self._interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._interval, RELOAD_SWITCH_INTERVAL_S))
        self._since = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.paced:
            sys.setswitchinterval(self._interval)

    def __call__(self) -> None:
        if self.paced:
            spent = time.perf_counter() - self._since
            time.sleep(min(spent * PAUSE_FACTOR, MAX_PAUSE_S))
        self._since = time.perf_counter()


class SnapshotHolder:
    """The current snapshot of one cluster in this process (thread-safe)."""

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name
        self._snapshot: AdmissionSnapshot | None = None
        self._generation: tuple[int, int | None] | None = None
        self._stale = True  # the next reload is a full rebuild
        self._lock = threading.Lock()
        self._mark: JournalMark | None = None
        self._journal_read_at = 0.0  # monotonic
        self._rebuilt_at = 0.0  # monotonic
        self.last_error = ""
        self.cluster_id: int | None = None  # known once loaded
        # What the last acknowledgement stored (webhook_acks.py), and when (monotonic).
        self.acknowledged: tuple[acks.Loaded | None, float] = (None, -math.inf)
        self.ack_error = ""

    def current(self) -> AdmissionSnapshot | None:
        """The snapshot as loaded (None before the first successful load)."""
        return self._snapshot

    def loaded(self) -> acks.Loaded | None:
        """How far the current snapshot has read the journal (None before the first
        load): what this process acknowledges to the updater."""
        snapshot, mark = self._snapshot, self._mark
        if snapshot is None or mark is None:
            return None
        return acks.Loaded(
            after=mark.after,
            holes=tuple((low, high) for low, high, _ in mark.holes),
            loaded_at=snapshot.loaded_at,
        )

    def acknowledge(self, *, now: datetime) -> None:
        """Store what this process has loaded (``webhook_acks.acknowledge``) when it
        moved, or as a heartbeat every ``webhook_acks.HEARTBEAT_S``."""
        loaded, cluster_id = self.loaded(), self.cluster_id
        if loaded is None or cluster_id is None:
            return
        before, at_s = self.acknowledged
        now_s = time.monotonic()
        if loaded == before and now_s - at_s < acks.HEARTBEAT_S:
            return
        try:
            acks.acknowledge(cluster_id=cluster_id, loaded=loaded, now=now)
        except Exception as exc:
            # Tried again next tick; logged once per new error (admission is not
            # affected: the updater stops waiting for a process it does not see).
            error = f"{type(exc).__name__}: {exc}"
            if error != self.ack_error:
                self.ack_error = error
                logger.warning(
                    "admission cache of cluster %s: acknowledgement not stored: %s",
                    self.cluster_name,
                    error,
                )
            return
        self.acknowledged = (loaded, now_s)
        self.ack_error = ""

    def invalidate(self) -> None:
        """Rebuild the whole snapshot on the next ``refresh_if_needed``."""
        self._stale = True

    def refresh(self, *, paced: bool = False) -> AdmissionSnapshot:
        """Load now from the database, incrementally when the journal allows; on
        failure keep the previous snapshot. ``paced``: pause between steps (a
        background thread beside request threads)."""
        with self._lock:
            generation = shared_generation()
            cluster = Cluster.objects.get(name=self.cluster_name)
            now_s = time.monotonic()
            previous = self._snapshot
            mark = self._mark
            if mark is None or now_s - self._journal_read_at > (
                JOURNAL_KEEP.total_seconds() / 2
            ):
                mark, fresh_mark = _first_mark(), True
            else:
                fresh_mark = False
            # The journal first: a change committed while the data is read is read
            # again next time (reading a workload twice is harmless).
            rows = list(
                AdmissionChange.objects.filter(mark.unread())
                .order_by()
                .values_list("pk", "cluster_id", "workload_id")
            )
            changed = {w for _, c, w in rows if c == cluster.pk}
            full = (
                previous is None
                or self._stale
                or fresh_mark
                or now_s - self._rebuilt_at >= FULL_REBUILD_EVERY_S
                or len(changed)
                > max(FULL_REBUILD_MIN, FULL_REBUILD_SHARE * len(previous.workloads))
            )
            page = None if paced else UNPACED_CHUNK
            with _Pacer(paced=paced and previous is not None) as pause:
                if full or previous is None:
                    snapshot = load_snapshot(cluster=cluster, pause=pause, page=page)
                    self._rebuilt_at = now_s
                else:
                    snapshot = reload_snapshot(
                        previous,
                        cluster=cluster,
                        workload_ids=changed,
                        pause=pause,
                        page=None if paced else UNPACED_RELOAD_CHUNK,
                    )
            self._snapshot, self._generation, self._stale = snapshot, generation, False
            self.cluster_id = cluster.pk
            self._mark = mark.advanced([pk for pk, _, _ in rows], now_s=now_s)
            self._journal_read_at = now_s
            self.last_error = ""
            logger.info(
                "admission cache of cluster %s %s: %d workloads (%d actionable) in "
                "%.3f s, %.3f s of CPU",
                self.cluster_name,
                "rebuilt"
                if snapshot.reloaded is None
                else f"reloaded {snapshot.reloaded} changed workloads",
                len(snapshot.workloads),
                sum(1 for e in snapshot.workloads.values() if e.is_actionable),
                snapshot.load_seconds,
                snapshot.cpu_seconds,
            )
            return snapshot

    def refresh_if_needed(self, *, paced: bool = False) -> None:
        """Reload when invalidated, when the generation moved, or when due."""
        snapshot = self._snapshot
        due = (
            snapshot is None
            or self._stale
            or (timezone.now() - snapshot.loaded_at).total_seconds()
            >= settings.WEBHOOK_RELOAD_S
        )
        try:
            if not due and shared_generation() == self._generation:
                return
            self.refresh(paced=paced)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if error == self.last_error:
                return  # retried every second: logged once per new error
            self.last_error = error
            logger.warning(
                "admission cache of cluster %s not reloaded: %s",
                self.cluster_name,
                self.last_error,
            )


_HOLDERS: dict[str, SnapshotHolder] = {}
_HOLDERS_LOCK = threading.Lock()


def holder_for(cluster_name: str) -> SnapshotHolder:
    """The process-wide holder of one cluster's snapshot."""
    with _HOLDERS_LOCK:
        holder = _HOLDERS.get(cluster_name)
        if holder is None:
            holder = _HOLDERS[cluster_name] = SnapshotHolder(cluster_name)
        return holder


def forget_holders() -> None:
    """Drop every holder (tests)."""
    with _HOLDERS_LOCK:
        _HOLDERS.clear()

"""The dashboard's overview: fleet, cluster and namespace totals, savings, risk, the
confidence of recommendations and the latest runs, in a constant number of queries:
the sums over every container come from the namespaces' totals the refresh stores
(namespace_totals.py).

Risk, waste and savings follow the definitions in recommender/models/provisioning.py.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Prefetch

from recommender.models import (
    Cluster,
    Container,
    NodePool,
    OomKill,
    RefreshRun,
    Workload,
)
from recommender.models.provisioning import (
    container_facts,
    pods_billed,
    risk_score,
    workload_facts,
)
from recommender.services.readmodels import (
    namespace_savings,
    namespace_totals,
    workload_totals,
)
from recommender.services.readmodels.namespace_totals import (
    CONFIDENCE_BANDS,
    NamespaceFacts,
)
from recommender.services.readmodels.node_pools import (
    PoolTotals,
    node_pools,
    pool_totals,
)
from recommender.services.readmodels.provisioning import (
    RECENT_OOM_WINDOW,
    PriceMix,
    Prices,
    no_recommendation_reason,
    price_mix,
    risk_rules,
)
from recommender.services.readmodels.realized import realized_savings
from recommender.services.readmodels.rollups import SUMMED, Totals

# --- The overview ---------------------------------------------------------------------


@dataclass
class Overview:
    """Everything the overview page shows."""

    fleet: Totals
    by_cluster: list[Totals]
    by_namespace: list[Totals]
    # Workloads at risk (recent OOM kills or a material shortfall), riskiest first.
    at_risk_count: int
    at_risk: list[Workload]
    missing_requests_count: int
    recent_ooms: list[OomKill]
    recent_oom_count: int
    no_recommendation_count: int
    no_recommendation: list[dict[str, Any]]
    confidence: dict[str, int]
    runs: list[RefreshRun]
    is_refreshing: bool
    prices: Prices
    workload_count: int = 0
    # What the savings are priced at, per price source (readmodels/provisioning.py).
    price_mix: Sequence[PriceMix] = ()
    # "cluster: VPA object X targets Deployment/ghost, which does not exist".
    vpa_warnings: list[str] = field(default_factory=list)
    # (cluster name, since): clusters whose usage source has no OOM series.
    oom_history_missing: list[tuple[str, datetime]] = field(default_factory=list)
    # Each node pool's nodes needed now and at the recommendations (node_pools.py).
    node_pools: Sequence[NodePool] = ()
    node_pool_totals: PoolTotals | None = None


@dataclass
class _FleetTotals:
    """What the namespaces' totals give the overview."""

    fleet: Totals
    by_cluster: list[Totals]
    by_namespace: list[Totals]
    # Latest recommendations per confidence band (and "unknown").
    confidence: dict[str, int]


def _fleet_totals(
    facts: list[NamespaceFacts], *, savings: Mapping[tuple[str, str], float]
) -> _FleetTotals:
    """Totals of the fleet, per cluster and per (cluster, namespace) with containers,
    and the confidence bands of the latest recommendations, from the namespaces'
    totals (ordered by cluster and namespace); each namespace's ``savings`` are its
    workloads' (namespace_savings.py)."""
    fleet = Totals()
    confidence = dict.fromkeys([name for name, _ in CONFIDENCE_BANDS], 0)
    recommendations = 0
    clusters: dict[str, Totals] = {}
    namespaces = []
    for row in facts:
        if not row.containers:
            continue  # workloads without a container vpaweb recommends for
        group = Totals(
            cluster=row.cluster,
            namespace=row.namespace,
            **{name: getattr(row, name) for name in SUMMED},
        )
        group.savings = savings.get((row.cluster, row.namespace), 0.0)
        namespaces.append(group)
        clusters.setdefault(group.cluster, Totals(cluster=group.cluster)).add(group)
        fleet.add(group)
        recommendations += row.recommendations
        for name in confidence:
            confidence[name] += getattr(row, f"confidence_{name}")
    confidence["unknown"] = recommendations - sum(confidence.values())
    return _FleetTotals(fleet, list(clusters.values()), namespaces, confidence)


def _at_risk(
    *,
    now: datetime,
    prices: Prices,
    limit: int,
    namespaces: Sequence[NamespaceFacts],
    stored_clusters: Collection[int],
    complete: bool,
    known_savings: Mapping[int, float],
) -> tuple[int, list[Workload], int]:
    """How many shown workloads are at risk, the ``limit`` riskiest (OOM kills, then
    the largest shortfall; then the largest savings) with their facts, and the OOM
    kills of the last RECENT_OOM_WINDOW: three to five small queries (``namespaces``:
    their totals, read without the shortfalls of ``stored_clusters``' rows;
    ``complete``: whether every enabled cluster's workload totals are stored;
    ``known_savings``: the savings the namespaces' sums read of single workloads,
    the OOM-killed ones).

    The risk score of every workload comes from the few containers that carry one:
    recent OOM kills, and the shortfalls of the namespaces' totals
    (``Container.with_provisioning``'s rule), rather than from
    ``Workload.with_provisioning`` over every workload (1.5 s at 65,000 workloads);
    the candidates' savings (the tie-break) are read as the list reads them, and
    only the rows shown are loaded, their savings computed in Python.
    """
    rules = risk_rules(now)
    # The shortfalls computed as the page loads (clusters never stored).
    computed: dict[int, int] = {}
    for row in namespaces:
        computed.update(row.shortfalls)
    ooms: dict[int, int] = {}
    shortfall_of: dict[int, int] = {}
    oom_count = 0
    for workload_id, kind, cluster_id, stored, kills in (
        OomKill.objects.filter(
            container__workload__is_active=True,
            container__workload__cluster__is_enabled=True,
            occurred_at__gte=rules.oom_since,
        )
        .order_by()
        .values_list(
            "container__workload_id",
            "container__kind",
            "container__workload__cluster_id",
            "container__workload__totals__shortfall",
        )
        .annotate(kills=Count("pk"))
    ):
        oom_count += kills
        if kind != Container.Kind.INIT:  # init containers carry no risk
            ooms[workload_id] = ooms.get(workload_id, 0) + kills
            # Stored with the same parts as its namespace's shortfalls, in the same
            # transaction (namespace_totals.store).
            shortfall_of[workload_id] = (
                stored or 0
                if cluster_id in stored_clusters
                else computed.get(workload_id, 0)
            )
    # An OOM kill outweighs any shortfall (OOM_WEIGHT): with at least ``limit``
    # OOM-killed workloads the riskiest are among them, and the tens of thousands
    # of shortfalls of a large fleet are only counted (the namespaces'
    # ``workloads_short``); with fewer, a workload without a kill scores its
    # shortfall (risk_score(0, s) == s), the stored ones read now.
    risk = {pk: risk_score(kills, shortfall_of[pk]) for pk, kills in ooms.items()}
    at_risk_count = sum(row.workloads_short for row in namespaces) + sum(
        not shortfall_of[pk] for pk in ooms
    )
    if len(risk) < limit:
        everyone = {
            **namespace_totals.stored_shortfalls(stored_clusters),
            **computed,
        }
        shortfall_of = {**everyone, **shortfall_of}
        risk = {**everyone, **risk}
    # Ties on the score are ordered by savings: every workload scoring at least the
    # limit-th score is a candidate. In a fleet of like workloads thousands tie (one
    # shortfall percent), so their savings come from the list's own annotation (the
    # stored parts when complete, workload_totals.with_facts) in one query, and only
    # the rows shown are loaded with their containers.
    scores = heapq.nlargest(limit, risk.values()) if limit > 0 else []
    floor = scores[-1] if 0 < limit <= len(scores) else 0
    candidates = [pk for pk, score in risk.items() if score >= floor]
    # Those the namespaces' savings read already (a fleet with a dozen OOM-killed
    # workloads a week ranks only those), the others in one query.
    ranked_savings: dict[int, float | None] = {
        pk: known_savings[pk] for pk in candidates if pk in known_savings
    }
    unknown = [pk for pk in candidates if pk not in known_savings]
    # (The annotation's name, which the type checker does not know of the model.)
    fields = ("pk", "savings")
    if unknown:
        ranked_savings.update(
            workload_totals.with_facts(
                Workload.objects.filter(pk__in=unknown),
                prices=prices,
                rules=rules,
                complete=complete,
            )
            .order_by()
            .values_list(*fields)
        )
    shown = sorted(
        ranked_savings,
        key=lambda pk: (-risk[pk], -(ranked_savings[pk] or 0.0), pk),
    )[: max(limit, 0)]
    top: list[Workload] = []
    loaded = Workload.objects.filter(pk__in=shown).prefetch_related(
        Prefetch(
            "containers",
            queryset=Container.objects.recommended().select_related(
                "latest_recommendation"
            ),
        )
    )
    for workload in loaded.select_related("cluster"):
        # The savings in Python (container_facts, the rule with_provisioning
        # mirrors), for these few rows; the OOM kills are counted above.
        facts = workload_facts(
            container_facts(
                container,
                recent_ooms=0,
                replicas=pods_billed(workload.replicas, workload.running_hours_month),
                prices=prices.of(workload),
                rules=rules,
            )
            for container in workload.containers.all()
        )
        # The attributes with_provisioning would annotate, as the template reads.
        for name, value in (
            ("recent_ooms", ooms.get(workload.pk, 0)),
            ("shortfall", shortfall_of.get(workload.pk, 0)),
            ("risk", risk[workload.pk]),
            ("savings", facts.savings),
        ):
            setattr(workload, name, value)
        top.append(workload)
    top.sort(key=lambda w: shown.index(w.pk))
    return at_risk_count, top[:limit], oom_count


def _add_realized(totals: _FleetTotals, *, prices: Prices) -> None:
    """Add the realized savings of each workload (realized.py) to its namespace's,
    its cluster's and the fleet's totals (two queries, and one for their places)."""
    realized = realized_savings(prices=prices)
    if not realized:
        return
    namespaces = {(t.cluster, t.namespace): t for t in totals.by_namespace}
    clusters = {t.cluster: t for t in totals.by_cluster}
    for pk, cluster, namespace in Workload.objects.filter(
        pk__in=list(realized), cluster__is_enabled=True
    ).values_list("pk", "cluster__name", "namespace"):
        for group in (
            namespaces.get((cluster, namespace)),
            clusters.get(cluster),
            totals.fleet,
        ):
            if group is not None:
                group.realized_savings += realized[pk]


def fleet_overview(*, now: datetime, prices: Prices, limit: int = 10) -> Overview:
    """Fleet totals, savings, workloads at risk, coverage, confidence, last runs."""
    # The enabled clusters, read once: whose totals are stored (every reader below
    # asks whether all are), their VPA warnings and missing OOM history.
    clusters = list(
        Cluster.objects.filter(is_enabled=True)
        .order_by("name")
        .values_list(
            "pk",
            "name",
            "totals_at",
            "vpa_objects_without_target",
            "oom_history_missing_since",
        )
    )
    complete = all(totals_at is not None for _, _, totals_at, *_ in clusters)
    facts = namespace_totals.read(
        now=now,
        clusters={pk: (name, totals_at) for pk, name, totals_at, *_ in clusters},
        shortfalls=False,
    )
    savings = namespace_savings.savings(prices=prices, now=now, complete=complete)
    totals = _fleet_totals(facts, savings=savings.namespaces)
    fleet = totals.fleet
    _add_realized(totals, prices=prices)
    at_risk_count, at_risk, recent_oom_count = _at_risk(
        now=now,
        prices=prices,
        limit=limit,
        namespaces=facts,
        stored_clusters={pk for pk, _, at, *_ in clusters if at is not None},
        complete=complete,
        known_savings=savings.workloads,
    )
    ooms = OomKill.objects.filter(
        container__workload__is_active=True,
        container__workload__cluster__is_enabled=True,
        occurred_at__gte=now - RECENT_OOM_WINDOW,
    )
    # The first few containers without a recommendation (each namespace's totals
    # keep theirs), loaded with what the reason needs.
    first_missing = [
        pk
        for *_, pk in sorted(
            (row.namespace, *first) for row in facts for first in row.first_without_data
        )[: min(limit, namespace_totals.FIRST_WITHOUT_DATA)]
    ]
    missing = sorted(
        Container.objects.filter(pk__in=first_missing).select_related(
            "workload", "latest_recommendation", "checkpoint"
        ),
        key=lambda c: first_missing.index(c.pk),
    )
    runs = list(RefreshRun.objects.select_related("cluster")[:limit])
    pools = node_pools()
    return Overview(
        fleet=fleet,
        by_cluster=totals.by_cluster,
        by_namespace=totals.by_namespace,
        at_risk_count=at_risk_count,
        at_risk=at_risk,
        missing_requests_count=sum(row.workloads_missing_requests for row in facts),
        recent_ooms=list(
            ooms.select_related("container__workload").order_by("-occurred_at")[:limit]
        ),
        recent_oom_count=recent_oom_count,
        # A container without a usable recommendation is the one thing "covered"
        # leaves out (no_data_q).
        no_recommendation_count=fleet.containers - fleet.covered,
        no_recommendation=[
            {"container": c, "reason": no_recommendation_reason(c)} for c in missing
        ],
        confidence=totals.confidence,
        runs=runs,
        is_refreshing=any(run.status == RefreshRun.Status.RUNNING for run in runs),
        prices=prices,
        price_mix=price_mix(
            prices, (found for row in facts for found in row.price_mix)
        ),
        workload_count=sum(row.workloads for row in facts),
        vpa_warnings=[
            f"{name}: {entry['message']}"
            for _, name, _, entries, _ in clusters
            for entry in entries or []
        ],
        oom_history_missing=[
            (name, since) for _, name, _, _, since in clusters if since is not None
        ],
        node_pools=pools,
        node_pool_totals=pool_totals(pools),
    )

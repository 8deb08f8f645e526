"""Rollups: the fleet's requests, recommendations, savings and statuses summed by
cluster, namespace, a workload label (a team) or workload kind, as Kubecost and
Goldilocks users expect.

One query: the list's per-workload status and savings
(``Workload.objects.with_provisioning``, recommender/models/provisioning.py) plus the
workload's requested and recommended amounts, all replicas, both from the rows the
refresh stores when complete (label_rollups.py); the groups are summed in Python (a
row per workload, no row per container).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models.fields.json import KeyTextTransform

from recommender.cluster import label_selector
from recommender.errors import InvalidInput
from recommender.models import NodePool, ProvisioningStatus, Workload
from recommender.services.readmodels import group_totals, label_filter, label_rollups
from recommender.services.readmodels.node_pools import (
    PoolTotals,
    node_pools,
    pool_totals,
)
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.readmodels.realized import realized_savings


# What a rollup groups by (the ``by`` parameter), in the order the page shows them.
@dataclass
class Totals:
    """Requested vs recommended amounts of one group (all replicas)."""

    cluster: str = ""
    namespace: str = ""
    containers: int = 0
    covered: int = 0
    requested_cpu_millicores: int = 0
    requested_memory_bytes: int = 0
    # Requests of the containers that have a target, compared with the targets.
    covered_requested_cpu_millicores: int = 0
    covered_requested_memory_bytes: int = 0
    recommended_cpu_millicores: int = 0
    recommended_memory_bytes: int = 0
    # Potential: what moving to the targets would still save per month.
    savings: float = 0.0
    # Realized: what the applied changes that still hold save per month (realized.py).
    realized_savings: float = 0.0

    @property
    def coverage(self) -> float:
        """Share of containers with a recommendation (0..1)."""
        return self.covered / self.containers if self.containers else 0.0

    def add(self, other: Totals) -> None:
        """Accumulate another group into this one."""
        for name in (*SUMMED, "savings", "realized_savings"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


# The amounts a Totals sums, as the namespaces' totals (NamespaceFacts) name them too.
SUMMED = (
    "containers",
    "covered",
    "requested_cpu_millicores",
    "requested_memory_bytes",
    "covered_requested_cpu_millicores",
    "covered_requested_memory_bytes",
    "recommended_cpu_millicores",
    "recommended_memory_bytes",
)


BY_CHOICES = {
    "cluster": "cluster",
    "namespace": "namespace",
    "label": "label",
    "kind": "workload kind",
}
# A label key: an optional DNS prefix (253 characters at most) and a name.
LABEL_KEY = label_selector.KEY
MAX_LABEL_KEY = 253 + 1 + 63
# The group of workloads without the label.
NO_LABEL = ""


@dataclass
class RollupGroup(Totals):
    """The totals of one group (all replicas of its workloads): the overview's
    ``Totals`` (``cluster``: by namespace, the namespace's cluster, as namespaces are
    per cluster), with the group's name, its workloads and their headline statuses."""

    name: str = ""
    workloads: int = 0
    # Workloads with each fact, as the list filters them (?at_risk=true,
    # ?wasteful=true, ?missing_requests=true) and the overview counts them: one
    # workload may have several.
    at_risk: int = 0
    wasteful: int = 0
    missing_requests: int = 0
    # What the applied changes that still hold save per month (realized.py), beside
    # ``savings``, what moving to the targets would still save (potential).
    realized_savings: float = 0.0
    # Workloads per headline status (ProvisioningStatus.LABELS keys): one each.
    statuses: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(ProvisioningStatus.LABELS, 0)
    )

    def as_dict(self) -> dict[str, Any]:
        """The API's shape (``RollupGroupSerializer``)."""
        return {
            "name": self.name,
            "cluster": self.cluster,
            "workloads": self.workloads,
            "containers": self.containers,
            "covered": self.covered,
            "requested_cpu_millicores": self.requested_cpu_millicores,
            "requested_memory_bytes": self.requested_memory_bytes,
            "covered_requested_cpu_millicores": self.covered_requested_cpu_millicores,
            "covered_requested_memory_bytes": self.covered_requested_memory_bytes,
            "recommended_cpu_millicores": self.recommended_cpu_millicores,
            "recommended_memory_bytes": self.recommended_memory_bytes,
            "savings_monthly": round(self.savings, 2),
            "realized_savings_monthly": round(self.realized_savings, 2),
            "at_risk": self.at_risk,
            "wasteful": self.wasteful,
            "missing_requests": self.missing_requests,
            "statuses": dict(self.statuses),
        }


@dataclass
class Rollup:
    """Groups by savings (largest first), and the total over all of them."""

    by: str
    key: str
    cluster: str
    groups: list[RollupGroup]
    total: RollupGroup
    # The workloads summed were those matching it ("" for all).
    label_selector: str = ""
    # The node pools of the clusters summed (of ``cluster`` when given).
    node_pools: Sequence[NodePool] = ()
    node_pool_totals: PoolTotals | None = None


def default_label_key() -> str:
    """The workload label a team rollup uses (VPAWEB_ROLLUP_LABEL_KEY)."""
    return str(settings.ROLLUP_LABEL_KEY)


def checked(by: str, key: str = "") -> tuple[str, str]:
    """``by`` and the label ``key`` (the default for ``label``; "" for the other
    groupings, which have no key), or ``InvalidInput`` naming the parameter."""
    if by not in BY_CHOICES:
        raise InvalidInput(
            f"{by!r} is not a rollup; choose one of {', '.join(BY_CHOICES)}",
            field="by",
        )
    if by != "label":
        return by, ""
    key = key.strip() or default_label_key()
    if len(key) > MAX_LABEL_KEY or not LABEL_KEY.match(key):
        raise InvalidInput(
            f"{key!r} is not a label key (e.g. team or app.kubernetes.io/part-of)",
            field="key",
        )
    return by, key


def rollup(
    *,
    by: str,
    key: str = "",
    cluster: str = "",
    label_selector: str = "",
    now: datetime,
    prices: Prices,
) -> Rollup:
    """The shown workloads (of ``cluster`` when given) summed by ``by``.

    ``by`` is cluster, namespace, label (the workload label ``key``, default
    VPAWEB_ROLLUP_LABEL_KEY; workloads without it form the group "") or kind; anything
    else is ``InvalidInput``. ``label_selector`` (``team=payments,tier!=batch``)
    narrows the workloads summed; a malformed one is ``InvalidInput``. Groups come
    largest savings first.
    """
    by, key = checked(by, key)
    workloads = label_filter.with_labels(Workload.objects.shown(), label_selector)
    if cluster:
        workloads = workloads.filter(cluster__name=cluster)
    stored = label_rollups.is_stored()
    rules = risk_rules(now)
    annotated = label_rollups.with_amounts(
        workloads, prices=prices, rules=rules, stored=stored
    )
    if by == "label":
        # Only the label's value leaves the database, not every workload's labels.
        annotated = annotated.annotate(group=KeyTextTransform(key, "labels"))
    group_fields = {
        "cluster": ("cluster__name",),
        "namespace": ("namespace", "cluster__name"),
        "kind": ("kind",),
        "label": ("group",),
    }[by]
    realized = realized_savings(prices=prices)
    sums: Iterator[tuple[tuple[Any, ...], dict[str, Any]]]
    if stored:
        # Summed by the database, but the few workloads with recent OOM kills: the
        # count of each one's kills, inlined in every sum of a fact, cost 1 s.
        live = annotated
        stored_sums: Iterable[tuple[tuple[Any, ...], dict[str, Any]]] = ()
        # The stored sums cover every workload of a group: not with a selector.
        if not label_selector.strip() and group_totals.is_usable(
            prices=prices, key=key if by == "label" else None
        ):
            # The sums the refresh stored per group of the workloads without a
            # stored OOM kill; only those with one (a few) are summed here.
            stored_sums = group_totals.group_sums(group_fields, cluster=cluster)
            live = annotated.filter(totals__latest_oom_at__isnull=False)
        sums = itertools.chain(
            stored_sums,
            label_rollups.group_sums(
                live, group_fields, ProvisioningStatus.LABELS, rules
            ),
            _per_workload(
                label_rollups.killed_rows(annotated, group_fields, rules),
                len(group_fields),
                realized={},
            ),
        )
        # The realized savings of the few workloads with a change, per group.
        of_group = {
            pk: group
            for *group, pk in annotated.filter(pk__in=list(realized))
            .order_by()
            .values_list(*group_fields, "pk")
        }
    else:
        sums = _per_workload(
            annotated.order_by().values_list(*group_fields, *label_rollups.ROW_FIELDS),
            len(group_fields),
            realized,
        )
        of_group = {}
    groups: dict[tuple[str, str], RollupGroup] = {}
    total = RollupGroup(name="total")

    def group_of(values: Sequence[Any]) -> RollupGroup:
        name = values[0] if values[0] is not None else NO_LABEL
        of_cluster = values[1] if by == "namespace" else ""
        group = groups.get((of_cluster, name))
        if group is None:
            group = groups[(of_cluster, name)] = RollupGroup(
                name=name, cluster=of_cluster
            )
        return group

    for values, summed in sums:
        group = group_of(values)
        for target in (group, total):
            for name, amount in summed.items():
                if name == "statuses":
                    for status, count in amount.items():
                        target.statuses[status] = target.statuses.get(status, 0) + count
                else:
                    setattr(target, name, getattr(target, name) + amount)
    for pk, values in of_group.items():
        for target in (group_of(values), total):
            target.realized_savings += realized[pk]
    ordered = sorted(groups.values(), key=lambda g: (-g.savings, g.cluster, g.name))
    pools = node_pools(cluster=cluster)
    return Rollup(
        by=by,
        key=key,
        cluster=cluster,
        label_selector=label_selector.strip(),
        groups=ordered,
        total=total,
        node_pools=pools,
        node_pool_totals=pool_totals(pools),
    )


def _per_workload(
    rows: Iterable[tuple[Any, ...]], keys: int, realized: dict[int, float]
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Each workload's group values and its sums under ``RollupGroup``'s names, from
    the rows of ``label_rollups.with_amounts`` computed over every container."""
    for row in rows:
        (
            pk,
            status,
            savings,
            risk,
            missing_count,
            containers,
            covered,
            req_cpu,
            req_memory,
            covered_req_cpu,
            covered_req_memory,
            rec_cpu,
            rec_memory,
        ) = row[keys:]
        yield (
            row[:keys],
            {
                "workloads": 1,
                "containers": containers,
                "covered": covered,
                "requested_cpu_millicores": round(req_cpu or 0),
                "requested_memory_bytes": round(req_memory or 0),
                "covered_requested_cpu_millicores": round(covered_req_cpu or 0),
                "covered_requested_memory_bytes": round(covered_req_memory or 0),
                "recommended_cpu_millicores": round(rec_cpu or 0),
                "recommended_memory_bytes": round(rec_memory or 0),
                "savings": float(savings or 0.0),
                "realized_savings": realized.get(pk, 0.0),
                "statuses": {status: 1},
                # The facts by the list's rule (models/provisioning.py).
                "at_risk": int(bool(risk and risk > 0)),
                "wasteful": int(bool(savings and savings > 0)),
                "missing_requests": int(bool(missing_count)),
            },
        )

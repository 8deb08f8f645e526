"""The prices of each workload's pods, from the nodes they run on."""
# Each live pod is priced by its node, in this order:
#
# 1. ``opencost``: the node's ``node_cpu_hourly_cost`` (USD per core-hour) and
#    ``node_ram_hourly_cost`` (USD per GiB-hour) series in the cluster's Prometheus, as
#    OpenCost (or Kubecost) exports them, labelled ``node``; both must be there.
# 2. ``table``: the first row of the CSV file ``VPAWEB_PRICE_TABLE`` that matches the
#    node (``load_price_table``), less its spot discount on a spot node.
# 3. ``default``: ``VPAWEB_PRICE_PER_CORE_HOUR`` and ``VPAWEB_PRICE_PER_GIB_HOUR``.
#
# A node's instance type, region and whether it is spot come from the labels of the
# OpenCost series (``instance_type``, ``region``, ``kubecost_node_is_spot`` = 1), else
# from the node's own labels (``node.kubernetes.io/instance-type``) as the node
# inventory lists them (the API server, kube-state-metrics or the simulation:
# node_pools.node_inventory), which also holds the labels ``label:`` rows match and,
# with a price table, the node of each pod discovery saw without ``spec.nodeName``.
# The node pools price their nodes by the same ``node_prices``. A workload's prices
# are the mean over its pods; its ``price_source`` the source that priced most of
# them. Definitions: docs/prometheus.md, "Node prices".

from __future__ import annotations

import csv
import fnmatch
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from django.conf import settings

from recommender.cluster.label_selector import KEY as LABEL_KEY
from recommender.cluster.label_selector import VALUE as LABEL_VALUE
from recommender.cluster.nodes import NodeInventory, NodeRecord, prometheus_label
from recommender.errors import InvalidInput
from recommender.models import Workload
from recommender.services.readmodels import changes
from recommender.sources.base import UsageSource

OPENCOST = "opencost"
TABLE = "table"
DEFAULT = "default"
# Ties go to the better-informed source.
_RANK = {OPENCOST: 0, TABLE: 1, DEFAULT: 2}
TABLE_COLUMNS = ("match", "per_core_hour", "per_gib_hour", "spot_discount")
LABEL = "label"
# A node's instance type, as Kubernetes labels it (and the label before 1.17).
INSTANCE_TYPE_LABELS = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
)


@dataclass(frozen=True)
class NodeFacts:
    """What Prometheus says of one node: its prices (None when absent) and labels."""

    per_core_hour: float | None = None
    per_gib_hour: float | None = None
    instance_type: str = ""
    region: str = ""
    spot: bool = False
    # The node's labels as kube-state-metrics names them (label_<name>).
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NodePrice:
    per_core_hour: float
    per_gib_hour: float
    source: str


@dataclass(frozen=True)
class PriceRow:
    """One row of the price table: ``match`` is ``node=<glob>``,
    ``instance_type=<name>``, ``label:<key>=<value>[,<key>=<value>...]`` (every
    label, ``selector``) or ``*`` (any node)."""

    key: str
    value: str
    per_core_hour: float
    per_gib_hour: float
    spot_discount: float
    selector: tuple[tuple[str, str], ...] = ()

    def matches(self, node: str, facts: NodeFacts) -> bool:
        if self.key == "*":
            return True
        if self.key == "node":
            return fnmatch.fnmatchcase(node, self.value)
        if self.key == LABEL:
            return all(
                facts.labels.get(prometheus_label(key)) == value
                for key, value in self.selector
            )
        return bool(facts.instance_type) and facts.instance_type == self.value


def _table_error(path: str, line: int, column: str, problem: str) -> InvalidInput:
    return InvalidInput(
        f"VPAWEB_PRICE_TABLE {path}, line {line}, column {column}: {problem}",
        field="VPAWEB_PRICE_TABLE",
    )


def _number(text: str, *, path: str, line: int, column: str, most: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _table_error(path, line, column, f"{text!r} is not a number") from None
    if not 0.0 <= value <= most:
        raise _table_error(path, line, column, f"{text} is not within 0 and {most:g}")
    return value


def _selector(match: str, *, path: str, line: int) -> tuple[tuple[str, str], ...]:
    """The (key, value) pairs of a ``label:k=v[,k=v...]`` match; () for another."""
    if not match.startswith(LABEL + ":"):
        return ()
    pairs = []
    for part in match.removeprefix(LABEL + ":").split(","):
        key, equals, value = (text.strip() for text in part.partition("="))
        if not equals or not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
            raise _table_error(
                path,
                line,
                "match",
                f"{part.strip()!r} of {match!r} is not <label key>=<label value>",
            )
        pairs.append((key, value))
    return tuple(pairs)


def load_price_table(path: str) -> list[PriceRow]:
    """The rows of the CSV price table at ``path``: a header naming
    ``TABLE_COLUMNS`` (spot_discount optional: a fraction, 0.65 = 65 % off on spot
    nodes), then one row per match. A malformed row raises ``InvalidInput`` naming
    its line and column."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"VPAWEB_PRICE_TABLE {path} cannot be read: {exc}",
            field="VPAWEB_PRICE_TABLE",
        ) from None
    reader = csv.reader(text.splitlines())
    header = [name.strip() for name in next(reader, [])]
    for column in TABLE_COLUMNS[:3]:
        if column not in header:
            raise _table_error(path, 1, column, "missing from the header")
    at = {name: header.index(name) for name in TABLE_COLUMNS if name in header}
    rows = []
    for line, cells in enumerate(reader, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise _table_error(
                path, line, "*", f"{len(cells)} cells, the header has {len(header)}"
            )
        cell = {name: cells[index].strip() for name, index in at.items()}
        match = cell["match"]
        key, _, value = match.partition("=")
        selector = _selector(match, path=path, line=line)
        if selector:
            key, value = LABEL, match.removeprefix(LABEL + ":")
        elif match != "*" and (key not in ("node", "instance_type") or not value):
            raise _table_error(
                path,
                line,
                "match",
                f"{match!r} is not node=<glob>, instance_type=<name>, "
                "label:<key>=<value>[,<key>=<value>...] or *",
            )
        rows.append(
            PriceRow(
                key=key.strip() if match != "*" else "*",
                value=value.strip(),
                selector=selector,
                **{
                    column: _number(
                        cell[column], path=path, line=line, column=column, most=1e6
                    )
                    for column in ("per_core_hour", "per_gib_hour")
                },
                spot_discount=_number(
                    cell.get("spot_discount") or "0",
                    path=path,
                    line=line,
                    column="spot_discount",
                    most=1.0,
                ),
            )
        )
    return rows


def opencost_nodes(source: UsageSource, *, at_s: float) -> dict[str, NodeFacts]:
    """The nodes the source has OpenCost's series of, by name (Prometheus only)."""
    found: dict[str, dict[str, object]] = defaultdict(dict)
    for labels, value in source.fetch_node_costs(at_s=at_s):
        node = labels.get("node", "")
        if not node:
            continue
        facts = found[node]
        for label in ("instance_type", "region"):
            if labels.get(label):
                facts[label] = labels[label]
        name = labels.get("__name__")
        if name == "node_cpu_hourly_cost":
            facts["per_core_hour"] = value
        elif name == "node_ram_hourly_cost":
            facts["per_gib_hour"] = value
        elif name == "kubecost_node_is_spot":
            facts["spot"] = value == 1.0
    return {node: NodeFacts(**facts) for node, facts in found.items()}  # type: ignore[arg-type]


def labelled(
    nodes: Mapping[str, NodeFacts], labels: Mapping[str, Mapping[str, str]]
) -> dict[str, NodeFacts]:
    """``nodes`` with each node's ``labels`` (every node of either)."""
    return {
        name: replace(nodes.get(name, NodeFacts()), labels=labels.get(name, {}))
        for name in {*nodes, *labels}
    }


def ksm_node_labels(source: UsageSource, *, at_s: float) -> dict[str, dict[str, str]]:
    """Each node's labels from kube-state-metrics' ``kube_node_labels`` (none from a
    source without the cluster's series)."""
    return {
        labels["node"]: {k: v for k, v in labels.items() if k.startswith("label_")}
        for labels, _ in source.instant_samples(("kube_node_labels",), at_s=at_s)
        if labels.get("node")
    }


def node_price(node: str, facts: NodeFacts, table: Sequence[PriceRow]) -> NodePrice:
    """One node's prices: OpenCost's, else the table's first matching row, else the
    list prices."""
    if facts.per_core_hour is not None and facts.per_gib_hour is not None:
        return NodePrice(facts.per_core_hour, facts.per_gib_hour, OPENCOST)
    for row in table:
        if row.matches(node, facts):
            keep = 1.0 - row.spot_discount if facts.spot else 1.0
            return NodePrice(row.per_core_hour * keep, row.per_gib_hour * keep, TABLE)
    return NodePrice(settings.PRICE_PER_CORE_HOUR, settings.PRICE_PER_GIB_HOUR, DEFAULT)


def ksm_labels(node: NodeRecord) -> dict[str, str]:
    """The node's labels as kube-state-metrics names them (the price table's
    ``label:`` rows match those), whichever source listed the node."""
    return {
        key if key.startswith("label_") else prometheus_label(key): value
        for key, value in node.labels.items()
    }


def node_facts(
    *, source: UsageSource, at_s: float, inventory: NodeInventory | None
) -> dict[str, NodeFacts]:
    """What is known of each node to price it: OpenCost's series, and the listed
    nodes' labels and instance type (OpenCost's instance type first)."""
    nodes = opencost_nodes(source, at_s=at_s)
    if inventory is None:
        return nodes
    facts = labelled(
        nodes, {node.name: ksm_labels(node) for node in inventory.nodes.values()}
    )
    for name, node in inventory.nodes.items():
        kind = next(
            (node.label(key) for key in INSTANCE_TYPE_LABELS if node.label(key)), None
        )
        if kind and not facts[name].instance_type:
            facts[name] = replace(facts[name], instance_type=kind)
    return facts


def node_prices(
    names: Iterable[str], facts: Mapping[str, NodeFacts], table: Sequence[PriceRow]
) -> dict[str, NodePrice]:
    """THE price of each named node (``node_price`` over its facts)."""
    return {
        name: node_price(name, facts.get(name, NodeFacts()), table) for name in names
    }


def price_table() -> list[PriceRow]:
    """The rows of ``VPAWEB_PRICE_TABLE`` ([] when unset)."""
    path = settings.PRICE_TABLE
    return load_price_table(path) if path else []


def price_workloads(
    *,
    pod_nodes: Iterable[tuple[int, str]],
    source: UsageSource,
    now: datetime,
    inventory: NodeInventory | None = None,
    pod_owner: Mapping[tuple[str, str], int] | None = None,
) -> int:
    """Store each workload's prices from the nodes of its live pods (``pod_nodes``:
    (workload id, node name); with an ``inventory``, also its pods there that
    ``pod_owner`` maps to a workload and ``pod_nodes`` left out); workloads without
    a scheduled pod keep theirs. Returns the rows changed."""
    by_workload: dict[int, list[str]] = defaultdict(list)
    for workload_id, node in pod_nodes:
        by_workload[workload_id].append(node)
    if inventory is not None and pod_owner:
        placed = set(by_workload)
        for pod in inventory.pods:
            owner = pod_owner.get((pod.namespace, pod.name))
            if owner is not None and owner not in placed:
                by_workload[owner].append(pod.node)
    if not by_workload:
        return 0
    table = price_table()
    nodes = node_facts(source=source, at_s=now.timestamp(), inventory=inventory)
    if inventory is None and any(row.key == LABEL for row in table):
        nodes = labelled(nodes, ksm_node_labels(source, at_s=now.timestamp()))
    priced = node_prices(
        {n for names in by_workload.values() for n in names}, nodes, table
    )
    stored: dict[int, tuple[float | None, float | None, str]] = {}
    for workload_id, names in by_workload.items():
        prices = [priced[name] for name in names]
        counts = Counter(price.source for price in prices)
        source_name = min(counts, key=lambda s: (-counts[s], _RANK[s]))
        if source_name == DEFAULT and len(counts) == 1:
            stored[workload_id] = (None, None, DEFAULT)
        else:
            stored[workload_id] = (
                # fsum: the mean of equal prices is that price, to the last bit.
                math.fsum(p.per_core_hour for p in prices) / len(prices),
                math.fsum(p.per_gib_hour for p in prices) / len(prices),
                source_name,
            )
    fields = ["price_per_core_hour", "price_per_gib_hour", "price_source"]
    changed = []
    for workload in Workload.objects.filter(pk__in=list(stored)).only("pk", *fields):
        core, gib, name = stored[workload.pk]
        if (
            workload.price_per_core_hour,
            workload.price_per_gib_hour,
            workload.price_source,
        ) != (core, gib, name):
            workload.price_per_core_hour = core
            workload.price_per_gib_hour = gib
            workload.price_source = name
            changed.append(workload)
    Workload.objects.bulk_update(changed, fields, batch_size=500)
    changes.note(workload.pk for workload in changed)
    return len(changed)

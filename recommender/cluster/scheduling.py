"""Which nodes a pod template may run on, as the scheduler's required rules decide it:
``spec.nodeSelector``, ``spec.affinity.nodeAffinity.requiredDuringScheduling
IgnoredDuringExecution`` and ``spec.tolerations`` against a node's labels and taints
(Kubernetes' "Assigning Pods to Nodes" and "Taints and Tolerations").

Only the hard rules count: ``preferred…`` affinity and ``PreferNoSchedule`` taints
never keep a pod off a node. The taints the node controller derives from node
conditions (``CONDITION_TAINT_KEYS``: not-ready, unreachable, pressure, cordon) are
transient states of one node, not a property of its pool, and are left out; a cordon
is read from ``spec.unschedulable`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# Effects that keep a pod off a node (PreferNoSchedule only discourages).
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# Taints the node lifecycle controller sets from node conditions (k8s.io/api
# core/v1 well_known_taints.go).
CONDITION_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
        "node.kubernetes.io/unschedulable",
    }
)
# A node's name, for matchFields (the only field a node selector term may name).
NODE_NAME_FIELD = "metadata.name"
OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})

# Reads a node label by its Kubernetes key (None: the node has no such label).
LabelLookup = Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (``spec.taints[]``)."""

    key: str
    value: str = ""
    effect: str = ""

    @property
    def is_hard(self) -> bool:
        """Keeps pods that do not tolerate it off the node, and is not a condition."""
        return self.effect in HARD_EFFECTS and self.key not in CONDITION_TAINT_KEYS


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (``spec.tolerations[]``)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: the effect (empty: any), then the key (empty
        with Exists: any), then the value (Exists: any)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions``/``matchFields`` entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    is_field: bool = False

    def matches(self, value: str | None) -> bool:
        """Whether a node whose label (or field) is ``value`` (None: absent)
        satisfies it."""
        op = self.operator
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op == "NotIn":
            return value is None or value not in self.values
        if value is None:
            return False
        if op == "In":
            return value in self.values
        try:  # Gt and Lt compare integers; a label that is not one never matches
            number, bound = int(value), int(self.values[0])
        except (ValueError, IndexError):
            return False
        return number > bound if op == "Gt" else number < bound


@dataclass(frozen=True, slots=True)
class NodePlacement:
    """A pod template's hard placement rules. ``terms`` are ORed (each a tuple of
    ANDed requirements); no terms: no affinity rule."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @property
    def needs_labels(self) -> bool:
        """Whether the node's labels (or name) decide, not only its taints."""
        return bool(self.node_selector or self.terms)

    def selects(
        self, *, name: str, label: LabelLookup, taints: tuple[Taint, ...]
    ) -> bool:
        """Whether a pod of this template may run on the node."""
        for key, value in self.node_selector:
            if label(key) != value:
                return False
        if self.terms and not any(
            term
            and all(
                r.matches(name if r.key == NODE_NAME_FIELD else None)
                if r.is_field
                else r.matches(label(r.key))
                for r in term
            )
            for term in self.terms
        ):
            return False
        return self.tolerates(taints)

    def tolerates(self, taints: tuple[Taint, ...]) -> bool:
        """Whether every hard taint is tolerated."""
        return all(
            any(t.tolerates(taint) for t in self.tolerations)
            for taint in taints
            if taint.is_hard
        )


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {value!r}")
    return value


def taints_of(raw: Any, where: str) -> tuple[Taint, ...]:
    """``spec.taints`` of a Node."""
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a list of taints, got {raw!r}")
    taints = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{at}: expected a taint, got {item!r}")
        taints.append(
            Taint(
                key=_text(item.get("key"), f"{at}.key"),
                value=_text(item.get("value"), f"{at}.value"),
                effect=_text(item.get("effect"), f"{at}.effect"),
            )
        )
    return tuple(taints)


def _requirements(raw: Any, where: str, *, is_field: bool) -> list[Requirement]:
    if not raw:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a list, got {raw!r}")
    found = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{at}: expected a requirement, got {item!r}")
        operator = _text(item.get("operator"), f"{at}.operator")
        if operator not in OPERATORS:
            raise ValueError(f"{at}.operator: {operator!r} is not a known operator")
        values = item.get("values") or []
        if not isinstance(values, list):
            raise ValueError(f"{at}.values: expected a list, got {values!r}")
        found.append(
            Requirement(
                key=_text(item.get("key"), f"{at}.key"),
                operator=operator,
                values=tuple(str(v) for v in values),
                is_field=is_field,
            )
        )
    return found


def placement_of(pod_spec: Mapping[str, Any], where: str) -> NodePlacement:
    """The hard placement rules of a pod spec (a template's ``spec``)."""
    selector = pod_spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise ValueError(f"{where}.nodeSelector: expected a map, got {selector!r}")
    affinity = pod_spec.get("affinity") or {}
    node_affinity = (
        (affinity.get("nodeAffinity") or {}) if isinstance(affinity, Mapping) else {}
    )
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    raw_terms = (
        required.get("nodeSelectorTerms") or [] if isinstance(required, Mapping) else []
    )
    terms = []
    for i, term in enumerate(raw_terms):
        at = f"{where}.affinity.nodeAffinity.required…nodeSelectorTerms[{i}]"
        if not isinstance(term, Mapping):
            raise ValueError(f"{at}: expected a term, got {term!r}")
        terms.append(
            tuple(
                _requirements(
                    term.get("matchExpressions"),
                    f"{at}.matchExpressions",
                    is_field=False,
                )
                + _requirements(
                    term.get("matchFields"), f"{at}.matchFields", is_field=True
                )
            )
        )
    raw_tolerations = pod_spec.get("tolerations") or []
    if not isinstance(raw_tolerations, list):
        raise ValueError(f"{where}.tolerations: expected a list")
    tolerations = []
    for i, item in enumerate(raw_tolerations):
        at = f"{where}.tolerations[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{at}: expected a toleration, got {item!r}")
        tolerations.append(
            Toleration(
                key=_text(item.get("key"), f"{at}.key"),
                operator=_text(item.get("operator"), f"{at}.operator") or "Equal",
                value=_text(item.get("value"), f"{at}.value"),
                effect=_text(item.get("effect"), f"{at}.effect"),
            )
        )
    return NodePlacement(
        node_selector=tuple(
            sorted(
                (str(k), _text(v, f"{where}.nodeSelector.{k}"))
                for k, v in selector.items()
            )
        ),
        terms=tuple(terms),
        tolerations=tuple(tolerations),
    )

"""One effective policy: a workload's policy resolved field by field, then stored in its
``Policy`` row with where each field came from (``Policy.provenance``).

Precedence, most specific first, each field on its own: the workload's own fields set in
vpaweb (``Policy.own_fields``) > its annotation (``ANNOTATION_FIELDS``) > a label rule >
a namespace rule > a cluster rule > ``DEFAULTS``; among rules of one level the higher
priority, then the older rule. A policy mirroring a VPA object is never resolved.
"""
# The webhook, the updater and the refresh keep reading the Policy row:
# ``materialize_policies`` and ``apply_diffs`` rewrite the rows a rule, an annotation or
# discovery changed, audit each change and journal it for the webhook.

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q

from recommender.cluster import label_selector
from recommender.errors import InvalidInput
from recommender.models import AuditEvent, Policy, PolicyRule, Workload
from recommender.services.access.audit import Action, audit_row
from recommender.services.policy.validation import validate_policy_fields
from recommender.services.policy.withdrawal import withdraw_approved_changes
from recommender.services.readmodels.generation import (
    mark_admission_data_changed,
    note_admission_changes,
)

logger = logging.getLogger(__name__)

# Every field a rule, an annotation or an operator may give, with its default (the
# Policy model's): what a workload nothing else selects acts under.
DEFAULTS: dict[str, Any] = {
    "mode": Policy.Mode.OFF.value,
    "profile": "vpa",
    "profile_overrides": {},
    "container_policies": [],
    "min_replicas": None,
    "approval": Policy.Approval.MANUAL.value,
    "eviction_requirements": [],
    "maintenance_windows": [],
    "window_bypasses_quick_oom": False,
    "hpa_coordination": Policy.HpaCoordination.LEAVE.value,
    "startup_boost": {},
}
POLICY_FIELDS = tuple(DEFAULTS)

# The annotations read on a workload, and the policy field each gives. Values are
# validated as the API validates the field; a bad one is ignored, with its reason.
ANNOTATION_PREFIX = "vpaweb.io/"
ANNOTATION_FIELDS: dict[str, str] = {
    "vpaweb.io/mode": "mode",
    "vpaweb.io/profile": "profile",
    "vpaweb.io/approval": "approval",
    "vpaweb.io/min-replicas": "min_replicas",
    "vpaweb.io/hpa-coordination": "hpa_coordination",
}
# vpaweb.io/* annotations that are not policy fields (the namespace opt-in label is
# a label, but people put it on workloads too): not reported as ignored.
_NOT_POLICY = frozenset({"vpaweb.io/enabled"})
# The kinds whose annotations are read (a ReplicaSet's or a Job's belong to the
# Deployment or CronJob above them).
ANNOTATED_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "CronJob")

# Rule levels, most specific last (sorted by rank, descending).
LEVEL_RANK = {"cluster": 1, "namespace": 2, "label": 3}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
UNSAVED_RULE_ID = 2**62
# Ids per ``IN (...)``: under every backend's parameter limit.
BATCH = 500


@dataclass(frozen=True)
class CompiledRule:
    """A rule with its selectors parsed, ready to match thousands of workloads."""

    rule_id: int
    name: str
    level: str
    priority: int
    cluster_id: int | None
    namespaces: frozenset[str]
    namespace_selector: tuple[label_selector.Requirement, ...]
    workload_selector: tuple[label_selector.Requirement, ...]
    kinds: frozenset[str]
    fields: Mapping[str, Any]

    @property
    def order(self) -> tuple[int, int, int]:
        """Sort key, the winning rule first."""
        return (-LEVEL_RANK[self.level], -self.priority, self.rule_id)

    def selects(self, target: Target, namespace_labels: Mapping[str, str]) -> bool:
        """Whether this rule's scope holds ``target``."""
        if self.cluster_id is not None and target.cluster_id != self.cluster_id:
            return False
        if self.kinds and target.kind not in self.kinds:
            return False
        if self.namespaces and target.namespace not in self.namespaces:
            return False
        if self.namespace_selector and not label_selector.matches(
            self.namespace_selector, namespace_labels
        ):
            return False
        return label_selector.matches(self.workload_selector, target.labels)


def rule_scope_q(rule: PolicyRule) -> Q:
    """The policies a rule can select, as far as columns say (cluster, namespace
    names, kinds): what resolving after an edit of it needs to read."""
    scope = Q()
    if rule.cluster_id is not None:
        scope &= Q(workload__cluster_id=rule.cluster_id)
    if rule.namespaces:
        scope &= Q(workload__namespace__in=list(rule.namespaces))
    if rule.kinds:
        scope &= Q(workload__kind__in=list(rule.kinds))
    return scope


def compile_rule(rule: PolicyRule) -> CompiledRule:
    """``rule`` parsed (its selectors were checked when it was saved)."""
    return CompiledRule(
        # A rule not stored yet (a preview) ranks as it will: last of its level
        # and priority, with the highest id.
        rule_id=rule.pk if rule.pk is not None else UNSAVED_RULE_ID,
        name=rule.name,
        level=rule.level,
        priority=rule.priority,
        cluster_id=rule.cluster_id,
        namespaces=frozenset(rule.namespaces or ()),
        namespace_selector=label_selector.parse(rule.namespace_selector),
        workload_selector=label_selector.parse(rule.workload_selector),
        kinds=frozenset(rule.kinds or ()),
        fields=dict(rule.policy_fields or {}),
    )


@dataclass(frozen=True)
class Target:
    """What resolution reads of one workload and its policy."""

    workload_id: int
    cluster_id: int
    namespace: str
    kind: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    own: Mapping[str, Any]  # the own fields' values


@dataclass(frozen=True)
class Resolved:
    """A workload's effective policy fields, where each came from, and the
    annotations left out with their reasons."""

    values: dict[str, Any]
    provenance: dict[str, dict[str, Any]]
    ignored_annotations: list[dict[str, str]]


def annotation_values(
    annotations: Mapping[str, str],
) -> tuple[dict[str, tuple[str, Any]], list[dict[str, str]]]:
    """The policy fields the annotations give, ``{field: (annotation, value)}``, and
    the ignored ones, each with its reason (never a guess)."""
    if not annotations:
        return {}, []
    given: dict[str, tuple[str, Any]] = {}
    ignored: list[dict[str, str]] = []
    for key in sorted(annotations):
        if not key.startswith(ANNOTATION_PREFIX) or key in _NOT_POLICY:
            continue
        raw = annotations[key]
        name = ANNOTATION_FIELDS.get(key)
        if name is None:
            ignored.append(
                {
                    "annotation": key,
                    "value": raw,
                    "reason": "unknown annotation; vpaweb reads "
                    + ", ".join(ANNOTATION_FIELDS),
                }
            )
            continue
        value: Any = raw.strip()
        if name == "min_replicas" and value.isdigit():
            value = int(value)
        try:
            clean = validate_policy_fields({name: value})
        except InvalidInput as exc:
            messages = [m for ms in exc.fields.values() for m in ms] or [str(exc)]
            ignored.append({"annotation": key, "value": raw, "reason": messages[0]})
            continue
        given[name] = (key, clean[name])
    return given, ignored


def resolve(
    target: Target,
    rules: Sequence[CompiledRule],
    namespace_labels: Mapping[str, str],
) -> Resolved:
    """THE resolution of one workload's policy, field by field (module docstring).
    ``rules`` must be sorted by ``CompiledRule.order``."""
    from_annotations, ignored = annotation_values(target.annotations)
    selecting = [rule for rule in rules if rule.selects(target, namespace_labels)]
    values: dict[str, Any] = {}
    provenance: dict[str, dict[str, Any]] = {}
    for name in POLICY_FIELDS:
        if name in target.own:
            values[name] = target.own[name]
            provenance[name] = {"source": "own"}
            continue
        if name in from_annotations:
            key, value = from_annotations[name]
            values[name] = value
            provenance[name] = {"source": "annotation", "name": key}
            continue
        winner = next((rule for rule in selecting if name in rule.fields), None)
        if winner is not None:
            values[name] = winner.fields[name]
            provenance[name] = {
                "source": "rule",
                "name": winner.name,
                "rule_id": winner.rule_id,
                "level": winner.level,
            }
            continue
        values[name] = DEFAULTS[name]
        provenance[name] = {"source": "default"}
    return Resolved(values, provenance, ignored)


def describe_source(entry: Mapping[str, Any]) -> str:
    """Where a field comes from, as the pages and audit messages say it."""
    source = entry.get("source")
    if source == "own":
        return "this workload's policy"
    if source == "annotation":
        return f"the workload's annotation {entry.get('name')}"
    if source == "rule":
        return f"{entry.get('level', '')} rule {entry.get('name')}".strip()
    if source == "vpa-object":
        return "the VerticalPodAutoscaler object"
    return "the default"


def field_sources(policy: Policy) -> dict[str, dict[str, Any]]:
    """Where each field of ``policy`` comes from, with ``given_by`` in words: what
    the workload's page and API show."""
    sources: dict[str, dict[str, Any]] = {}
    for name in POLICY_FIELDS:
        if policy.is_mirrored:
            entry: dict[str, Any] = {"source": "vpa-object"}
        elif name in (policy.own_fields or ()):
            entry = {"source": "own"}
        else:
            entry = dict((policy.provenance or {}).get(name) or {"source": "default"})
        sources[name] = {**entry, "given_by": describe_source(entry)}
    return sources


def namespace_labels_of(
    stored: Mapping[str, Mapping[str, str]], namespace: str
) -> dict[str, str]:
    """A namespace's labels as discovery stored them, always with the name label."""
    return {**stored.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}


@dataclass
class PolicyDiff:
    """What resolution changes in one workload's policy."""

    workload_id: int
    cluster_id: int
    workload: str  # namespace/kind/name
    before: dict[str, Any]
    after: dict[str, Any]
    provenance: dict[str, dict[str, Any]]
    ignored_annotations: list[dict[str, str]]
    changed_fields: list[str] = field(default_factory=list)

    @property
    def turns_on_actuation(self) -> bool:
        """Whether the workload goes from Off to a mode vpaweb acts in."""
        return self.before.get("mode") == Policy.Mode.OFF and self.after.get(
            "mode"
        ) not in (None, Policy.Mode.OFF)


_POLICY_COLUMNS = (
    "workload_id",
    "workload__cluster_id",
    "workload__namespace",
    "workload__kind",
    "workload__name",
    "workload__labels",
    "workload__policy_annotations",
    "own_fields",
    "provenance",
    "ignored_annotations",
    *POLICY_FIELDS,
)


def _enabled_rules(
    overrides: Mapping[int | None, PolicyRule | None],
) -> list[CompiledRule]:
    """Every enabled rule compiled and sorted; ``overrides`` replaces rules by id
    (None: removed) and adds one under the key None (a preview of a new rule)."""
    rules: dict[int | None, PolicyRule] = {
        rule.pk: rule for rule in PolicyRule.objects.all()
    }
    for pk, rule in overrides.items():
        if rule is None:
            rules.pop(pk, None)
        else:
            rules[pk] = rule
    compiled = [compile_rule(rule) for rule in rules.values() if rule.is_enabled]
    return sorted(compiled, key=lambda rule: rule.order)


def policy_diffs(
    *,
    workload_ids: Iterable[int] | None = None,
    cluster_id: int | None = None,
    namespace: str | None = None,
    rule_overrides: Mapping[int | None, PolicyRule | None] | None = None,
    lock: bool = False,
    only: Q | None = None,
) -> list[PolicyDiff]:
    """The policies whose effective fields differ from what resolution gives them
    (with ``rule_overrides`` applied to the stored rules), mirrored ones excepted.
    ``namespace`` narrows to one namespace (of ``cluster_id``: a discovery shard).
    ``only`` narrows further (a ``Q`` on the policies). ``lock`` locks the policy
    rows (inside a transaction)."""
    rules = _enabled_rules(rule_overrides or {})
    policies = Policy.objects.filter(source=Policy.Source.VPAWEB)
    if only is not None:
        policies = policies.filter(only)
    if lock:
        policies = policies.select_for_update(of=("self",))
    if workload_ids is None:
        if cluster_id is not None:
            policies = policies.filter(workload__cluster_id=cluster_id)
        if namespace is not None:
            policies = policies.filter(workload__namespace=namespace)
        scopes = [policies]
    else:
        # By the ids alone (their policies' unique index), the cluster and namespace
        # checked on the rows read: with the workload's columns in the statement too,
        # PostgreSQL went through the namespace's workloads and, for each, the
        # policies (a shard's first contact, its rows inserted just now and not
        # analysed: a pass over every new policy per workload, minutes at 100,000
        # containers).
        ids = sorted(set(workload_ids))
        scopes = [
            policies.filter(workload_id__in=ids[start : start + BATCH])
            for start in range(0, len(ids), BATCH)
        ]
    namespace_labels: dict[int, dict[str, dict[str, str]]] = {}
    diffs: list[PolicyDiff] = []
    for scope in scopes:
        for row in scope.values_list(*_POLICY_COLUMNS).iterator(chunk_size=2000):
            if (cluster_id is not None and row[1] != cluster_id) or (
                namespace is not None and row[2] != namespace
            ):
                continue
            diff = _diff_of(row, rules, namespace_labels)
            if diff is not None:
                diffs.append(diff)
    return diffs


def _diff_of(
    row: Sequence[Any],
    rules: Sequence[CompiledRule],
    namespace_labels: dict[int, dict[str, dict[str, str]]],
) -> PolicyDiff | None:
    """One ``_POLICY_COLUMNS`` row resolved; None when nothing stored would change."""
    (pk, cluster, namespace, kind, name, labels, annotations, own, provenance,
     ignored, *values) = row  # fmt: skip
    current = dict(zip(POLICY_FIELDS, values, strict=True))
    if cluster not in namespace_labels:
        namespace_labels[cluster] = _stored_namespace_labels(cluster)
    target = Target(
        workload_id=pk,
        cluster_id=cluster,
        namespace=namespace,
        kind=kind,
        labels=labels or {},
        annotations=(annotations or {}) if kind in ANNOTATED_KINDS else {},
        own={f: current[f] for f in own or () if f in current},
    )
    resolved = resolve(
        target, rules, namespace_labels_of(namespace_labels[cluster], namespace)
    )
    changed = [f for f in POLICY_FIELDS if resolved.values[f] != current[f]]
    if (
        not changed
        and resolved.provenance == provenance
        and resolved.ignored_annotations == ignored
    ):
        return None
    return PolicyDiff(
        workload_id=pk,
        cluster_id=cluster,
        workload=f"{namespace}/{kind}/{name}",
        before={f: current[f] for f in changed},
        after={f: resolved.values[f] for f in changed},
        provenance=resolved.provenance,
        ignored_annotations=resolved.ignored_annotations,
        changed_fields=changed,
    )


def _stored_namespace_labels(cluster_id: int) -> dict[str, dict[str, str]]:
    from recommender.models import Cluster

    labels = (
        Cluster.objects.filter(pk=cluster_id)
        .values_list("namespace_labels", flat=True)
        .first()
    )
    return labels or {}


def _audit_message(diff: PolicyDiff, why: str) -> str:
    parts = []
    for name in diff.changed_fields:
        source = describe_source(diff.provenance[name])
        parts.append(
            f"{name} {diff.before[name]!r} → {diff.after[name]!r} from {source}"
        )
    return f"policy of {diff.workload} resolved again ({why}): " + "; ".join(parts)


def apply_diffs(
    diffs: Sequence[PolicyDiff],
    *,
    actor: User | None,
    actor_label: str,
    why: str,
    now: datetime,
) -> int:
    """Write ``diffs`` to the policy rows (inside the caller's transaction), one
    audit event per changed policy, withdraw approved changes of those now Off, and
    journal them for the webhook. Returns how many policies changed a field."""
    if not diffs:
        return 0
    # One UPDATE per distinct outcome (a rule gives its workloads the same fields
    # from the same source), batched by ids: far fewer statements than a row each.
    outcomes: dict[str, list[PolicyDiff]] = defaultdict(list)
    for diff in diffs:
        key = json.dumps(
            [diff.after, diff.provenance, diff.ignored_annotations],
            sort_keys=True,
            default=str,
        )
        outcomes[key].append(diff)
    for same in outcomes.values():
        sample = same[0]
        values: dict[str, Any] = {
            **sample.after,
            "provenance": sample.provenance,
            "ignored_annotations": sample.ignored_annotations,
        }
        if sample.changed_fields:
            values["updated_at"] = now
        ids = [diff.workload_id for diff in same]
        for start in range(0, len(ids), BATCH):
            Policy.objects.filter(
                workload_id__in=ids[start : start + BATCH],
                source=Policy.Source.VPAWEB,
            ).update(**values)
    changed = [diff for diff in diffs if diff.changed_fields]
    changed_ids = [diff.workload_id for diff in changed]
    policy_ids: dict[int, int] = {}
    for start in range(0, len(changed_ids), BATCH):
        policy_ids.update(
            Policy.objects.filter(
                workload_id__in=changed_ids[start : start + BATCH]
            ).values_list("workload_id", "pk")
        )
    events: list[AuditEvent] = []
    clusters: dict[int, list[int]] = defaultdict(list)
    to_off: list[int] = []
    for diff in changed:
        events.append(
            audit_row(
                action=Action.POLICY_UPDATE,
                message=_audit_message(diff, why),
                now=now,
                actor=actor,
                actor_label=actor_label,
                workload_id=diff.workload_id,
                object_type="policy",
                object_id=policy_ids.get(diff.workload_id, ""),
                before=diff.before,
                after={
                    **diff.after,
                    "from": {
                        name: describe_source(diff.provenance[name])
                        for name in diff.changed_fields
                    },
                },
            )
        )
        if "mode" in diff.changed_fields and diff.after["mode"] == Policy.Mode.OFF:
            to_off.append(diff.workload_id)
    AuditEvent.objects.bulk_create(events, batch_size=1000)
    for diff in diffs:
        if diff.changed_fields:
            clusters[diff.cluster_id].append(diff.workload_id)
    for cluster_id, workload_ids in clusters.items():
        note_admission_changes(cluster_id=cluster_id, workload_ids=workload_ids)
    for start in range(0, len(to_off), BATCH):
        for workload in Workload.objects.filter(pk__in=to_off[start : start + BATCH]):
            withdraw_approved_changes(
                workload=workload, actor=actor, label=actor_label, now=now
            )
    if events:
        transaction.on_commit(mark_admission_data_changed)
    logger.info("%d policies resolved again (%s)", len(events), why)
    return len(events)


def materialize_policies(
    *,
    now: datetime,
    why: str,
    workload_ids: Iterable[int] | None = None,
    cluster_id: int | None = None,
    actor: User | None = None,
    actor_label: str = "system",
) -> int:
    """Resolve the policies of these workloads (all when None) again and store what
    changed; returns how many policies changed a field."""
    with transaction.atomic():
        diffs = policy_diffs(
            workload_ids=workload_ids, cluster_id=cluster_id, lock=True
        )
        return apply_diffs(
            diffs, actor=actor, actor_label=actor_label, why=why, now=now
        )

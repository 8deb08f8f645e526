"""Policy rules: the effective policy of each workload, field by field, against a plain
reference of the precedence (own > annotation > label rule > namespace rule > cluster
rule > default; ties by priority, then the older rule), and what resolution stores."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recommender.cluster import label_selector
from recommender.models import AuditEvent, Cluster, Policy, PolicyRule, Workload
from recommender.services.policy.changes import update_policy
from recommender.services.policy.rules import (
    ANNOTATION_FIELDS,
    DEFAULTS,
    POLICY_FIELDS,
    materialize_policies,
)
from tests.factories import make_cluster, make_workload

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

# What generated rules, annotations and operators set: a few values per field, so
# that rules collide often.
FIELD_VALUES: dict[str, list[Any]] = {
    "mode": ["Off", "Initial", "Recreate", "InPlaceOrRecreate"],
    "profile": ["vpa", "peak-memory", "p95-cpu-p99-memory"],
    "approval": ["manual", "automatic"],
    "min_replicas": [1, 2, 5],
    "hpa_coordination": ["leave", "coordinated"],
    "startup_boost": [{}, {"factor": 2.0, "duration_s": 300}],
}
FIELDS = tuple(FIELD_VALUES)
ANNOTATION_OF = {name: key for key, name in ANNOTATION_FIELDS.items()}
NAMESPACES = ("shop", "ops")
KINDS = ("Deployment", "StatefulSet", "CronJob", "ReplicaSet")
# (cluster index, namespace, kind, name)
WORKLOADS = [
    (0, "shop", "Deployment", "api"),
    (0, "shop", "StatefulSet", "db"),
    (0, "ops", "CronJob", "backup"),
    (1, "shop", "Deployment", "api"),
    (1, "ops", "ReplicaSet", "legacy"),
    (1, "ops", "Deployment", "agent"),
]

rule_strategy = st.fixed_dictionaries(
    {
        "cluster": st.sampled_from([None, 0, 1]),
        "namespaces": st.sampled_from([[], ["shop"], ["shop", "ops"]]),
        "namespace_selector": st.sampled_from(["", "env=prod", "env!=prod"]),
        "workload_selector": st.sampled_from(
            ["", "team=a", "team in (a,b)", "!tier", "tier"]
        ),
        "kinds": st.sampled_from([[], ["Deployment"], ["StatefulSet", "CronJob"]]),
        "priority": st.integers(0, 2),
        "fields": st.dictionaries(
            st.sampled_from(FIELDS),
            st.integers(0, 3),
            min_size=1,
            max_size=3,
        ),
    }
)
workload_strategy = st.fixed_dictionaries(
    {
        "labels": st.fixed_dictionaries(
            {},
            optional={"team": st.sampled_from(["a", "b"]), "tier": st.just("web")},
        ),
        # An index into the field's values, or -1: a value no rule accepts.
        "annotations": st.dictionaries(
            st.sampled_from(["mode", "profile", "approval"]), st.integers(-1, 3)
        ),
        "own": st.dictionaries(st.sampled_from(FIELDS), st.integers(0, 3)),
        "mirrored": st.booleans(),
    }
)


def value_of(name: str, index: int) -> Any:
    values = FIELD_VALUES[name]
    return values[index % len(values)]


def reference(
    *,
    cluster: int,
    namespace: str,
    kind: str,
    labels: dict[str, str],
    ns_labels: dict[str, str],
    annotations: dict[str, str],
    own: dict[str, Any],
    rules: list[dict[str, Any]],
) -> dict[str, tuple[Any, str]]:
    """The precedence table, written as plainly as it reads: (value, source)."""

    def selects(rule: dict[str, Any]) -> bool:
        if rule["cluster"] is not None and rule["cluster"] != cluster:
            return False
        if rule["kinds"] and kind not in rule["kinds"]:
            return False
        if rule["namespaces"] and namespace not in rule["namespaces"]:
            return False
        ns_sel = label_selector.parse(rule["namespace_selector"])
        wl_sel = label_selector.parse(rule["workload_selector"])
        return label_selector.matches(ns_sel, ns_labels) and label_selector.matches(
            wl_sel, labels
        )

    def level(rule: dict[str, Any]) -> str:
        if rule["workload_selector"]:
            return "label"
        if rule["namespaces"] or rule["namespace_selector"]:
            return "namespace"
        return "cluster"

    result: dict[str, tuple[Any, str]] = {}
    for name in POLICY_FIELDS:
        if name in own:
            result[name] = (own[name], "own")
            continue
        key = ANNOTATION_OF.get(name)
        if (
            kind != "ReplicaSet"
            and key in annotations
            and annotations[key] in FIELD_VALUES.get(name, [])
        ):
            result[name] = (annotations[key], "annotation")
            continue
        found = None
        for wanted in ("label", "namespace", "cluster"):
            candidates = [
                r
                for r in rules
                if level(r) == wanted and selects(r) and name in r["policy"]
            ]
            if candidates:
                best = max(candidates, key=lambda r: (r["priority"], -r["id"]))
                found = (best["policy"][name], f"rule:{best['name']}")
                break
        result[name] = found or (DEFAULTS[name], "default")
    return result


@pytest.fixture
def fleet(db):
    clusters = [make_cluster("east"), make_cluster("west")]
    workloads = [
        make_workload(clusters[c], name, namespace=ns, kind=kind)
        for c, ns, kind, name in WORKLOADS
    ]
    return clusters, workloads


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    rules=st.lists(rule_strategy, max_size=6),
    states=st.lists(
        workload_strategy, min_size=len(WORKLOADS), max_size=len(WORKLOADS)
    ),
    prod=st.sets(st.sampled_from(NAMESPACES)),
)
def test_every_field_follows_the_precedence_table(fleet, rules, states, prod):
    clusters, workloads = fleet
    PolicyRule.objects.all().delete()
    for index, cluster in enumerate(clusters):
        Cluster.objects.filter(pk=cluster.pk).update(
            namespace_labels={
                ns: {"env": "prod" if ns in prod else "dev", "n": str(index)}
                for ns in NAMESPACES
            }
        )
    for workload, state in zip(workloads, states, strict=True):
        annotations = {
            ANNOTATION_OF[name]: "Bogus" if index < 0 else str(value_of(name, index))
            for name, index in state["annotations"].items()
        }
        own = {name: value_of(name, index) for name, index in state["own"].items()}
        Workload.objects.filter(pk=workload.pk).update(
            labels=state["labels"], policy_annotations=annotations
        )
        Policy.objects.filter(workload=workload).update(
            **{**DEFAULTS, **own},
            own_fields=list(own),
            provenance={},
            ignored_annotations=[],
            source="vpa-object" if state["mirrored"] else "vpaweb",
        )
        state["annotation_values"] = annotations
        state["own_values"] = own
    stored_rules = []
    for number, spec in enumerate(rules):
        policy = {name: value_of(name, i) for name, i in spec["fields"].items()}
        rule = PolicyRule.objects.create(
            name=f"r{number}",
            priority=spec["priority"],
            cluster=None if spec["cluster"] is None else clusters[spec["cluster"]],
            namespaces=spec["namespaces"],
            namespace_selector=spec["namespace_selector"],
            workload_selector=spec["workload_selector"],
            kinds=spec["kinds"],
            policy_fields=policy,
        )
        stored_rules.append(
            {**spec, "policy": policy, "id": rule.pk, "name": rule.name}
        )

    materialize_policies(now=NOW, why="test")

    for (c, ns, kind, _), workload, state in zip(
        WORKLOADS, workloads, states, strict=True
    ):
        policy = Policy.objects.get(workload=workload)
        if state["mirrored"]:
            # Never resolved: the upstream object's policy stays as it is.
            assert policy.provenance == {}
            continue
        expected = reference(
            cluster=c,
            namespace=ns,
            kind=kind,
            labels=state["labels"],
            ns_labels={
                "env": "prod" if ns in prod else "dev",
                "n": str(c),
                "kubernetes.io/metadata.name": ns,
            },
            annotations=state["annotation_values"],
            own=state["own_values"],
            rules=stored_rules,
        )
        for name in POLICY_FIELDS:
            value, source = expected[name]
            given_by = policy.provenance[name]
            shown = given_by["source"]
            if shown == "rule":
                shown = f"rule:{given_by['name']}"
            assert (getattr(policy, name), shown) == (value, source), name


def test_a_rule_change_is_audited_per_policy_naming_its_rule(fleet):
    _, workloads = fleet
    PolicyRule.objects.create(
        name="shop-recreate", namespaces=["shop"], policy_fields={"mode": "Recreate"}
    )

    changed = materialize_policies(now=NOW, why="rule shop-recreate created")

    assert changed == 3
    event = AuditEvent.objects.filter(workload=workloads[0]).get()
    assert event.after["mode"] == "Recreate"
    assert event.after["from"] == {"mode": "namespace rule shop-recreate"}
    assert "from namespace rule shop-recreate" in event.message


def test_an_operators_own_field_wins_and_inherit_gives_it_back_to_the_rules(fleet):
    _, workloads = fleet
    PolicyRule.objects.create(
        name="everything-initial", policy_fields={"mode": "Initial"}
    )
    update_policy(
        workload_id=workloads[0].pk, changes={"mode": "Off"}, actor=None, now=NOW
    )
    materialize_policies(now=NOW, why="test")
    policy = Policy.objects.get(workload=workloads[0])
    assert (policy.mode, policy.provenance["mode"]) == ("Off", {"source": "own"})

    update_policy(
        workload_id=workloads[0].pk, changes={}, inherit=["mode"], actor=None, now=NOW
    )

    policy.refresh_from_db()
    assert policy.mode == "Initial"
    assert policy.provenance["mode"]["name"] == "everything-initial"
    assert policy.own_fields == []

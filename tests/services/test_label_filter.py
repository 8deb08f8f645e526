"""A label selector narrows workloads in SQL exactly as the Kubernetes matcher
(cluster/label_selector.py) would on their labels, on SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recommender.cluster import label_selector
from recommender.errors import InvalidInput
from recommender.models import Workload
from recommender.services.readmodels.label_filter import (
    MAX_SELECTOR,
    PATTERN,
    parsed_selector,
    with_labels,
)
from tests.factories import make_cluster, make_workload

LABELS = {
    "pay-api": {"team": "payments", "tier": "web", "app.kubernetes.io/name": "pay"},
    "pay-batch": {"team": "payments", "tier": "batch"},
    "shop": {"team": "shop", "env": "prod"},
    "bare": {},
    "empty-team": {"team": ""},
}


@pytest.fixture
def labelled(db):
    cluster = make_cluster("prod")
    for name, labels in LABELS.items():
        workload = make_workload(cluster, name)
        workload.labels = labels
        workload.save(update_fields=["labels"])


@pytest.mark.parametrize(
    "selector",
    [
        "team=payments,tier!=batch",
        "team==payments",
        "tier!=batch",
        "team in (payments,shop)",
        "team notin (payments)",
        "env",
        "!env",
        "!tier,team",
        "app.kubernetes.io/name=pay",
        "team=",
        "",
    ],
)
def test_selector_matches_as_kubernetes_does(labelled, selector):
    requirements = label_selector.parse(selector)
    expected = {
        name
        for name, labels in LABELS.items()
        if label_selector.matches(requirements, labels)
    }
    found = set(
        with_labels(Workload.objects.all(), selector).values_list("name", flat=True)
    )
    assert found == expected


@pytest.mark.parametrize(
    "selector", ["team=(", "team in payments", "a b", "x,,y", "=v"]
)
def test_malformed_selector_is_invalid_input_naming_the_parameter(selector):
    with pytest.raises(InvalidInput) as raised:
        with_labels(Workload.objects.none(), selector)
    assert list(raised.value.fields) == ["label_selector"]


@settings(max_examples=100, deadline=None)
@given(st.from_regex(PATTERN, fullmatch=True).filter(lambda s: len(s) <= MAX_SELECTOR))
def test_every_selector_the_schema_allows_is_taken(selector):
    """The OpenAPI schema's pattern is the service's: a value it allows never 400s."""
    requirements = parsed_selector(selector)
    assert requirements == label_selector.parse(selector)


@pytest.mark.parametrize(
    "selector", ["team = payments", "a.b.c/x in (p, q)", "x notin ()", "k=,!j"]
)
def test_spaced_and_empty_forms_are_taken(selector):
    assert re.fullmatch(PATTERN, selector)
    assert parsed_selector(selector) == label_selector.parse(selector)


@pytest.mark.parametrize(
    "selector", [" team=a", "team=a\n", "a.b.c.d/x=y", "a\tin (b)"]
)
def test_what_the_pattern_refuses_the_service_refuses(selector):
    assert re.fullmatch(PATTERN, selector) is None
    with pytest.raises(InvalidInput):
        parsed_selector(selector)

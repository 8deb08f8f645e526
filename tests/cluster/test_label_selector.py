"""Label selectors as kubectl -l and the API's labelSelector read them."""

from __future__ import annotations

import pytest

from recommender.cluster.label_selector import Requirement, matches, parse

LABELS = {"team": "shop", "vpaweb.io/enabled": "true", "tier": ""}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("team=shop", True),
        ("team==shop", True),
        ("team = shop", True),
        ("team=pay", False),
        ("team!=pay", True),
        ("owner!=x", True),  # a missing key is "not equal"
        ("team in (pay, shop)", True),
        ("team notin (pay,shop)", False),
        ("owner notin (x)", True),
        ("vpaweb.io/enabled", True),
        ("!vpaweb.io/enabled", False),
        ("!owner", True),
        ("tier=", True),
        ("team=shop,vpaweb.io/enabled=true", True),
        ("team=shop,vpaweb.io/enabled=false", False),
    ],
)
def test_selectors_select_as_kubernetes_does(selector, expected):
    assert matches(parse(selector), LABELS) is expected


def test_requirements_are_parsed():
    assert parse("a=b, c in (d,e),!f") == (
        Requirement("a", "in", ("b",)),
        Requirement("c", "in", ("d", "e")),
        Requirement("f", "!"),
    )


@pytest.mark.parametrize(
    "selector",
    [
        "a b",
        "=x",
        "team in (a",
        "team=a,",
        "-bad=x",
        "team=a b",
        "x" * 64,
        "Team.Example/x=y",
        "team=" + "v" * 64,
    ],
)
def test_what_does_not_parse_is_refused_with_the_selector_named(selector):
    with pytest.raises(ValueError) as caught:
        parse(selector)
    assert repr(selector) in str(caught.value)

"""The price table (VPAWEB_PRICE_TABLE) and the order of a node's price sources."""

from __future__ import annotations

import pytest

from recommender.errors import InvalidInput
from recommender.services.refresh.node_prices import (
    NodeFacts,
    load_price_table,
    node_price,
)

HEADER = "match,per_core_hour,per_gib_hour,spot_discount\n"


def table(tmp_path, text: str) -> str:
    path = tmp_path / "prices.csv"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("rows", "where"),
    [
        ("*,0.03,0.004,0\nnode=a-*,abc,0.004,0\n", "line 3, column per_core_hour"),
        ("zone=eu,0.03,0.004,0\n", "line 2, column match"),
        ("node=,0.03,0.004,0\n", "line 2, column match"),
        ("*,0.03,-1,0\n", "line 2, column per_gib_hour"),
        ("*,0.03,0.004,1.5\n", "line 2, column spot_discount"),
        ("*,0.03,0.004\n", "line 2, column *"),
        ("label:pool,0.03,0.004,0\n", "line 2, column match"),
        ('"label:a=b,c",0.03,0.004,0\n', "line 2, column match"),
        ("label:-bad=x,0.03,0.004,0\n", "line 2, column match"),
    ],
)
def test_a_malformed_row_is_named_by_line_and_column(tmp_path, rows, where):
    path = table(tmp_path, HEADER + rows)
    with pytest.raises(InvalidInput) as raised:
        load_price_table(path)
    assert f"VPAWEB_PRICE_TABLE {path}, {where}" in str(raised.value)
    assert raised.value.field == "VPAWEB_PRICE_TABLE"


def test_a_header_without_a_price_column_is_an_error(tmp_path):
    path = table(tmp_path, "match,per_core_hour\n*,0.03\n")
    with pytest.raises(InvalidInput, match=r"line 1, column per_gib_hour: missing"):
        load_price_table(path)


def test_opencost_then_the_first_matching_row_then_the_list_prices(tmp_path, settings):
    rows = load_price_table(
        table(
            tmp_path,
            HEADER
            + "instance_type=m5.large,0.04,0.005,0.5\n"
            + "node=gpu-*,0.5,0.01,\n",
        )
    )
    by_metrics = NodeFacts(per_core_hour=0.02, per_gib_hour=0.002, spot=True)
    assert node_price("n1", by_metrics, rows).source == "opencost"
    assert node_price("n1", by_metrics, rows).per_core_hour == 0.02
    # The instance type and the spot flag come from the metrics' labels.
    spot = node_price("n1", NodeFacts(instance_type="m5.large", spot=True), rows)
    assert (spot.source, spot.per_core_hour, spot.per_gib_hour) == (
        "table",
        pytest.approx(0.02),
        pytest.approx(0.0025),
    )
    on_demand = node_price("n1", NodeFacts(instance_type="m5.large"), rows)
    assert on_demand.per_core_hour == pytest.approx(0.04)
    assert node_price("gpu-7", NodeFacts(), rows).per_core_hour == 0.5
    fallback = node_price("n2", NodeFacts(), rows)
    assert (fallback.source, fallback.per_core_hour) == (
        "default",
        settings.PRICE_PER_CORE_HOUR,
    )


def test_a_row_matches_the_nodes_labels(tmp_path):
    rows = load_price_table(
        table(
            tmp_path,
            HEADER
            # Two labels: quoted, as CSV keeps a comma inside a cell.
            + '"label:node.kubernetes.io/instance-type=m5.large, '
            + 'karpenter.sh/capacity-type=spot",0.01,0.001,0\n'
            + "label:node.kubernetes.io/instance-type=m5.large,0.04,0.005,0\n"
            + "label:cloud.google.com/gke-nodepool=batch,0.02,0.002,\n",
        )
    )
    assert rows[0].selector == (
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("karpenter.sh/capacity-type", "spot"),
    )

    def price(labels: dict[str, str]) -> tuple[str, float]:
        got = node_price("n1", NodeFacts(labels=labels), rows)
        return got.source, got.per_core_hour

    # kube-state-metrics' names of the labels (label_<name>).
    m5 = {"label_node_kubernetes_io_instance_type": "m5.large"}
    assert price(m5) == ("table", 0.04)
    assert price({**m5, "label_karpenter_sh_capacity_type": "spot"}) == (
        "table",
        0.01,
    )
    assert price({"label_cloud_google_com_gke_nodepool": "batch"}) == ("table", 0.02)
    # Without the labels (another usage source, KSM not allowing them) no row matches.
    assert price({})[0] == "default"
    assert price({"label_node_kubernetes_io_instance_type": "m5.xlarge"})[0] == (
        "default"
    )

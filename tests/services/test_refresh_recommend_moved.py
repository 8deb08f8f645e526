"""The recommend step gives a recommendation only to the rows whose values moved
from their latest stored ones (``recommend.is_significant_change``): a steady
cycle's other rows, most of them, build no dict and no pending explanation, and the
store writes exactly the ones given."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction

from recommender.models import Policy, RefreshRun
from recommender.services.refresh import cycle, recommend, warm_state
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.ingest import Row, Window
from recommender.services.refresh.recommend import is_significant_change
from tests.services.test_refresh_scale import NOW, fleet_in_windows


@pytest.mark.django_db
def test_only_the_rows_whose_values_moved_get_a_recommendation(settings, monkeypatch):
    cluster = fleet_in_windows(settings, "moved")
    fed: list[Row] = []
    given: list[Row] = []
    moved: list[bool] = []
    recommend_window = cycle.recommend_window

    def recording(window: Window) -> None:
        recommend_window(window)
        # As the recommend step left them, before the store moves any pointer.
        for group in window.groups.values():
            assert group.aggregates is not None
            for row in group.rows:
                if group.aggregates.total_samples[row.index]:
                    fed.append(row)
                if row.recommendation is not None:
                    given.append(row)
                    moved.append(
                        is_significant_change(
                            row.container.latest_values, row.recommendation["values"]
                        )
                    )

    monkeypatch.setattr(cycle, "recommend_window", recording)

    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["steady_windows"] > 1
    assert all(moved)
    # Every row given one is stored (no other writer), and the steady cycle's
    # other fed rows got none.
    assert len(given) == run.counts["recommendations_changed"] > 0
    assert len(fed) > len(given)


@pytest.mark.django_db
def test_rows_nothing_caps_get_the_values_capping_would_give(settings, monkeypatch):
    """The recommend step reads a row's values straight from the engine's columns
    where no policy bound or boost applies (``capping.caps_nothing``): a cycle gives
    the same recommendations, caps included, as one that caps every row through
    ``apply_vpa_policy``, on a fleet where some containers' maxAllowed caps them."""
    cluster = fleet_in_windows(settings, "caps")
    # Every third workload's containers capped to 20m and 32Mi.
    policies = Policy.objects.filter(workload__cluster=cluster).order_by("pk")
    capped_ids = list(policies.values_list("pk", flat=True))[::3]
    Policy.objects.filter(pk__in=capped_ids).update(
        container_policies=[
            {"containerName": "*", "maxAllowed": {"cpu": "20m", "memory": "32Mi"}}
        ]
    )
    recommend_window = cycle.recommend_window

    def given_by(window: Window, out: dict[int, Any]) -> None:
        recommend_window(window)
        for group in window.groups.values():
            for row in group.rows:
                if row.recommendation is not None:
                    pending = row.recommendation["explanation"]
                    out[row.container.pk] = (
                        row.recommendation["values"],
                        tuple(pending.caps),
                    )

    def cycle_gives(*, cap_every_row: bool) -> dict[int, Any]:
        out: dict[int, Any] = {}
        warm_state.forget_all()
        with monkeypatch.context() as patch:
            patch.setattr(cycle, "recommend_window", lambda w: given_by(w, out))
            if cap_every_row:
                patch.setattr(recommend, "caps_nothing", lambda *args: False)
            with transaction.atomic():
                # Half an hour on: uncapped rows' bounds move too.
                run = refresh_cluster(
                    cluster_id=cluster.pk, now=NOW + timedelta(minutes=30)
                )
                transaction.set_rollback(True)
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
        return out

    everywhere = cycle_gives(cap_every_row=True)
    assert cycle_gives(cap_every_row=False) == everywhere
    assert any(caps for _, caps in everywhere.values())
    assert any(not caps for _, caps in everywhere.values())

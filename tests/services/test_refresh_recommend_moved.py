"""The recommend step gives a recommendation only to the rows whose values moved
from their latest stored ones (``recommend.is_significant_change``): a steady
cycle's other rows, most of them, build no dict and no pending explanation, and the
store writes exactly the ones given."""

from __future__ import annotations

from datetime import timedelta

import pytest

from recommender.models import RefreshRun
from recommender.services.refresh import cycle
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

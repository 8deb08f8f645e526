"""Migration 0033 drops the recommendations' index of their container alone:
``rec_container_time`` leads with the container, and every stored recommendation
updated both (13,854 rows in one refresh at 100,000 containers)."""

from __future__ import annotations

import pytest
from django.db import connection

BEFORE = "0032_overview_stored_figures"
AFTER = "0033_recommendation_container_index"


def _indexed_column_lists() -> list[list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(
            cursor, "recommender_recommendation"
        )
    return [c["columns"] for c in constraints.values() if c["index"]]


@pytest.mark.django_db(transaction=True)
def test_the_container_is_indexed_once_by_the_history_index(migrate_to):
    migrate_to(BEFORE)
    assert ["container_id"] in _indexed_column_lists()

    migrate_to(AFTER)

    indexed = _indexed_column_lists()
    assert ["container_id"] not in indexed
    assert ["container_id", "created_at"] in indexed

""" "The webhook's inputs changed": a generation number every webhook process watches,
and the journal of which workloads changed (``note_admission_changes``).

The generation is bumped after each refresh cycle, policy change and kill switch: in
the Django cache (Redis when configured, so a separate ``webhook serve`` sees it) and
in this process. The journal (``AdmissionChange`` rows, written in the writer's own
transaction) tells each webhook process which workloads to reload. Kept apart from
``snapshot.py`` so the refresh and the policy services import it without cycles.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable
from datetime import timedelta

from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from recommender.models import AdmissionChange
from recommender.models.bulk import rows_per_statement

logger = logging.getLogger(__name__)

GENERATION_KEY = "vpaweb:admission:generation"
_local = itertools.count(1)
local_generation = 0
# Journal rows are kept this long; a webhook process that read none for half of it
# (the database unreachable) rebuilds its whole cache instead.
JOURNAL_KEEP = timedelta(hours=1)
# Rows per INSERT at most where rows are bound one by one (not PostgreSQL's one
# array; fewer where the backend binds fewer parameters: bulk.rows_per_statement).
JOURNAL_BATCH = 20_000
_PRUNE_EVERY_S = 60.0
_pruned_at = [-_PRUNE_EVERY_S]


def mark_admission_data_changed() -> None:
    """Tell every webhook process to reload its cache."""
    global local_generation
    local_generation = next(_local)
    try:
        cache.set(GENERATION_KEY, time.time_ns(), timeout=None)
    except Exception:  # the cache being down must not fail a refresh
        logger.warning("could not bump the admission cache generation", exc_info=True)


def shared_generation() -> tuple[int, int | None]:
    """(this process's generation, the cache's), compared by the snapshot holders."""
    try:
        value = cache.get(GENERATION_KEY)
    except Exception:
        value = None
    return local_generation, value if isinstance(value, int) else None


def note_admission_changes(*, cluster_id: int, workload_ids: Iterable[int]) -> int:
    """Journal that these workloads' webhook inputs changed (call it inside the
    transaction that changes them); returns how many rows were written."""
    ids = sorted(set(workload_ids))
    if not ids:
        return 0
    if connection.vendor == "postgresql":
        # One statement of one array: 13,854 model objects prepared a value at a
        # time took 0.22 s of a cycle's store.
        table = connection.ops.quote_name(AdmissionChange._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (cluster_id, workload_id, created_at)"
                " SELECT %s, w, %s FROM unnest(%s::bigint[]) AS w",
                [cluster_id, timezone.now(), ids],
            )
    else:
        AdmissionChange.objects.bulk_create(
            [AdmissionChange(cluster_id=cluster_id, workload_id=pk) for pk in ids],
            batch_size=rows_per_statement(JOURNAL_BATCH, parameters_per_row=3),
        )
    # After the commit, in a statement of its own: two writers' long transactions
    # never wait for each other's delete of the same old rows.
    transaction.on_commit(_prune)
    return len(ids)


def _prune() -> None:
    """Forget journal rows older than ``JOURNAL_KEEP`` (at most once a minute)."""
    if time.monotonic() - _pruned_at[0] < _PRUNE_EVERY_S:
        return
    _pruned_at[0] = time.monotonic()
    AdmissionChange.objects.filter(
        created_at__lt=timezone.now() - JOURNAL_KEEP
    ).delete()

"""The one call by which a refresh keeps the read models current: ``kept_current``.

It wraps the block that refreshes a cluster (or one namespace, a shard). After the
block the namespaces' totals are stored (phase ``totals``; a failure there is the
run's failure) for the workloads the block's writers noted (changes.py) and, with
``savings_snapshot``, the hour's savings snapshot is taken
(``savings_trend.record_snapshot_quietly``: logged, never raised). After a failing
block the totals are still stored, since what the block committed stays, but a
failure to store them is only logged, never hiding the block's own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from recommender.models import Cluster
from recommender.services.readmodels import changes, namespace_totals
from recommender.services.readmodels.savings_trend import record_snapshot_quietly

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def kept_current(
    cluster: Cluster,
    *,
    now: datetime,
    namespace: str | None,
    phases: Callable[[str], AbstractContextManager[Any]],
    savings_snapshot: bool = True,
) -> Iterator[None]:
    """Keep the read models of ``cluster`` (or its ``namespace``) current around the
    block; ``phases`` times the ``totals`` and ``savings_snapshot`` phases of the
    caller's run."""
    with changes.collected() as changed:
        try:
            yield
        except BaseException:
            try:
                namespace_totals.store(
                    cluster=cluster, now=now, namespace=namespace, changed=changed
                )
            except Exception:
                logger.exception(
                    "cluster %s: the namespaces' totals were not stored", cluster
                )
            raise
    with phases("totals"):
        namespace_totals.store(
            cluster=cluster, now=now, namespace=namespace, changed=changed
        )
    if savings_snapshot:
        # The first successful refresh of each hour snapshots the cluster's namespaces.
        with phases("savings_snapshot"):
            record_snapshot_quietly(cluster=cluster, now=now)

"""``ooms.SharedHistory``: the OOM history read once for a cycle's windows, each
window getting the kills of its namespaces after its start, in the history's order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from recommender.cluster.base import OomKill
from recommender.services.refresh.ooms import SharedHistory

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class _Source:
    """Just what ``oom_history`` asks of a source; counts the reads."""

    keeps_oom_history = True

    def __init__(self, kills: list[OomKill]) -> None:
        self.kills = kills
        self.reads: list[tuple[float, float]] = []

    def fetch_oom_kills(self, *, namespace, start_s, end_s, step_s):
        self.reads.append((start_s, end_s))
        return [k for k in self.kills if start_s < k.occurred_at.timestamp() <= end_s]

    def has_oom_series(self, *, at_s):
        return True


def _kill(namespace: str, minute: int) -> OomKill:
    return OomKill(
        namespace=namespace,
        pod=f"{namespace}-pod",
        container="app",
        occurred_at=T0 + timedelta(minutes=minute),
        memory_request_bytes=2**20,
    )


def test_each_window_gets_its_namespaces_kills_after_its_start_in_order() -> None:
    kills = [_kill(ns, m) for m in range(1, 7) for ns in ("shop", "jobs", "web")]
    source = _Source(kills)
    shared = SharedHistory(namespace=None)
    start, end = T0.timestamp(), (T0 + timedelta(hours=1)).timestamp()

    first = shared.kills(source, namespaces={"web", "shop"}, start_s=start, end_s=end)
    later = shared.kills(source, namespaces={"jobs"}, start_s=start + 3 * 60, end_s=end)

    assert first == [k for k in kills if k.namespace in ("shop", "web")]
    assert later == [k for k in kills[9:] if k.namespace == "jobs"]
    assert source.reads == [(start, end)]  # read once
    # A window starting before what was read reads again, from its start.
    earlier = shared.kills(source, namespaces={"web"}, start_s=start - 60, end_s=end)
    assert earlier == [k for k in kills if k.namespace == "web"]
    assert source.reads == [(start, end), (start - 60, end)]
    assert shared.kills(source, namespaces={"gone"}, start_s=start, end_s=end) == []

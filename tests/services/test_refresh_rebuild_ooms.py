"""A checkpoint rebuilt from history (new histogram key) gets its stored OOM kills back,
each exactly once, so the memory recommendation keeps its OOM bump."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.cluster.simulated import DAY_S, OOM_LOOKBACK_S
from recommender.models import Checkpoint, Cluster, Container, OomKill, Policy
from recommender.services.connections import cluster_adapter_for
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.discovery import upsert_discovery

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=1)
# A new key: cpu_half_life_s is part of Profile.histogram_key.
OVERRIDE = {"cpu_half_life_s": 43200.0}


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 10
    # History as long as the simulated OOM look-back: a first contact and a rebuild
    # then see the same kills, so the two can be compared exactly.
    settings.SIMULATION_HISTORY_DAYS = OOM_LOOKBACK_S / DAY_S


def engine_state(cluster):
    """Engine state and recommendation of every container, comparable across
    clusters."""
    return sorted(
        (
            c.container.workload.name,
            c.container.name,
            c.histogram_key,
            bytes(c.state),
            c.container.latest_recommendation.values_tuple(),
        )
        for c in Checkpoint.objects.filter(
            container__workload__cluster=cluster, sample_count__gt=0
        ).select_related("container__workload", "container__latest_recommendation")
    )


def test_a_profile_edit_keeps_the_oom_bump_of_stored_kills(db):
    # Edited: learned with upstream's profile, then the key changes and it rebuilds.
    edited = Cluster.objects.create(name="edited", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=edited.pk, now=NOW)
    stored = OomKill.objects.filter(container__workload__cluster=edited).count()
    assert stored > 0
    Policy.objects.filter(workload__cluster=edited).update(profile_overrides=OVERRIDE)
    run = refresh_cluster(cluster_id=edited.pk, now=LATER)
    # Steady: the same fleet with the edited profile from its first contact.
    steady = Cluster.objects.create(name="steady", kind=Cluster.Kind.SIMULATED)
    adapter = cluster_adapter_for(steady, now=LATER)
    upsert_discovery(cluster=steady, snapshot=adapter.discover(), now=LATER)
    Policy.objects.filter(workload__cluster=steady).update(profile_overrides=OVERRIDE)
    first = refresh_cluster(cluster_id=steady.pk, now=LATER)

    # Every stored kill of the window went back in, once (none is stored twice).
    accepted = run.counts.get("oom_kills_accepted", 0)
    assert accepted == first.counts["oom_kills_accepted"] > 0
    assert run.counts["oom_kills_refed"] == stored
    assert OomKill.objects.filter(container__workload__cluster=edited).count() == (
        OomKill.objects.filter(container__workload__cluster=steady).count()
    )
    assert engine_state(edited) == engine_state(steady)
    assert (
        len(engine_state(edited))
        == Container.objects.filter(
            workload__cluster=edited, latest_recommendation__isnull=False
        ).count()
    )

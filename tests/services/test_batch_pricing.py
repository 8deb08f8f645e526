"""Jobs and CronJobs are priced by the hours their pods run (the runs discovery saw;
a CronJob's from its schedule's runs a month x its mean run), not 730 hours a month per
replica."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.cluster.simulated import build_fleet
from recommender.models import Cluster, Workload, WorkloadPod
from recommender.services.connections import cluster_adapter_for
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.refresh.discovery import upsert_discovery
from recommender.services.refresh.pods import record_running_hours
from tests.factories import make_recommendation

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SEED, WORKLOADS = 7, 24
STEP = timedelta(minutes=2)
GIB = 2**30


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = SEED
    settings.SIMULATION_WORKLOADS = WORKLOADS


def discover_until(cluster: Cluster, end: datetime) -> None:
    at = NOW
    while at <= end:
        snapshot = cluster_adapter_for(cluster, now=at).discover()
        upsert_discovery(cluster=cluster, snapshot=snapshot, now=at)
        at += STEP


def true_run_hours(sim, start: datetime, end: datetime) -> float:
    """Hours the simulated CronJob's pods ran within (start, end]."""
    s, e = start.timestamp(), end.timestamp()
    return (
        sum(
            min(run_end, e) - max(run_start, s)
            for _, run_start, run_end in sim.runs_between(s, e)
        )
        / 3600
    )


@pytest.mark.django_db
def test_the_demo_cronjobs_savings_are_its_running_hours_times_the_price():
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    end = NOW + timedelta(hours=6)
    discover_until(cluster, end)
    fleet = build_fleet(SEED, WORKLOADS)
    cronjobs = [w for w in fleet.workloads if w.kind == "CronJob"]
    assert cronjobs, "the demo fleet has CronJobs"

    forecast = 0
    for sim in cronjobs:
        workload = Workload.objects.get(kind="CronJob", name=sim.name)
        assert workload.schedule == sim.schedule
        period_h = sim.cron_period_s / 3600
        finished = [
            run
            for run in sim.runs_between(NOW.timestamp(), end.timestamp())
            if NOW.timestamp() <= run[1] and run[2] < end.timestamp()
        ]
        if finished:
            # From the schedule: 730 / period runs a month of its mean finished run
            # (each seen ending at most a discovery step early).
            truth = 730 / period_h * sim.run_duration_s / 3600
            slack = 730 / period_h * STEP.total_seconds() / 3600
            forecast += 1
        else:
            # No run over yet: the hours per month its pods ran while discovery
            # looked, within one discovery step per run.
            truth = true_run_hours(sim, NOW, end) / 6 * 730
            runs = len(sim.runs_between(NOW.timestamp(), end.timestamp()))
            slack = runs * STEP.total_seconds() / 3600 / 6 * 730
        assert abs(workload.running_hours_month - truth) <= slack + 1e-6, sim.name
        assert workload.running_hours_month < 730 / 2  # not a pod all month
    assert forecast, "a demo CronJob is forecast from its schedule"

    sim = max(cronjobs, key=lambda w: w.run_duration_s)
    workload = Workload.objects.get(kind="CronJob", name=sim.name)
    container = workload.containers.exclude(kind="init").first()
    make_recommendation(container, cpu_millicores=10, memory_bytes=16 * 2**20)
    prices = Prices.from_settings()
    row = Workload.objects.with_provisioning(prices=prices, rules=risk_rules(end)).get(
        pk=workload.pk
    )

    hours = workload.running_hours_month
    per_hour = (container.request_cpu_millicores - 10) / 1000 * prices.per_core_hour + (
        container.request_memory_bytes - 16 * 2**20
    ) / GIB * prices.per_gib_hour
    assert row.savings == pytest.approx(hours * per_hour, rel=1e-9)
    # Not the month-long pod it was priced as before.
    assert row.savings < 730 * per_hour / 2


@pytest.mark.django_db
def test_a_cronjob_not_seen_running_yet_costs_nothing_and_others_keep_replicas():
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    quiet = Workload.objects.create(
        cluster=cluster, kind="CronJob", namespace="ops", name="nightly"
    )
    web = Workload.objects.create(
        cluster=cluster, kind="Deployment", namespace="ops", name="web", replicas=3
    )

    record_running_hours(cluster_id=cluster.pk, namespace=None, now=NOW)

    quiet.refresh_from_db()
    web.refresh_from_db()
    assert quiet.running_hours_month == 0.0
    assert web.running_hours_month is None


@pytest.mark.django_db
def test_a_run_counts_only_from_when_the_workload_was_first_seen():
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    job = Workload.objects.create(
        cluster=cluster,
        kind="Job",
        namespace="ops",
        name="migrate",
        first_seen_at=NOW - timedelta(hours=1),
    )
    # Started 3 h ago, seen running until now: one hour of the one hour observed.
    WorkloadPod.objects.create(
        cluster=cluster,
        workload=job,
        namespace="ops",
        name="migrate-x7k2p",
        started_at=NOW - timedelta(hours=3),
        ran_until=NOW,
    )

    record_running_hours(cluster_id=cluster.pk, namespace=None, now=NOW)

    job.refresh_from_db()
    assert job.running_hours_month == pytest.approx(730.0)


@pytest.mark.django_db
def test_a_schedule_not_understood_leaves_the_history_alone():
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    nightly = Workload.objects.create(
        cluster=cluster,
        kind="CronJob",
        namespace="ops",
        name="nightly",
        schedule="0 25 * * *",
        first_seen_at=NOW - timedelta(hours=2),
    )
    WorkloadPod.objects.create(
        cluster=cluster,
        workload=nightly,
        namespace="ops",
        name="nightly-1-x7k2p",
        started_at=NOW - timedelta(hours=2),
        ran_until=NOW - timedelta(hours=1),
    )

    record_running_hours(cluster_id=cluster.pk, namespace=None, now=NOW)
    nightly.refresh_from_db()
    assert nightly.running_hours_month == pytest.approx(730.0 / 2)  # history

    # Understood: @daily runs 730/24 times a month, an hour each.
    Workload.objects.filter(pk=nightly.pk).update(schedule="@daily")
    record_running_hours(cluster_id=cluster.pk, namespace=None, now=NOW)
    nightly.refresh_from_db()
    assert nightly.running_hours_month == pytest.approx(730.0 / 24)


@pytest.mark.django_db
def test_at_first_contact_a_cronjob_is_priced_by_its_back_filled_runs(settings):
    # The first refresh has seen no run end, but its back-filled usage holds a day
    # of them: the running hours come from those, so an over-provisioned CronJob
    # shows its waste on the first page load (the demo's data/profile-report).
    settings.SIMULATION_HISTORY_DAYS = 1.0
    from recommender.services.refresh.cycle import refresh_cluster

    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)

    fleet = build_fleet(SEED, WORKLOADS)
    cronjobs = [w for w in fleet.workloads if w.kind == "CronJob"]
    assert cronjobs
    prices = Prices.from_settings()
    rows = {
        w.name: w
        for w in Workload.objects.with_provisioning(
            prices=prices, rules=risk_rules(NOW)
        ).filter(kind="CronJob")
    }
    for sim in cronjobs:
        row = rows[sim.name]
        # Truth: the runs a month of its schedule x its run, within one sample a
        # run and one run of the day (a run cut by the history's edges).
        runs_a_month = 730 / (sim.cron_period_s / 3600)
        truth = runs_a_month * sim.run_duration_s / 3600
        runs_a_day = 24 / (sim.cron_period_s / 3600)
        slack = runs_a_month * 60 / 3600 + truth / runs_a_day
        assert row.running_hours_month > 0, sim.name
        assert abs(row.running_hours_month - truth) <= slack, sim.name
    # An over-provisioned one is wasteful, priced at those hours.
    sim = max(cronjobs, key=lambda w: w.run_duration_s)
    workload = Workload.objects.get(kind="CronJob", name=sim.name)
    container = workload.containers.exclude(kind="init").first()
    make_recommendation(container, cpu_millicores=10, memory_bytes=16 * 2**20)
    row = Workload.objects.with_provisioning(prices=prices, rules=risk_rules(NOW)).get(
        pk=workload.pk
    )
    per_hour = (container.request_cpu_millicores - 10) / 1000 * prices.per_core_hour + (
        container.request_memory_bytes - 16 * 2**20
    ) / GIB * prices.per_gib_hour
    assert row.savings > 0
    assert row.savings == pytest.approx(workload.running_hours_month * per_hour)


@pytest.mark.django_db
def test_a_cronjob_shows_its_savings_per_run_from_its_schedule(client, settings):
    from recommender.models import Container
    from recommender.roles import Role
    from tests.factories import make_user

    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    report = Workload.objects.create(
        cluster=cluster,
        kind="CronJob",
        namespace="data",
        name="profile-report",
        schedule="14 */12 * * *",  # twice a day: 60.83 runs a 730-hour month
        running_hours_month=10.0,
    )
    container = Container.objects.create(
        workload=report, name="report", request_cpu_millicores=2000,
        request_memory_bytes=3 * GIB,
    )  # fmt: skip
    make_recommendation(container, cpu_millicores=350, memory_bytes=392 * 2**20)
    row = Workload.objects.with_provisioning(
        prices=Prices.from_settings(), rules=risk_rules(NOW)
    ).get(pk=report.pk)
    runs = 730 / 12
    client.force_login(make_user("vera", Role.VIEWER))
    api = client.get(f"/api/v1/workloads/{report.pk}/").json()
    listed = client.get("/api/v1/workloads/?search=profile-report").json()["results"]
    for answer in (api, listed[0]):
        assert answer["runs_a_month"] == round(runs, 2)
        assert answer["savings_per_run"] == round(row.savings / runs, 2)
    page = client.get(f"/workloads/{report.pk}/").content.decode()
    assert f"60.8 runs a month, ${row.savings / runs:,.2f} a run" in page

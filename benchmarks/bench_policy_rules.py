"""A namespace rule over a large fleet: preview, apply, then the updater's next cycle.

python -m benchmarks.bench_policy_rules    (or: make bench BENCH=policy_rules)"""
# Seeds a scratch database (SQLite in a temporary VPAWEB_VAR_DIR, or, with
# DATABASE_URL, a scratch PostgreSQL database dropped afterwards) with BENCH_WORKLOADS
# workloads (default 12,000) in 6 namespaces, every one in mode Off with one container
# whose recommendation is far below its request. Then times, for a namespace rule
# switching one namespace (a sixth: 2,000 workloads) to Recreate:
#
# - the preview (``save_rule(dry_run=True)``): target 1 s;
# - the apply (``save_rule(confirm=True)``: every policy written, audited and journaled
#   for the webhook): target 5 s;
#
# and checks that the updater's next cycle proposes for exactly those workloads.

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.bench_backfill import _scratch_database

PREVIEW_TARGET_S = 1.0
APPLY_TARGET_S = 5.0
NAMESPACES = 6
MI = 2**20
NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


def _seed(cluster, workload_count: int):
    """Workloads in Off, one container each, recommendations far below requests."""
    from recommender.models import Container, Policy, Recommendation, Workload

    workloads = Workload.objects.bulk_create(
        [
            Workload(
                cluster=cluster,
                kind="Deployment",
                namespace=f"team-{i % NAMESPACES}",
                name=f"service-{i:05d}",
                replicas=2,
                labels={"app": f"service-{i:05d}"},
            )
            for i in range(workload_count)
        ],
        batch_size=2000,
    )
    Policy.objects.bulk_create(
        [Policy(workload=w, mode="Off") for w in workloads], batch_size=2000
    )
    containers = Container.objects.bulk_create(
        [
            Container(
                workload=w,
                name="app",
                request_cpu_millicores=500,
                request_memory_bytes=512 * MI,
            )
            for w in workloads
        ],
        batch_size=2000,
    )
    recommendations = Recommendation.objects.bulk_create(
        [
            Recommendation(
                container=c,
                created_at=NOW - timedelta(hours=1),
                target_cpu_millicores=200,
                target_memory_bytes=500 * MI,
                lower_cpu_millicores=160,
                lower_memory_bytes=400 * MI,
                upper_cpu_millicores=240,
                upper_memory_bytes=600 * MI,
                uncapped_cpu_millicores=200,
                uncapped_memory_bytes=500 * MI,
                confidence=8.0,
            )
            for c in containers
        ],
        batch_size=2000,
    )
    for c, rec in zip(containers, recommendations, strict=True):
        c.latest_recommendation = rec
    Container.objects.bulk_update(
        containers, ["latest_recommendation"], batch_size=2000
    )
    return workloads


def _snapshot(workloads):
    """Two running pods per workload (upstream evicts none of a single replica),
    500m / 512Mi, as discovery reports them."""
    from recommender.cluster.base import (
        ClusterSnapshot,
        ContainerSpec,
        PodInfo,
        WorkloadInfo,
    )
    from recommender.engine.resources import Resources

    spec = (ContainerSpec("app", requests=Resources(500, 512 * MI)),)
    infos = []
    for w in workloads:
        rs = f"{w.name}-6b9c8d7f5"
        pods = tuple(
            PodInfo(
                namespace=w.namespace,
                name=f"{rs}-p{j}",
                phase="Running",
                containers=spec,
                start_time=NOW - timedelta(hours=2),
                uid=f"{w.name}-{j}",
                owner_kind="ReplicaSet",
                owner_name=rs,
            )
            for j in range(2)
        )
        infos.append(
            WorkloadInfo(
                kind="Deployment",
                namespace=w.namespace,
                name=w.name,
                containers=spec,
                replicas=2,
                pods=pods,
            )
        )
    return ClusterSnapshot(workloads=tuple(infos))


def _run(database: str, workload_count: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    from recommender.models import Cluster, ResizeChange, Workload
    from recommender.services.actuation.cycle import run_cycle
    from recommender.services.policy.rule_edits import save_rule

    call_command("migrate", verbosity=0, interactive=False)
    print(f"database: {database}")
    cluster = Cluster.objects.create(
        name="bench", kind="simulated", actuation_allowed=True
    )
    workloads = _seed(cluster, workload_count)
    rule = {
        "name": "team-0-recreate",
        "namespaces": ["team-0"],
        "policy": {"mode": "Recreate"},
    }
    started = time.perf_counter()
    preview = save_rule(rule_id=None, data=rule, actor=None, now=NOW, dry_run=True)
    preview_s = time.perf_counter() - started
    started = time.perf_counter()
    applied = save_rule(rule_id=None, data=rule, actor=None, now=NOW, confirm=True)
    apply_s = time.perf_counter() - started
    selected = set(
        Workload.objects.filter(cluster=cluster, namespace="team-0").values_list(
            "pk", flat=True
        )
    )
    report = run_cycle(
        cluster,
        now=NOW + timedelta(minutes=1),
        snapshot=_snapshot(workloads),
        holder="bench",
    )
    proposed = set(
        ResizeChange.objects.filter(workload__cluster=cluster).values_list(
            "workload_id", flat=True
        )
    )
    print(
        f"{workload_count} workloads, rule over {len(selected)}: preview "
        f"{preview_s:.2f} s ({len(preview.diffs)} workloads), apply {apply_s:.2f} s "
        f"({len(applied.diffs)} workloads)"
    )
    print(
        f"next updater cycle: {report.proposed} proposals, for exactly the rule's "
        f"workloads: {proposed == selected}"
    )
    # The same by a namespace label selector: no column narrows what is read, so
    # every policy is resolved (the slow case).
    by_label = {
        "name": "team-1-recreate",
        "namespace_selector": "kubernetes.io/metadata.name=team-1",
        "policy": {"mode": "Recreate"},
    }
    started = time.perf_counter()
    save_rule(rule_id=None, data=by_label, actor=None, now=NOW, dry_run=True)
    label_preview_s = time.perf_counter() - started
    started = time.perf_counter()
    save_rule(rule_id=None, data=by_label, actor=None, now=NOW, confirm=True)
    label_apply_s = time.perf_counter() - started
    print(
        f"by namespace label selector: preview {label_preview_s:.2f} s, apply "
        f"{label_apply_s:.2f} s"
    )
    for what, seconds, target in (
        ("preview", preview_s, PREVIEW_TARGET_S),
        ("apply", apply_s, APPLY_TARGET_S),
        ("preview by selector", label_preview_s, PREVIEW_TARGET_S),
        ("apply by selector", label_apply_s, APPLY_TARGET_S),
    ):
        verdict = "within" if seconds <= target else "OVER"
        print(f"{what} {seconds:.2f} s: {verdict} the {target:g} s target")


def main() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    workload_count = int(os.environ.get("BENCH_WORKLOADS", "12000"))
    scratch = Path(tempfile.mkdtemp(prefix="vpaweb-bench-rules-"))
    try:
        with _scratch_database(scratch) as database:
            _run(database, workload_count)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

"""`manage.py scan`: one command from a kubeconfig context and a Prometheus URL to a
report of every container's recommendation, with no server and no database to set up.

The work runs in a child process whose database is a temporary SQLite file: it adds the
cluster, back-fills its history from Prometheus with the refresh's own engine (so the
recommendations are the server's) and prints them; progress goes to stderr. Exit codes:
0 every container with a recommendation is within the tolerance (``VPAWEB_CHECK_*``
unless given, as ``check``), 1 one is outside it, 2 an error.
"""
# The child is this command again with ``VPAWEB_VAR_DIR`` a temporary directory and
# ``DATABASE_URL`` and ``REDIS_URL`` unset (tasks run eagerly); the directory is removed
# when it ends. It migrates the database, adds the cluster (``add_kubernetes_cluster``:
# the API server must answer) and runs ``backfill_cluster``.

from __future__ import annotations

import csv
import html
import io
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from recommender.engine.quantity import format_cpu, format_memory
from recommender.engine.resources import CPU, MEMORY
from recommender.errors import VpawebError
from recommender.text import csv_cell

FORMATS = ("table", "json", "csv", "yaml", "html")
# Set in the child process, which does the work in its temporary database.
CHILD = "VPAWEB_SCAN_CHILD"
CLUSTER = "scan"
CSV_FIELDS = [
    "namespace",
    "kind",
    "workload",
    "container",
    "request_cpu",
    "request_memory",
    "target_cpu",
    "target_memory",
    "lower_cpu",
    "lower_memory",
    "upper_cpu",
    "upper_memory",
    "savings_monthly",
    "at_risk",
    "within_tolerance",
]


class Command(BaseCommand):
    help = (
        "Recommend requests for every container of a cluster from its Prometheus "
        "history, with no server or database to set up; exit 1 when a request is "
        "outside the tolerance."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--context", required=True, help="the kubeconfig context (KUBECONFIG)"
        )
        parser.add_argument(
            "--prometheus",
            default=settings.PROMETHEUS_URL,
            help="the Prometheus URL (default PROMETHEUS_URL); its PROMETHEUS_* "
            "settings (token, basic auth, CA) apply",
        )
        parser.add_argument(
            "--namespace-selector",
            default="",
            help="only the namespaces with these labels (a label selector)",
        )
        parser.add_argument(
            "--days",
            type=float,
            default=settings.PROMETHEUS_BACKFILL_DAYS,
            help="days of history to read (default PROMETHEUS_BACKFILL_DAYS)",
        )
        parser.add_argument(
            "--now",
            default="",
            help="the end of the history, ISO 8601 with a zone (default: now)",
        )
        parser.add_argument("--output", choices=FORMATS, default="table")
        parser.add_argument(
            "--cpu-tolerance",
            type=float,
            default=settings.CHECK_CPU_PERCENT,
            help="percent a CPU request may differ from the target (default "
            "VPAWEB_CHECK_CPU_PERCENT)",
        )
        parser.add_argument(
            "--memory-tolerance",
            type=float,
            default=settings.CHECK_MEMORY_PERCENT,
            help="percent a memory request may differ from the target (default "
            "VPAWEB_CHECK_MEMORY_PERCENT)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["prometheus"]:
            raise CommandError("--prometheus: give the Prometheus URL", returncode=2)
        if options["now"] and _parsed_now(options["now"]) is None:
            raise CommandError(
                f"--now: {options['now']!r} is not ISO 8601 with a zone", returncode=2
            )
        if os.environ.get(CHILD) != "1":
            sys.exit(_run_child(options))
        try:
            rows = _scan(options, progress=self.stderr)
        except VpawebError as exc:
            raise CommandError(exc.message, returncode=2) from None
        self.stdout.write(RENDER[options["output"]](rows, options), ending="")
        if not all(row["within_tolerance"] for row in rows):
            sys.exit(1)


def _parsed_now(text: str) -> datetime | None:
    parsed = parse_datetime(text)
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def _run_child(options: dict[str, Any]) -> int:
    """This command again, in a process whose database is a temporary SQLite file."""
    with tempfile.TemporaryDirectory(prefix="vpaweb-scan-") as var_dir:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL")
        }
        env.update(
            {
                CHILD: "1",
                "VPAWEB_VAR_DIR": var_dir,
                "VPAWEB_SIMULATION": "false",
                "PROMETHEUS_URL": options["prometheus"],
                "SECRET_KEY": env.get("SECRET_KEY") or "scan-only-key",
            }
        )
        argv = [
            "--context",
            options["context"],
            "--prometheus",
            options["prometheus"],
            "--namespace-selector",
            options["namespace_selector"],
            "--days",
            str(options["days"]),
            "--output",
            options["output"],
            "--cpu-tolerance",
            str(options["cpu_tolerance"]),
            "--memory-tolerance",
            str(options["memory_tolerance"]),
        ]
        if options["now"]:
            argv += ["--now", options["now"]]
        manage = Path(settings.BASE_DIR) / "manage.py"
        return subprocess.run(
            [sys.executable, str(manage), "scan", *argv], env=env, check=False
        ).returncode


def _scan(options: dict[str, Any], *, progress: Any) -> list[dict[str, Any]]:
    """Migrate the temporary database, add the cluster, back-fill, read the rows."""
    from django.core.management import call_command

    from recommender.services.operations.clusters import add_kubernetes_cluster
    from recommender.services.refresh.backfill import backfill_cluster

    now = _parsed_now(options["now"]) if options["now"] else timezone.now()
    assert now is not None
    progress.write("scan: preparing the temporary database")
    call_command("migrate", verbosity=0, interactive=False)
    cluster, version = add_kubernetes_cluster(
        name=CLUSTER,
        context=options["context"],
        namespace_selector=options["namespace_selector"],
    )
    progress.write(
        f"scan: context {options['context']!r} (Kubernetes {version}); reading "
        f"{options['days']:g} days of history from {options['prometheus']}"
    )

    def report(run: Any) -> None:
        progress.write(f"scan: {run.progress:.0%} of the history read")

    run = backfill_cluster(
        cluster_id=cluster.pk, now=now, days=options["days"], on_progress=report
    )
    if run.status != run.Status.SUCCEEDED:
        raise CommandError(f"the back-fill failed: {run.error}", returncode=2)
    return _rows(options, now=now)


def _rows(options: dict[str, Any], *, now: datetime) -> list[dict[str, Any]]:
    """Every container with a recommendation, with its facts and verdict."""
    from recommender.models import Container
    from recommender.services.advice.drift import Tolerance
    from recommender.services.readmodels.provisioning import Prices, risk_rules

    tolerance = Tolerance.from_settings(
        cpu_percent=options["cpu_tolerance"],
        memory_percent=options["memory_tolerance"],
    )
    containers = (
        Container.objects.shown()
        .recommended()
        .filter(latest_recommendation__isnull=False)
        .select_related("workload", "latest_recommendation")
        .with_provisioning(prices=Prices.from_settings(), rules=risk_rules(now))
        .order_by("workload__namespace", "workload__kind", "workload__name", "position")
    )
    rows = []
    for container in containers:
        rec = container.latest_recommendation
        assert rec is not None
        within = True
        for resource, request, target in (
            (CPU, container.request_cpu_millicores, rec.target_cpu_millicores),
            (MEMORY, container.request_memory_bytes, rec.target_memory_bytes),
        ):
            if target is None:
                continue
            if request is None or abs(request - target) > tolerance.allowed(
                resource, target
            ):
                within = False
        rows.append(
            {
                "namespace": container.workload.namespace,
                "kind": container.workload.kind,
                "workload": container.workload.name,
                "containerName": container.name,
                "requests": _quantities(
                    container.request_cpu_millicores, container.request_memory_bytes
                ),
                "target": _quantities(
                    rec.target_cpu_millicores, rec.target_memory_bytes
                ),
                "lowerBound": _quantities(
                    rec.lower_cpu_millicores, rec.lower_memory_bytes
                ),
                "upperBound": _quantities(
                    rec.upper_cpu_millicores, rec.upper_memory_bytes
                ),
                "uncappedTarget": _quantities(
                    rec.uncapped_cpu_millicores, rec.uncapped_memory_bytes
                ),
                # Annotations of with_provisioning.
                "savings_monthly": round(container.savings or 0.0, 2),  # type: ignore[attr-defined]
                "at_risk": container.risk > 0,  # type: ignore[attr-defined]
                "within_tolerance": within,
            }
        )
    return rows


def _quantities(cpu_millicores: int | None, memory_bytes: int | None) -> dict[str, str]:
    """Kubernetes quantities (upstream's exact form), the resources that are set."""
    out = {}
    if cpu_millicores is not None:
        out["cpu"] = format_cpu(cpu_millicores)
    if memory_bytes is not None:
        out["memory"] = format_memory(memory_bytes)
    return out


def _document(rows: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    outside = sum(1 for row in rows if not row["within_tolerance"])
    return {
        "context": options["context"],
        "tolerance": {
            "cpu_percent": options["cpu_tolerance"],
            "memory_percent": options["memory_tolerance"],
        },
        "outside_tolerance": outside,
        "recommendations": rows,
    }


def render_json(rows: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """The report as one JSON document."""
    return json.dumps(_document(rows, options), indent=2) + "\n"


def render_yaml(rows: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """The JSON document as YAML."""
    return yaml.safe_dump(_document(rows, options), sort_keys=False)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    flat = {k: row[k] for k in ("namespace", "kind", "workload")}
    flat["container"] = row["containerName"]
    for key, prefix in (
        ("requests", "request"),
        ("target", "target"),
        ("lowerBound", "lower"),
        ("upperBound", "upper"),
    ):
        flat[f"{prefix}_cpu"] = row[key].get("cpu", "")
        flat[f"{prefix}_memory"] = row[key].get("memory", "")
    for key in ("savings_monthly", "at_risk", "within_tolerance"):
        flat[key] = row[key]
    return flat


def render_csv(rows: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """One row per container."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(v) for k, v in _flat(row).items()})
    return out.getvalue()


def render_table(rows: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """Aligned columns for a terminal, and a last line with the verdict."""
    header = ["NAMESPACE", "WORKLOAD", "CONTAINER", "REQUESTS", "TARGET",
              "SAVINGS/MO", "AT RISK", "TOLERANCE"]  # fmt: skip
    lines = [header]
    for row in rows:
        flat = _flat(row)
        lines.append(
            [
                row["namespace"],
                f"{row['kind']}/{row['workload']}",
                row["containerName"],
                f"{flat['request_cpu'] or '-'} {flat['request_memory'] or '-'}",
                f"{flat['target_cpu'] or '-'} {flat['target_memory'] or '-'}",
                f"{row['savings_monthly']:.2f}",
                "yes" if row["at_risk"] else "",
                "within" if row["within_tolerance"] else "OUTSIDE",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "".join(
        "  ".join(
            cell.ljust(width) for cell, width in zip(line, widths, strict=True)
        ).rstrip()
        + "\n"
        for line in lines
    )
    outside = sum(1 for row in rows if not row["within_tolerance"])
    return text + f"{len(rows)} containers, {outside} outside the tolerance\n"


# One self-contained page: no script, no external asset, every cell escaped.
HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; }}
th {{ background: #f0f0f0; }}
td.outside {{ color: #b00020; font-weight: bold; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>{summary}</p>
<table>
<thead><tr>{header}</tr></thead>
<tbody>
{body}
</tbody>
</table>
</body>
</html>
"""


def render_html(rows: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """The CSV's columns as one HTML page, outside-tolerance rows marked."""
    lines = []
    for row in rows:
        flat = _flat(row)
        cells = "".join(
            f'<td class="outside">{html.escape(str(value))}</td>'
            if key == "within_tolerance" and not value
            else f"<td>{html.escape(str(value))}</td>"
            for key, value in flat.items()
        )
        lines.append(f"<tr>{cells}</tr>")
    outside = sum(1 for row in rows if not row["within_tolerance"])
    return HTML_PAGE.format(
        title=html.escape(f"vpaweb scan of {options['context']}"),
        summary=html.escape(
            f"{len(rows)} containers, {outside} outside the tolerance (CPU "
            f"{options['cpu_tolerance']:g} %, memory {options['memory_tolerance']:g} %)"
        ),
        header="".join(f"<th>{html.escape(name)}</th>" for name in CSV_FIELDS),
        body="\n".join(lines),
    )


RENDER = {
    "table": render_table,
    "json": render_json,
    "csv": render_csv,
    "yaml": render_yaml,
    "html": render_html,
}

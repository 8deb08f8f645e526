"""`manage.py recommend`: recommendations from usage CSV files, without a cluster."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from recommender.engine import PROFILES, get_profile, humanize_cpu
from recommender.engine.quantity import format_memory_readable, readable_resource_list
from recommender.errors import InvalidInput
from recommender.services.replay.offline import (
    OfflineRecommendation,
    recommend_from_csv,
)
from recommender.text import csv_cell

FORMATS = ("table", "json", "yaml", "csv")
CSV_FIELDS = [
    "namespace",
    "workload",
    "container",
    "target_cpu",
    "target_memory",
    "lower_cpu",
    "lower_memory",
    "upper_cpu",
    "upper_memory",
    "uncapped_cpu",
    "uncapped_memory",
]


class Command(BaseCommand):
    help = (
        "Recommend container requests from usage samples in CSV, exactly as the "
        "upstream VPA recommender would (with the default profile)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--samples",
            required=True,
            type=Path,
            help=(
                "usage CSV: "
                "timestamp,namespace,workload,pod,container,cpu_cores,memory_bytes"
            ),
        )
        parser.add_argument(
            "--oom-events",
            type=Path,
            help=(
                "OOM CSV: "
                "timestamp,namespace,workload,pod,container,memory_request_bytes"
            ),
        )
        parser.add_argument(
            "--profile",
            default="vpa",
            help=f"one of: {', '.join(PROFILES)} (default vpa)",
        )
        parser.add_argument("--format", choices=FORMATS, default="table")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["profile"] not in PROFILES:
            raise CommandError(
                f"--profile: unknown profile {options['profile']!r}; choose one of "
                f"{', '.join(PROFILES)}"
            )
        profile = get_profile(options["profile"])
        try:
            results = recommend_from_csv(
                usage_path=options["samples"],
                oom_path=options["oom_events"],
                profile=profile,
            )
        except InvalidInput as exc:
            raise CommandError(exc.message) from None
        render = {
            "table": render_table,
            "json": render_json,
            "yaml": render_yaml,
            "csv": render_csv,
        }[options["format"]]
        self.stdout.write(render(results), ending="")


def render_json(results: list[OfflineRecommendation]) -> str:
    """``{"recommendations": [...]}`` in upstream's status format."""
    body = {"recommendations": [r.to_status_dict() for r in results]}
    return json.dumps(body, indent=2) + "\n"


def render_yaml(results: list[OfflineRecommendation]) -> str:
    """The JSON document as YAML."""
    body = {"recommendations": [r.to_status_dict() for r in results]}
    return yaml.safe_dump(body, sort_keys=False)


def render_csv(results: list[OfflineRecommendation]) -> str:
    """One row per container, quantities in Kubernetes form."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for result in results:
        rec = result.recommendation
        row = {
            "namespace": result.namespace,
            "workload": result.workload,
            "container": result.container,
        }
        for attribute, prefix in (
            ("target", "target"),
            ("lower_bound", "lower"),
            ("upper_bound", "upper"),
            ("uncapped_target", "uncapped"),
        ):
            # For people: memory rounded up to a readable quantity ("729Mi"); the
            # JSON and YAML keep upstream's exact quantities.
            amounts = readable_resource_list(getattr(rec, attribute))
            row[f"{prefix}_cpu"] = amounts.get("cpu", "")
            row[f"{prefix}_memory"] = amounts.get("memory", "")
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return out.getvalue()


def render_table(results: list[OfflineRecommendation]) -> str:
    """Aligned columns in human units, for people."""
    header = [
        "NAMESPACE",
        "WORKLOAD",
        "CONTAINER",
        "CPU TARGET",
        "CPU RANGE",
        "MEMORY TARGET",
        "MEMORY RANGE",
    ]
    rows = [header]
    omitted = []
    for result in results:
        rec = result.recommendation
        for item in rec.explanation.omitted:
            omitted.append(
                f"{result.namespace}/{result.workload}/{result.container}: "
                f"{item['reason']}"
            )

        def cpu(value: int | None) -> str:
            return "-" if value is None else humanize_cpu(value)

        def memory(value: int | None) -> str:
            # Rounded up, as the CSV rounds it: never below the recommendation.
            return "-" if value is None else format_memory_readable(value)

        def span(low: str, high: str) -> str:
            return "-" if low == high == "-" else f"{low} – {high}"

        rows.append(
            [
                result.namespace,
                result.workload,
                result.container,
                cpu(rec.target.cpu_millicores),
                span(
                    cpu(rec.lower_bound.cpu_millicores),
                    cpu(rec.upper_bound.cpu_millicores),
                ),
                memory(rec.target.memory_bytes),
                span(
                    memory(rec.lower_bound.memory_bytes),
                    memory(rec.upper_bound.memory_bytes),
                ),
            ]
        )
    if len(rows) == 1:
        return "No containers found in the samples.\n"
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(width) for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in rows
    ]
    notes = ["", 'Left out ("-"):', *(f"  {line}" for line in omitted)]
    return "\n".join(lines + (notes if omitted else [])) + "\n"

"""`manage.py check-manifests`: the drift check of a manifests file, offline.

What ``POST /api/v1/check`` answers, from the recommendations of usage CSV files (as
``manage.py recommend`` computes them). Exit status: 0 every checked request is within
tolerance, 1 drift, 2 an error (a bad file, option or quantity) or nothing checked (no
container had a recommendation to check against: an unknown workload, say).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from recommender.engine.quantity import parse_cpu_millicores, parse_memory_bytes
from recommender.errors import InvalidInput
from recommender.management.commands.rightsize import (
    add_history_argument,
    add_offline_arguments,
    profile_of,
)
from recommender.services.advice import drift
from recommender.services.advice.rightsize import RightsizeOptions
from recommender.services.replay.offline_inputs import rightsize_files


def _quantity(option: str, parse: Any, raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(parse(raw))
    except ValueError as exc:
        raise CommandError(f"{option}: {exc}", returncode=drift.EXIT_ERROR) from None


class Command(BaseCommand):
    help = (
        "Check a manifests file's requests against recommendations from usage CSV "
        "files. Exit status 0: within tolerance, 1: drift, 2: error or nothing checked."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_offline_arguments(parser)
        parser.add_argument(
            "--format", choices=("text", "json", "junit"), default="text"
        )
        parser.add_argument(
            "--junit-xml",
            type=Path,
            help="also write the JUnit XML report to this file",
        )
        parser.add_argument("--cpu-percent", type=float, help="default 20")
        parser.add_argument("--memory-percent", type=float, help="default 20")
        parser.add_argument("--cpu-floor", help="a quantity, default 50m")
        parser.add_argument("--memory-floor", help="a quantity, default 64Mi")
        add_history_argument(parser)

    def execute(self, *args: Any, **options: Any) -> Any:
        # A CommandError exits 2 (not Django's 1, which means drift here).
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            exc.returncode = drift.EXIT_ERROR
            raise

    def handle(self, *args: Any, **options: Any) -> None:
        profile = profile_of(options["profile"])
        for name in ("cpu_percent", "memory_percent"):
            if options[name] is not None and not 0 <= options[name] <= 1000:
                raise CommandError(
                    f"--{name.replace('_', '-')}: must be from 0 to 1000, "
                    f"not {options[name]:g}"
                )
        tolerance = drift.Tolerance.from_settings(
            cpu_percent=options["cpu_percent"],
            memory_percent=options["memory_percent"],
            cpu_floor_millicores=_quantity(
                "--cpu-floor", parse_cpu_millicores, options["cpu_floor"]
            ),
            memory_floor_bytes=_quantity(
                "--memory-floor", parse_memory_bytes, options["memory_floor"]
            ),
        )
        try:
            _, result = rightsize_files(
                manifests_path=options["manifests"],
                usage_path=options["samples"],
                oom_path=options["oom_events"],
                profile=profile,
                options=RightsizeOptions(
                    namespace=options["namespace"],
                    include_short_history=options["include_short_history"],
                ),
                now=timezone.now(),
            )
        except (InvalidInput, ValueError) as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from None
        check = drift.check_drift(result, tolerance=tolerance)
        if options["junit_xml"] is not None:
            options["junit_xml"].write_text(drift.junit_xml(check))
        if options["format"] == "json":
            self.stdout.write(json.dumps(check, indent=2))
        elif options["format"] == "junit":
            self.stdout.write(drift.junit_xml(check), ending="")
        else:
            self.stdout.write(render_text(check), ending="")
        if check["exit_code"]:
            sys.exit(check["exit_code"])


def render_text(check: dict[str, Any]) -> str:
    """One line per container, the drifting requests below it, then the verdict."""
    lines = []
    for container in check["containers"]:
        who = (
            f"{container['namespace']}/{container['kind']}/{container['name']} "
            f"{container['container']}"
        )
        lines.append(f"{container['verdict'].upper():9} {who}")
        for resource in container["resources"]:
            lines.append(f"          {resource['message']}")
    summary = check["summary"]
    if check["verdict"] == drift.VERDICT_NOTHING_CHECKED:
        lines.append(check["message"])
    lines.append(
        f"{check['verdict']}: {summary['drift']} drift, {summary['ok']} ok, "
        f"{summary['unchecked']} unchecked of {summary['containers']} containers"
    )
    return "\n".join(lines) + "\n"

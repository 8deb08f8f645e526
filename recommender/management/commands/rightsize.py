"""`manage.py rightsize`: right-size a manifests file from usage files, offline.

What ``POST /api/v1/rightsize`` answers, from the recommendations of usage CSV files
(as ``manage.py recommend`` computes them) instead of a running vpaweb: the manifests,
a kustomize patch set, a Helm values fragment or a unified diff, on stdout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from recommender.engine import PROFILES, get_profile
from recommender.errors import InvalidInput
from recommender.services.advice.patches import OUTPUTS, answer_text, rightsize_answer
from recommender.services.advice.rightsize import RightsizeOptions
from recommender.services.replay.offline_inputs import rightsize_files


def add_offline_arguments(parser: CommandParser) -> None:
    """The manifests file and the usage files, as ``manage.py recommend`` takes them."""
    parser.add_argument("manifests", type=Path, help="YAML (or JSON) manifests file")
    parser.add_argument(
        "--samples",
        required=True,
        type=Path,
        help="usage CSV: timestamp,namespace,workload,pod,container,cpu_cores,"
        "memory_bytes (the workload column is the manifests' metadata.name)",
    )
    parser.add_argument("--oom-events", type=Path, help="OOM CSV, as for recommend")
    parser.add_argument(
        "--profile", default="vpa", help=f"one of: {', '.join(PROFILES)} (default vpa)"
    )
    parser.add_argument(
        "--namespace",
        default="default",
        help="namespace of manifests without metadata.namespace",
    )


def add_history_argument(parser: CommandParser) -> None:
    """``--include-short-history``: past the history gate, flagged low confidence."""
    parser.add_argument(
        "--include-short-history",
        action="store_true",
        help="also use recommendations with less history than "
        "VPAWEB_MIN_HISTORY_HOURS (default: left out, with a note, as the webhook "
        "and the updater leave them); their containers are flagged low_confidence",
    )


def profile_of(name: str) -> Any:
    """The named profile, or a CommandError naming --profile and the profiles."""
    if name not in PROFILES:
        raise CommandError(
            f"--profile: unknown profile {name!r}; choose one of {', '.join(PROFILES)}"
        )
    return get_profile(name)


class Command(BaseCommand):
    help = (
        "Right-size a manifests file from usage CSV files, offline: the manifests, a "
        "kustomize patch set, a Helm values fragment or a diff, on stdout."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_offline_arguments(parser)
        parser.add_argument("--output", choices=OUTPUTS, default="manifests")
        parser.add_argument(
            "--values-path",
            default="resources",
            help="--output helm: where the chart keeps a container's resources "
            "({container} and {workload} stand for the names)",
        )
        parser.add_argument(
            "--hpa-values-path",
            default="autoscaling",
            help="--output helm: where the chart keeps an HPA's targets ({workload} "
            "stands for the name)",
        )
        parser.add_argument("--multiplier", type=float, default=1.0)
        parser.add_argument("--never-raise", action="store_true")
        parser.add_argument("--leave-memory", action="store_true")
        add_history_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        profile = profile_of(options["profile"])
        try:
            text, result = rightsize_files(
                manifests_path=options["manifests"],
                usage_path=options["samples"],
                oom_path=options["oom_events"],
                profile=profile,
                options=RightsizeOptions(
                    namespace=options["namespace"],
                    multiplier=options["multiplier"],
                    never_raise=options["never_raise"],
                    leave_memory=options["leave_memory"],
                    include_short_history=options["include_short_history"],
                ),
                now=timezone.now(),
            )
            answer = rightsize_answer(
                result,
                output=options["output"],
                text=text,
                is_json=options["manifests"].suffix == ".json",
                values_path=options["values_path"],
                hpa_values_path=options["hpa_values_path"],
                diff_path=str(options["manifests"]),
            )
        except (InvalidInput, ValueError) as exc:
            raise CommandError(getattr(exc, "message", str(exc))) from None
        self.stdout.write(answer_text(answer), ending="")
        summary = result.summary()
        self.stderr.write(
            f"{summary['containers_changed']} containers changed in "
            f"{summary['rightsized']} of {summary['documents']} documents"
        )
        # Every document left alone says why, and every HPA trigger out of reach.
        for document in result.documents:
            who = f"{document['kind']}/{document['name']}"
            for warning in document.get("warnings") or ():
                self.stderr.write(f"warning: {warning}")
            for note in document.get("notes") or ():
                self.stderr.write(f"{who} left as is: {note}")

"""`manage.py bootstrap`: everything `make run` needs before serving, safe to run again.

Creates the role groups, a demo admin (once), the simulated cluster when simulation is
on (and disables an existing one when it is off: ``VPAWEB_SIMULATION=false`` hides it
from refreshes, the dashboard and the API lists), and runs a first refresh synchronously
so the dashboard is full at first page load.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from recommender.errors import VpawebError
from recommender.models import Cluster
from recommender.roles import Role, ensure_role_groups, grant_role
from recommender.services.refresh.cycle import refresh_cluster

DEMO_ADMIN = "admin"
SIMULATED_CLUSTER = "simulated"


def password_file() -> Path:
    """Where the demo admin's generated password is kept (owner-readable only)."""
    return Path(settings.VAR_DIR) / "demo-admin-password.txt"


class Command(BaseCommand):
    """Idempotent first-run setup."""

    help = "Create role groups, the demo admin and the simulated cluster; refresh once."

    def add_arguments(self, parser: CommandParser) -> None:
        """--no-refresh skips the first refresh."""
        parser.add_argument(
            "--no-refresh", action="store_true", help="do not run the first refresh"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Set up, then refresh each enabled cluster once, printing timings."""
        ensure_role_groups()
        self._demo_admin()
        self._simulated_cluster()
        if options["no_refresh"]:
            return
        for cluster in Cluster.objects.filter(is_enabled=True):
            self.stdout.write(
                f"refreshing {cluster.name} (first contact back-fills "
                "history; this takes a few seconds)..."
            )
            started = time.perf_counter()
            try:
                run = refresh_cluster(cluster_id=cluster.pk, now=timezone.now())
            except VpawebError as exc:
                self.stderr.write(f"  refresh of {cluster.name} failed: {exc.message}")
                continue
            phases = ", ".join(
                f"{name.removesuffix('_s')} {seconds:.2f}s"
                for name, seconds in run.timings.items()
                if name != "total_s"
            )
            counts = run.counts
            self.stdout.write(
                f"  done in {time.perf_counter() - started:.1f}s ({phases}): "
                f"{counts.get('workloads', 0)} workloads, "
                f"{counts.get('containers', 0)} containers, "
                f"{counts.get('samples', 0):,} samples, "
                f"{counts.get('recommendations_changed', 0)} recommendations updated"
            )

    def _simulated_cluster(self) -> None:
        """Create the simulated cluster when simulation is on; enable or disable it
        to follow VPAWEB_SIMULATION, so turning simulation off hides one made earlier
        (neither refreshed nor listed; its rows are kept)."""
        enabled = settings.SIMULATION_ENABLED
        cluster = Cluster.objects.filter(
            name=SIMULATED_CLUSTER, kind=Cluster.Kind.SIMULATED
        ).first()
        if cluster is None:
            if enabled:
                # Its writes stay in vpaweb's database: actuation is allowed.
                Cluster.objects.create(
                    name=SIMULATED_CLUSTER,
                    kind=Cluster.Kind.SIMULATED,
                    actuation_allowed=True,
                )
                self.stdout.write(
                    f"created the simulated cluster ({settings.SIMULATION_WORKLOADS} "
                    f"workloads, seed {settings.SIMULATION_SEED})"
                )
            return
        if cluster.is_enabled != enabled:
            cluster.is_enabled = enabled
            cluster.save(update_fields=["is_enabled"])
            self.stdout.write(
                f"{'enabled' if enabled else 'disabled'} the simulated cluster "
                f"(VPAWEB_SIMULATION={'true' if enabled else 'false'})"
            )

    def _demo_admin(self) -> None:
        """Create user ``admin`` with a random password once; show it on every run."""
        users = get_user_model().objects
        path = password_file()
        if not users.filter(username=DEMO_ADMIN).exists():
            password = secrets.token_urlsafe(12)
            user = users.create_superuser(
                username=DEMO_ADMIN, email="", password=password
            )
            grant_role(user, Role.ADMIN)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(password + "\n")
            path.chmod(0o600)
            self.stdout.write(
                f"created the demo admin: user {DEMO_ADMIN}, password "
                f"{password} (saved in {path})"
            )
        elif path.exists():
            self.stdout.write(
                f"demo admin: user {DEMO_ADMIN}, password "
                f"{path.read_text().strip()} (from {path})"
            )
        else:
            self.stdout.write(
                f"demo admin: user {DEMO_ADMIN} exists; its password is not "
                f"in {path} (reset it: manage.py changepassword {DEMO_ADMIN})"
            )

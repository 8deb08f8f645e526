"""A process that runs one updater cycle and stops forever at its first cluster write
(``python -m tests.integration.crash_updater <cluster id> <now> <marker file>``): the
marker file appears, holding its pid, when the change it writes is ``applying`` and
nothing was written; the test then kills it with SIGKILL."""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
django.setup()

from recommender.cluster.simulated_writer import SimulatedWriter  # noqa: E402
from recommender.models import Cluster  # noqa: E402
from recommender.services.actuation.cycle import run_cycle  # noqa: E402


def main() -> None:
    """Run the cycle; block at the first write."""
    cluster_id, now_text, marker = sys.argv[1:4]

    def stuck(self: SimulatedWriter, **kwargs: Any) -> None:
        Path(marker).write_text(str(os.getpid()))
        time.sleep(600)

    SimulatedWriter.evict_pod = stuck  # type: ignore[method-assign,assignment]
    SimulatedWriter.resize_pod = stuck  # type: ignore[method-assign,assignment]
    run_cycle(
        Cluster.objects.get(pk=int(cluster_id)), now=datetime.fromisoformat(now_text)
    )


if __name__ == "__main__":
    main()

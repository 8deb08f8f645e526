"""``python -m tests.faults [pytest args]`` (``make test-faults``): start a PostgreSQL
and a Redis of the suite's own, point the settings at them, run the tests marked
``faults`` in this process (the fixtures stop and restart the servers), stop both."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.faults import services


def main(argv: list[str]) -> int:
    """Run the fault suite; pytest's exit code."""
    missing = services.ensure_installed()
    if missing:
        print(f"the fault suite needs {', '.join(missing)}", file=sys.stderr)
        return 2 if os.environ.get("CI", "").lower() == "true" else 0
    with tempfile.TemporaryDirectory(prefix="vpaweb-faults-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)  # the postgres user reaches its data directory
        postgres = services.OwnPostgres.create(root / "postgres")
        redis = services.OwnRedis(port=services.free_port(), work_dir=root / "redis")
        postgres.start()
        try:
            redis.start()
            services.RUNNING.update(postgres=postgres, redis=redis)
            # Read by vpaweb/settings.py when pytest-django sets Django up, below.
            os.environ["DATABASE_URL"] = postgres.url
            os.environ["REDIS_URL"] = redis.url
            os.environ.setdefault("SECRET_KEY", "fault-suite-only-key")
            # Paths given on the command line narrow the run; else the whole suite.
            given = any(Path(arg.split("::")[0]).exists() for arg in argv)
            paths = [] if given else ["tests/faults"]
            return int(pytest.main(["-m", "faults", *paths, *argv]))
        finally:
            redis.stop()
            postgres.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

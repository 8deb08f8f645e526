"""The Celery app of a test worker: ``celery -A tests.integration.worker_app``.

Identical to ``vpaweb.celery.app`` except that the worker's default queue is the test's
private queue (``VPAWEB_TEST_QUEUE``): the tasks it queues itself, such as the
fan-out's shards, go where only this worker listens, never to the shared ``celery``
queue that another run's worker (or a stale message) could be using. Production code
and settings are untouched.
"""

from __future__ import annotations

import os

from vpaweb.celery import app

# Set before the app is configured, so it overrides the settings' default queue.
app.conf.task_default_queue = os.environ["VPAWEB_TEST_QUEUE"]

__all__ = ["app"]

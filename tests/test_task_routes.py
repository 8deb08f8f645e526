"""Expensive work has a queue of its own: the control loops' queue never waits on it."""

from __future__ import annotations

from django.conf import settings

from vpaweb.celery import app


def queue_of(task_name: str) -> str:
    route = app.amqp.router.route({}, task_name)
    return route["queue"].name


def test_comparisons_go_to_the_heavy_queue_and_the_control_loops_do_not():
    assert queue_of("recommender.tasks.compare_namespace") == settings.HEAVY_QUEUE
    for control in (
        "recommender.tasks.refresh_cluster",
        "recommender.tasks.refresh_all_clusters",
        "recommender.tasks.update_cluster",
        "recommender.tasks.update_all_clusters",
    ):
        assert queue_of(control) == app.conf.task_default_queue != settings.HEAVY_QUEUE

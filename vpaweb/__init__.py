"""The vpaweb Django project."""

from vpaweb.celery import app as celery_app

__all__ = ["celery_app"]

"""The Celery application: broker and schedule come from settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")

app = Celery("vpaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

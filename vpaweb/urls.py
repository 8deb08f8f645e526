"""Top-level URLs: the dashboard, the API under /api/v1/, admin and health checks."""

from django.contrib import admin
from django.urls import path

from recommender.web import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
]

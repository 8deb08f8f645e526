"""Top-level URLs: the dashboard, the API under /api/v1/, admin and health checks."""

from django.contrib import admin
from django.urls import include, path

from recommender.api import metrics_endpoint
from recommender.web import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_endpoint.metrics, name="metrics"),
    path(
        "metrics/recommendations",
        metrics_endpoint.recommendations,
        name="metrics-recommendations",
    ),
    path("admin/", admin.site.urls),
    path("api/v1/", include("recommender.api.urls")),
    path("", include("recommender.web.urls")),
]

# JSON errors under /api/ (recommender/api/errors.py), Django's pages everywhere else.
handler400 = "recommender.api.errors.bad_request"
handler404 = "recommender.api.errors.not_found"
handler500 = "recommender.api.errors.server_error"

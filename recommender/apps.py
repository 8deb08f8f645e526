"""The recommender app: the whole of vpaweb's domain."""

from django.apps import AppConfig


class RecommenderConfig(AppConfig):
    """App configuration."""

    name = "recommender"
    verbose_name = "vpaweb"

    def ready(self) -> None:
        """Count finished runs in vpaweb's own metrics (recommender/metrics.py)."""
        from django.db.models.signals import post_save

        from recommender.metrics import on_run_saved
        from recommender.models import RefreshRun

        post_save.connect(on_run_saved, sender=RefreshRun, dispatch_uid="run-metrics")

"""The recommender app: the whole of vpaweb's domain."""

from django.apps import AppConfig


class RecommenderConfig(AppConfig):
    """App configuration."""

    name = "recommender"
    verbose_name = "vpaweb"

    def ready(self) -> None:
        """Connect the signals that revoke credentials when an account changes."""
        from recommender import signals

        signals.connect()

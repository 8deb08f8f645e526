"""The recommender app: the whole of vpaweb's domain."""

from django.apps import AppConfig


class RecommenderConfig(AppConfig):
    """App configuration."""

    name = "recommender"
    verbose_name = "vpaweb"

    def ready(self) -> None:
        """Connect the signals that revoke credentials when an account changes, and
        the faster timestamp loader to each new PostgreSQL connection."""
        from django.db.backends.signals import connection_created

        from recommender import signals
        from vpaweb import pg_timestamps

        signals.connect()
        connection_created.connect(pg_timestamps.install)

"""The recommender app: the whole of vpaweb's domain."""

from django.apps import AppConfig


class RecommenderConfig(AppConfig):
    """App configuration."""

    name = "recommender"
    verbose_name = "vpaweb"

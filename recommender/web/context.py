"""Template context every dashboard page gets: the safety state of the header."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from recommender.services.actuation import control


def safety(request: HttpRequest) -> dict[str, object]:
    """``safety``: the kill switch, paused clusters and dry run (read only when a
    template shows them: the header does for a signed-in user)."""
    return {"safety": SimpleLazyObject(control.safety_state)}

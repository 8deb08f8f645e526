"""Template context every dashboard page gets: the safety state of the header and
the currency of its amounts."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from recommender.services.actuation import control


def safety(request: HttpRequest) -> dict[str, object]:
    """``safety``: the kill switch, paused clusters and dry run (read only when a
    template shows them: the header does for a signed-in user)."""
    return {"safety": SimpleLazyObject(control.safety_state)}


def money(request: HttpRequest) -> dict[str, object]:
    """``currency``: the code printed beside prices (``VPAWEB_CURRENCY``)."""
    return {"currency": settings.CURRENCY}

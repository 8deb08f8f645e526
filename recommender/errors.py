"""vpaweb's one error hierarchy. Each class maps to one HTTP status in one place."""

from __future__ import annotations


class VpawebError(Exception):
    """Base of every error vpaweb raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class NotFound(VpawebError):
    """The named object does not exist."""

    code = "not_found"


class InvalidInput(VpawebError):
    """Input that cannot be accepted; ``field`` names what was wrong."""

    code = "invalid"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        fields: dict[str, list[str]] | None = None,
    ):
        merged = dict(fields or {})
        if field is not None:
            merged.setdefault(field, []).append(message)
        super().__init__(message, fields=merged)
        self.field = field


class Conflict(VpawebError):
    """The request clashes with the current state (e.g. approving a rejected change)."""

    code = "conflict"


class Forbidden(VpawebError):
    """The actor may not do this to this object (an admin re-roling a superuser)."""

    code = "permission_denied"


class Throttled(VpawebError):
    """A budget is spent (requests a minute, jobs at once); retry after a while."""

    code = "throttled"

    def __init__(self, message: str, *, retry_after_s: float):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SourceUnavailable(VpawebError):
    """A part vpaweb talks to (Prometheus, an API server) failed or answered garbage."""

    code = "source_unavailable"


class Busy(SourceUnavailable):
    """This process already runs as much expensive work as it may; retry shortly."""

    code = "busy"

    def __init__(self, message: str, *, retry_after_s: float):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooLarge(VpawebError):
    """The request is past a documented size limit (bytes, documents, nesting, …)."""

    code = "too_large"

    def __init__(self, message: str, *, field: str = "body"):
        super().__init__(message, fields={field: [message]})
        self.field = field


class Malformed(InvalidInput):
    """A body that is not the JSON or YAML it claims to be (a 400 like InvalidInput)."""

    code = "malformed"

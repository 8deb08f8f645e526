"""OpenAPI generation: every operation documents the one error shape of its errors."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiResponse

from recommender.api.serializers import ErrorSerializer
from recommender.engine import PROFILES
from recommender.models import Policy

# The one enum of profile names (SPECTACULAR_SETTINGS' ENUM_NAME_OVERRIDES).
PROFILE_NAMES = sorted(PROFILES)

# Statuses any API operation can answer with (bad query, no or bad credentials, missing
# object, unacceptable Accept header, throttled).
COMMON_ERRORS = {
    "400": "Invalid input; `fields` names each bad field.",
    "401": "No credentials, or an unknown or revoked token.",
    "403": "The token's scope or the user's role does not allow this.",
    "404": "No such object.",
    "406": "No renderer for the Accept header or `format`.",
    "429": "Too many requests for this person; see Retry-After.",
    "503": (
        "The request ran past VPAWEB_REQUEST_DEADLINE_S and was rolled back "
        "(`timeout`), or the database is unavailable (`database_unavailable`, with "
        "Retry-After)."
    ),
}
# Further statuses of operations that take a body.
BODY_ERRORS = {
    "413": (
        "The body passes a limit: VPAWEB_API_MAX_BODY_BYTES, _DOCUMENTS, _NODES, "
        "_DEPTH, _KEYS, _SCALAR_CHARS or (rightsize) _CONTAINERS; the message names it."
    ),
    "415": "Unsupported Content-Type.",
}
MODE_ERROR = f"must be one of {', '.join(Policy.Mode.values)}"
ERROR_EXAMPLE = OpenApiExample(
    "invalid input",
    value={
        "error": {
            "code": "invalid",
            "message": f"mode: {MODE_ERROR}",
            "fields": {"mode": [MODE_ERROR]},
        }
    },
    response_only=True,
)


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema plus the error responses of every operation."""

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction=direction)  # type: ignore[arg-type]
        errors = dict(COMMON_ERRORS)
        if self.method in ("POST", "PUT", "PATCH"):
            errors.update(BODY_ERRORS)
        errors.update(getattr(self.view, "extra_error_statuses", {}))
        for status_code, description in errors.items():
            if status_code in responses:
                continue
            responses[status_code] = self._get_response_for_code(  # type: ignore[no-untyped-call]
                OpenApiResponse(
                    ErrorSerializer, description=description, examples=[ERROR_EXAMPLE]
                ),
                status_code,
                media_types=["application/json"],
                direction=direction,
            )
        return responses

    def _map_serializer(
        self, serializer: Any, direction: str, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        """A serializer refusing unknown keys says so: additionalProperties false."""
        schema: dict[str, Any] = super()._map_serializer(  # type: ignore[no-untyped-call]
            serializer, direction, bypass_extensions
        )
        if getattr(serializer, "refuses_unknown_fields", False):
            schema["additionalProperties"] = False
        return schema


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Documents ``Authorization: Bearer vpaweb_…`` as the API's security scheme."""

    target_class = "recommender.api.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        """An HTTP bearer scheme."""
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "An API token: `manage.py apitoken create --name ci --scope read`."
            ),
        }


def _subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    sub: type
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


def close_input_objects(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPECTACULAR postprocessing hook: the request component of every
    ``ClosedSerializer`` gets ``additionalProperties: false``, as the server refuses
    unknown keys."""
    from recommender.api.fields import ClosedSerializer

    schemas = result.get("components", {}).get("schemas", {})
    for cls in _subclasses(ClosedSerializer):
        base = cls.__name__.removesuffix("Serializer")
        for name in (f"{base}Request", f"Patched{base}Request"):
            component = schemas.get(name)
            if component is not None and component.get("type") == "object":
                component["additionalProperties"] = False
    return result

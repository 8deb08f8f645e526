"""Strict serializer fields of the API: query text, digits-only integers, factors.

DRF's own fields coerce too kindly for a public API ("5.0" to 5, 5 to "5"); these refuse
what the schema does not document, so a bad value is a 400 naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from recommender.engine.capping import MODE_AUTO, MODE_RECREATE
from recommender.engine.quantity import parse_cpu_millicores, parse_memory_bytes
from recommender.errors import InvalidInput
from recommender.models import Policy
from recommender.services.advice.rightsize import MIN_FACTOR
from recommender.services.readmodels import label_filter

# Longest text a query filter takes: a Kubernetes object name (DNS subdomain).
MAX_QUERY_TEXT = 253


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_QUERY_TEXT,
        "pattern": "^[^\\u0000]+$",
    }
)
class QueryTextField(serializers.CharField):
    """A text query parameter: not empty, no NUL, kept as sent (no trimming)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_QUERY_TEXT)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)


class StrictIntegerField(serializers.IntegerField):
    """An integer written as digits only ("5", not "5.0" or " 5")."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or (
            isinstance(data, str) and re.fullmatch(r"-?[0-9]+", data) is None
        ):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """JSON text only: numbers are not silently turned into strings."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "type": "number",
        "format": "double",
        "minimum": MIN_FACTOR,
        "maximum": 1,
        "nullable": True,
    }
)
class FactorField(serializers.FloatField):
    """A coefficient in [MIN_FACTOR, 1], or null; JSON numbers only."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("max_value", 1.0)
        kwargs.setdefault("min_value", MIN_FACTOR)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class ClosedSerializer(serializers.Serializer):
    """An input object whose schema has ``additionalProperties: false``: an unknown key
    is a 400 naming it, never silently dropped (a typo such as ``"mdoe"`` would
    otherwise look like a successful no-op)."""

    # Sent by HTML forms (the browsable API), not part of any object.
    IGNORED_KEYS = frozenset({"csrfmiddlewaretoken"})

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "keys"):
            unknown = sorted(set(data.keys()) - set(self.fields) - self.IGNORED_KEYS)
            if unknown:
                known = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {
                        name: [f"unknown field; the fields are {known}"]
                        for name in unknown
                    }
                )
        return super().to_internal_value(data)


# Upstream's ``updateMode: Auto`` (deprecated since VPA 1.4) "is currently equivalent
# to Recreate" (the VPA CRD's documentation of UpdateModeAuto); vpaweb reads the VPA
# objects it mirrors the same way (models/policy.py, vpa_object_mode).
MODE_ALIASES = {MODE_AUTO: MODE_RECREATE}


def mode_alias_note(given: str) -> str:
    """What a mode alias was stored as, said in the answer."""
    return (
        f"mode {given} is upstream VPA's alias of {MODE_ALIASES[given]} (deprecated "
        f"upstream, where it currently means {MODE_ALIASES[given]}); stored as "
        f"{MODE_ALIASES[given]}"
    )


class ModeField(serializers.ChoiceField):
    """A policy mode: Off, Initial, Recreate, InPlaceOrRecreate, InPlace, or upstream's
    alias Auto (stored as Recreate); anything else is refused listing the valid
    modes."""

    def __init__(self, **kwargs: Any) -> None:
        self.modes = list(Policy.Mode.values)
        kwargs.setdefault(
            "help_text",
            "Off, Initial, Recreate, InPlaceOrRecreate or InPlace; upstream's Auto is "
            "taken "
            "as Recreate, as upstream VPA currently reads it",
        )
        super().__init__(choices=[*self.modes, *MODE_ALIASES], **kwargs)
        self.error_messages["invalid_choice"] = (
            f'"{{input}}" is not a mode; the modes are {", ".join(self.modes)} '
            f"(and Auto, upstream's alias of Recreate)"
        )

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        return MODE_ALIASES.get(value, value)


# Fewer digits the larger the suffix, so every quantity the schema allows fits an int64
# of millicores (CPU, the tighter of the two) and of bytes: a schema-valid query is
# never refused for overflowing.
_FRACTION = r"(\.[0-9]{1,9})?"
QUERY_QUANTITY_PATTERN = (
    rf"^([0-9]{{1,15}}{_FRACTION}m?|[0-9]{{1,12}}{_FRACTION}(k|Ki)"
    rf"|[0-9]{{1,9}}{_FRACTION}(M|Mi)|[0-9]{{1,6}}{_FRACTION}(G|Gi)"
    rf"|[0-9]{{1,3}}{_FRACTION}(T|Ti))$"
)


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": 40,
        "pattern": QUERY_QUANTITY_PATTERN,
    }
)
class QuantityQueryField(serializers.CharField):
    """A Kubernetes quantity in a query (``50m``, ``64Mi``), read as millicores (CPU)
    or bytes (memory)."""

    def __init__(self, *, resource: str, **kwargs: Any) -> None:
        self.resource = resource
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:  # type: ignore[override]
        text = super().to_internal_value(data)
        if re.fullmatch(QUERY_QUANTITY_PATTERN, text) is None:
            raise serializers.ValidationError(
                f"{text[:40]!r} is not a quantity such as 50m, 0.5, 64Mi or 1Gi"
            )
        try:
            return (
                parse_cpu_millicores(text)
                if self.resource == "cpu"
                else parse_memory_bytes(text)
            )
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


@extend_schema_field(
    {
        "type": "string",
        "minLength": 1,
        "maxLength": label_filter.MAX_SELECTOR,
        "pattern": label_filter.PATTERN,
    }
)
class LabelSelectorField(serializers.CharField):
    """A label selector in the Kubernetes syntax (``team=payments,tier!=batch``): the
    pattern the schema gives is the one the service checks (``label_filter``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", label_filter.MAX_SELECTOR)
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault(
            "help_text",
            "only workloads whose labels match, in the Kubernetes selector syntax: "
            "`team=payments,tier!=batch`, `env in (prod,staging)`, "
            "`env notin (dev)`, `key` (has it), `!key` (lacks it); all must hold",
        )
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        try:
            label_filter.parsed_selector(text)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from None
        return text

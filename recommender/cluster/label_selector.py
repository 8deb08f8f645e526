"""Label selectors in the text form ``kubectl -l`` and the API's ``labelSelector``
take: ``key=value``, ``key==value``, ``key!=value``, ``key in (a,b)``,
``key notin (a,b)``, ``key`` (exists) and ``!key`` (does not exist), joined by commas
(all must hold).

Pure functions, no I/O: a cluster's namespace opt-in (``Cluster.namespace_selector``)
is checked with ``parse`` before it is stored, sent as is to a real API server, and
matched with ``matches`` by the simulated cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# A label name: 63 characters at most, alphanumeric at both ends; an optional prefix
# (a DNS subdomain) before a slash (Kubernetes' IsQualifiedName).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
KEY = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
VALUE = re.compile(rf"^({_NAME})?$")
MAX_PREFIX = 253
# A whole selector as a pattern (the API's schema documents it, so generated
# requests are valid ones): requirements joined by commas, plain spaces only.
_SCHEMA_PREFIX = (
    r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,2}"
)
_SCHEMA_KEY = rf"({_SCHEMA_PREFIX}/)?{_NAME}"
_SCHEMA_VALUE = rf"({_NAME})?"
_SCHEMA_REQUIREMENT = (
    rf"({_SCHEMA_KEY} *(=|==|!=) *{_SCHEMA_VALUE}"
    rf"|{_SCHEMA_KEY} +(in|notin) +\( *{_SCHEMA_VALUE}( *, *{_SCHEMA_VALUE})* *\)"
    rf"|!?{_SCHEMA_KEY})"
)
SELECTOR_PATTERN = rf"^{_SCHEMA_REQUIREMENT}(,{_SCHEMA_REQUIREMENT})*$"
_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)$")
_EQUALITY = re.compile(r"^(?P<key>[^=!\s]+)\s*(?P<op>==|!=|=)\s*(?P<value>[^=!\s]*)$")


@dataclass(frozen=True)
class Requirement:
    """One requirement of a selector."""

    key: str
    operator: str  # "in", "notin", "exists", "!" (does not exist)
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` meet this requirement."""
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!":
            return self.key not in labels
        if self.operator == "in":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


def _key(text: str, selector: str) -> str:
    prefix = text.rpartition("/")[0]
    if not KEY.match(text) or len(prefix) > MAX_PREFIX:
        raise ValueError(
            f"label selector {selector!r}: {text!r} is not a label name (letters, "
            "digits, '-', '_' and '.', 63 characters at most, with an optional "
            "DNS prefix and '/')"
        )
    return text


def _value(text: str, selector: str) -> str:
    if not VALUE.match(text):
        raise ValueError(
            f"label selector {selector!r}: {text!r} is not a label value (letters, "
            "digits, '-', '_' and '.', 63 characters at most)"
        )
    return text


def _split(selector: str) -> list[str]:
    """Requirements split on the commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts]


def parse(selector: str) -> tuple[Requirement, ...]:
    """The requirements of ``selector``; ``ValueError`` naming what is wrong.

    An empty selector has no requirement (it selects everything).
    """
    if not selector.strip():
        return ()
    requirements = []
    for part in _split(selector):
        if not part:
            raise ValueError(f"label selector {selector!r} has an empty requirement")
        found = _SET.match(part)
        if found is not None:
            values = tuple(v.strip() for v in found["values"].split(","))
            requirements.append(
                Requirement(
                    _key(found["key"], selector),
                    found["op"],
                    tuple(_value(v, selector) for v in values),
                )
            )
            continue
        found = _EQUALITY.match(part)
        if found is not None:
            requirements.append(
                Requirement(
                    _key(found["key"], selector),
                    "notin" if found["op"] == "!=" else "in",
                    (_value(found["value"], selector),),
                )
            )
            continue
        if part.startswith("!"):
            requirements.append(Requirement(_key(part[1:].strip(), selector), "!"))
            continue
        if " " not in part:
            requirements.append(Requirement(_key(part, selector), "exists"))
            continue
        raise ValueError(
            f"label selector {selector!r}: cannot read {part!r} (use key=value, "
            "key!=value, key in (a,b), key notin (a,b), key or !key)"
        )
    return tuple(requirements)


def matches(requirements: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` meet every requirement (an empty selector: always)."""
    return all(requirement.matches(labels) for requirement in requirements)

"""Kubernetes resource quantities: parse and print them exactly as apimachinery does."""
# CPU is held as int millicores and memory as int bytes (see ``resources.py``). Parsing
# follows ``k8s.io/apimachinery/pkg/api/resource/quantity.go`` (``ParseQuantity``) and
# then ``MilliValue()`` / ``Value()``, which round a fractional amount **up**. Printing
# follows ``Quantity.String()`` (``CanonicalizeBytes``) for the two constructors
# upstream VPA uses: ``NewScaledQuantity(m, -3)`` for CPU and ``NewQuantity(b,
# BinarySI)`` for memory (``vertical-pod-autoscaler/pkg/recommender/model/types.go``,
# ``ResourcesAsResourceList``).
#
# We are deliberately stricter than apimachinery in three places, all raising
# ``ValueError``: a quantity needs at least one digit (Kubernetes reads "Mi", "." and
# "-" as zero), negative amounts are refused (they are never valid requests or limits),
# and amounts beyond int64 are refused (Kubernetes silently caps BinarySI at MaxInt64
# and wraps ``MilliValue()``).

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

# math.MaxInt64: the int64 bound of resource.Quantity values (apimachinery amount.go).
MAX_INT64 = 2**63 - 1

# Suffixes of apimachinery suffix.go: DecimalSI powers of ten and BinarySI powers of
# two.
_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {
    "Ki": 10,
    "Mi": 20,
    "Gi": 30,
    "Ti": 40,
    "Pi": 50,
    "Ei": 60,
}
_DECIMAL_SUFFIX_BY_EXPONENT = {exp: s for s, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX_BY_EXPONENT = {
    0: "",
    **{exp // 10: s for s, exp in _BINARY_SUFFIXES.items()},
}
# Characters parseQuantityString accepts in a suffix before an optional signed exponent.
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
# ParseQuantity rounds every non-zero amount up to a whole nano unit (inf.RoundUp at
# Nano).
_NANO = Fraction(1, 10**9)
_EXPECTED = (
    "expected a Kubernetes quantity such as '500m', '1.5', '2', '250Mi', "
    "'1Gi', '129M' or "
    "'1e3'"
)


def _bad(argument: str, text: object, why: str) -> ValueError:
    return ValueError(
        f"{argument} {text!r} is not a valid quantity: {why}; {_EXPECTED}"
    )


def _parse_exact(text: object, argument: str) -> Fraction:
    """Parse ``text`` like ``ParseQuantity`` into its exact non-negative value."""
    if not isinstance(text, str):
        raise ValueError(f"{argument} must be a string, not {text!r}; {_EXPECTED}")
    if text == "":
        raise _bad(argument, text, "it is empty")
    pos, end = 0, len(text)
    negative = text[0] == "-"
    if text[0] in "+-":
        pos += 1
    # Number: digits, optional "." and digits (parseQuantityString allows "1." and
    # ".5").
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        frac = text[start:pos]
    if not whole and not frac:
        raise _bad(argument, text, "it has no digits before the unit")
    # Suffix: letters from "eEinumkKMGTP", then an optional sign and digits (an
    # exponent).
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise _bad(argument, text, f"unexpected character {text[pos]!r}")
    suffix = text[suffix_start:]
    mantissa = Fraction(
        int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac)
    )
    # quantitySuffixer.interpret (suffix.go): SI, binary, or "e"/"E" plus an int32
    # exponent.
    if suffix in _DECIMAL_SUFFIXES:
        value = mantissa * Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        value = mantissa * 2 ** _BINARY_SUFFIXES[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE":
        try:
            exponent = int(suffix[1:], 10)
        except ValueError:
            raise _bad(argument, text, f"unknown unit {suffix!r}") from None
        if not -(2**31) <= exponent < 2**31:
            raise _bad(argument, text, "the exponent does not fit in int32")
        if mantissa == 0:
            value = Fraction(0)
        elif exponent > 40:
            # Any non-zero mantissa times 10**41 exceeds int64 even in bytes.
            raise _bad(argument, text, "it overflows int64")
        elif exponent < -40:
            value = _NANO  # rounds up to the smallest representable amount below
        else:
            value = mantissa * Fraction(10) ** exponent
    else:
        raise _bad(argument, text, f"unknown unit {suffix!r}")
    if negative and value != 0:
        raise _bad(argument, text, "negative amounts are not valid requests or limits")
    # ParseQuantity: "rounds non-zero values up to the minimum representable value"
    # (nano).
    if value.denominator != 1 and (value / _NANO).denominator != 1:
        value = Fraction(-((-value) // _NANO)) * _NANO
    return value


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def parse_cpu_millicores(text: str) -> int:
    """Parse a CPU quantity into millicores, rounding up as ``MilliValue()`` does."""
    millicores = _ceil(_parse_exact(text, "cpu") * 1000)
    if millicores > MAX_INT64:
        raise _bad("cpu", text, "it overflows int64 millicores")
    return millicores


def parse_memory_bytes(text: str) -> int:
    """Parse a memory quantity into whole bytes, rounding up as ``Value()`` does."""
    bytes_ = _ceil(_parse_exact(text, "memory"))
    if bytes_ > MAX_INT64:
        raise _bad("memory", text, "it overflows int64 bytes")
    return bytes_


def _check_amount(argument: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{argument} must be an int, not {value!r}")
    if not 0 <= value <= MAX_INT64:
        raise ValueError(f"{argument} must be between 0 and 2**63-1, not {value!r}")
    return value


def _remove_factors(value: int, base: int) -> tuple[int, int]:
    """apimachinery amount.go ``removeInt64Factors``: divide by ``base`` while exact."""
    times = 0
    while value >= base and value % base == 0:
        value //= base
        times += 1
    return value, times


def _format_decimal_si(value: int, scale: int) -> str:
    """``String()`` of int64Amount{value, scale} in DecimalSI (``AsCanonicalBytes``)."""
    if value == 0:
        return "0"
    amount, times = _remove_factors(value, 10)
    exponent = scale + times
    # Go's % keeps the dividend's sign: make the exponent a multiple of 3 by scaling up.
    remainder = exponent - 3 * int(exponent / 3)
    if remainder in (1, -2):
        amount, exponent = amount * 10, exponent - 1
    elif remainder in (2, -1):
        amount, exponent = amount * 100, exponent - 2
    return f"{amount}{_DECIMAL_SUFFIX_BY_EXPONENT[exponent]}"


def format_cpu(millicores: int) -> str:
    """Canonical ``NewScaledQuantity(millicores, -3)``: 587→"587m", 1000→"1"."""
    return _format_decimal_si(_check_amount("millicores", millicores), -3)


def format_memory(bytes_: int) -> str:
    """Canonical ``NewQuantity(bytes_, BinarySI)``: 262144000→"250Mi", 1000→"1k"."""
    _check_amount("bytes_", bytes_)
    # CanonicalizeBytes: BinarySI values strictly between -1024 and 1024 print as
    # DecimalSI.
    if bytes_ < 1024:
        return _format_decimal_si(bytes_, 0)
    amount, times = _remove_factors(bytes_, 1024)
    return f"{amount}{_BINARY_SUFFIX_BY_EXPONENT[times]}"


def resource_list(resources: Any) -> dict[str, str]:
    """Amounts (``Resources``) as a Kubernetes ResourceList of canonical quantities:
    ``{"cpu": "250m", "memory": "256Mi"}``, absent resources left out."""
    out: dict[str, str] = {}
    if resources.cpu_millicores is not None:
        out["cpu"] = format_cpu(resources.cpu_millicores)
    if resources.memory_bytes is not None:
        out["memory"] = format_memory(resources.memory_bytes)
    return out


def format_memory_decimal(bytes_: int) -> str:
    """Canonical ``NewScaledQuantity(bytes_, 0)``: memory before VPA 1.5 (131072k)."""
    return _format_decimal_si(_check_amount("bytes_", bytes_), 0)


def _check_number(argument: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{argument} must be a number, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{argument} must be finite, not {value!r}")
    return float(value)


def significant_text(value: float) -> str:
    """A number for people: three significant digits, no trailing zeros, thousands
    separated (1.23, 12.3, 123, 1,234); rounded, never truncated."""
    number = _check_number("value", value)
    if abs(number) >= 100:
        text = f"{number:,.0f}"
    elif abs(number) >= 10:
        text = f"{number:.1f}".rstrip("0").rstrip(".")
    else:
        text = f"{number:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _significant_value(text: str) -> float:
    return abs(float(text.replace(",", "")))


def humanize_cpu(millicores: float) -> str:
    """CPU for people (the dashboard, explanations, ``manage.py recommend``): "587m"
    below one core, else cores ("1 core", "1.5 cores"); three significant digits,
    rounded (587.6 → "588m"), never truncated."""
    value = _check_number("millicores", millicores)
    text = significant_text(value)
    if _significant_value(text) < 1000:
        return f"{text}m"
    cores = significant_text(value / 1000)
    return f"{cores} core" if _significant_value(cores) == 1 else f"{cores} cores"


# Binary units for people, largest first.
_MEMORY_UNITS = ((2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"))


def humanize_memory(bytes_: float) -> str:
    """Memory for people, binary units, three significant digits: "250 MiB",
    "4.65 GiB", "1.5 KiB", "512 B"."""
    value = _check_number("bytes_", bytes_)
    units = [*_MEMORY_UNITS, (2**10, "KiB")]
    for index, (unit, name) in enumerate(units):
        if abs(value) >= unit:
            text = significant_text(value / unit)
            # 1023.9 MiB rounds to 1,024 MiB: say 1 GiB instead.
            if index > 0 and _significant_value(text) >= 1024:
                bigger, bigger_name = units[index - 1]
                return f"{significant_text(value / bigger)} {bigger_name}"
            return f"{text} {name}"
    text = significant_text(value)
    if _significant_value(text) >= 1024:
        return f"{significant_text(value / 1024)} KiB"
    return f"{text} B"


def humanize_memory_quantity(bytes_: int) -> str:
    """Upstream's deprecated ``HumanizeMemoryQuantity`` (types.go): 1537→"1.50Ki"."""
    _check_amount("bytes_", bytes_)
    # %.2f of the float64 quotient, as Go's fmt.Sprintf; both round the exact binary
    # value.
    for exponent, suffix in ((40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")):
        if bytes_ >= 2**exponent:
            return f"{float(bytes_) / float(2**exponent):.2f}{suffix}"
    return f"{bytes_}"


def humanized_memory_bytes(bytes_: int) -> int:
    """Bytes stored with ``--humanize-memory``: the humanized text re-parsed."""
    return parse_memory_bytes(humanize_memory_quantity(bytes_))


def round_up(value: int, scale: int) -> int:
    """``RoundUpToScale`` (model/types.go): next multiple of ``scale``; 0 stays 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"value must be a non-negative int, not {value!r}")
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a positive int, not {scale!r}")
    return -(-value // scale) * scale


# Readable quantities for what people and kubectl read (a patch, a manifest, an export):
# memory rounded UP to whole KiB below 1 MiB, whole MiB below READABLE_GIB_FROM, whole
# GiB from there on, so that ``format_memory`` prints a short canonical quantity
# ("729Mi", "1291Mi", "2Gi", "101Gi") that is never below the amount. Upstream's
# deprecated ``--humanize-memory`` prints two decimals of the largest unit instead
# ("1.26Gi"): rounded to nearest (1050000 → "1.00Mi", below the amount) and not
# canonical (the API server stores "1.26Gi" as "1352914698240m"); upstream's
# replacement, ``--round-memory-bytes``, rounds up to a multiple, as this does.
READABLE_GIB_FROM = 100 * 2**30
_KIB, _MIB, _GIB = 2**10, 2**20, 2**30


def readable_memory_step(bytes_: int) -> int:
    """The unit ``readable_memory_bytes`` rounds ``bytes_`` up to: 1 KiB, 1 MiB or
    1 GiB (each threshold is a multiple of the smaller units, so rounding stays
    monotonic: a larger amount never reads smaller)."""
    _check_amount("bytes_", bytes_)
    if bytes_ <= _MIB:
        return _KIB
    if bytes_ <= READABLE_GIB_FROM:
        return _MIB
    return _GIB


def readable_memory_bytes(bytes_: int) -> int:
    """``bytes_`` rounded up to its readable unit (see ``readable_memory_step``);
    0 stays 0 and exact multiples stay as they are. Never below ``bytes_``; the
    rounding adds less than 1 MiB below 100 GiB, and less than 1 % above."""
    return min(round_up(bytes_, readable_memory_step(bytes_)), MAX_INT64)


def format_memory_readable(bytes_: int) -> str:
    """Canonical quantity of ``readable_memory_bytes``: 764046746 → "729Mi",
    1352914698 → "1291Mi", 2**30 + 1 → "1025Mi", 131072000 → "125Mi"."""
    return format_memory(readable_memory_bytes(bytes_))


def readable_resources(resources: Any) -> Any:
    """``Resources`` with memory rounded up by ``readable_memory_bytes`` (CPU is
    already whole millicores, which print canonically: "587m", "1", "1500m")."""
    memory = resources.memory_bytes
    if memory is None:
        return resources
    return resources.with_amount("memory", readable_memory_bytes(memory))


def readable_resource_list(resources: Any) -> dict[str, str]:
    """``resource_list`` of ``readable_resources``: what a person or kubectl reads."""
    return resource_list(readable_resources(resources))

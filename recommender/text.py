"""Text that vpaweb writes into what others run or read: YAML comment lines, CSV
cells (the API's CSV export and every command's ``--format csv`` use ``csv_cell``),
and amounts of money with their currency (``money_text``: notifications, PR text, the
digest; the dashboard's ``money`` filter rounds the same figure for people)."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

# Anything that would end a YAML comment line early or start a new line or document.
_UNSAFE_COMMENT = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


def comment_text(value: Any) -> str:
    """Text safe inside one ``# …`` line: control characters and line breaks become
    ``?``, so a name cannot add a line (or a document) to a manifest."""
    return _UNSAFE_COMMENT.sub("?", str(value))


# A spreadsheet reads a cell starting with one of these as a formula (OWASP's list).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A cell that no spreadsheet evaluates: text starting with a formula character
    gets a leading apostrophe (``'=1+1``); numbers and other text are left alone."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def money_text(amount: float, *, signed: bool = False) -> str:
    """An amount of money to the cent with its currency (``VPAWEB_CURRENCY``):
    "1,234.56 USD", "-12.00 USD"; ``signed``: "+1,234.56 USD" for a gain."""
    cents = round(float(amount), 2)
    if cents == 0:
        cents = 0.0  # no "-0.00"
    sign = "+" if signed and cents > 0 else ""
    return f"{sign}{cents:,.2f} {settings.CURRENCY}"

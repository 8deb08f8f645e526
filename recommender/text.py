"""Text that vpaweb writes into what others run or read: YAML comment lines."""

from __future__ import annotations

import re
from typing import Any

# Anything that would end a YAML comment line early or start a new line or document.
_UNSAFE_COMMENT = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


def comment_text(value: Any) -> str:
    """Text safe inside one ``# …`` line: control characters and line breaks become
    ``?``, so a name cannot add a line (or a document) to a manifest."""
    return _UNSAFE_COMMENT.sub("?", str(value))

"""Copy ReDoc's bundle from drf-spectacular-sidecar into static/vendor/ (`make setup`,
the Dockerfile), made to load nothing from outside.

The bundle shows the Redocly logo in its menu from cdn.redoc.ly, with no option to turn
it off: the copy names an empty image instead (ReDoc then leaves the logo out). Its
source-map comment goes too, as the map is not copied (collectstatic would look for
it). The copy is checked for other CDN or font hosts, so a new ReDoc that adds one fails
the build; tests/browser/test_live_pages.py records every request the docs pages make.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import drf_spectacular_sidecar

SOURCE = (
    Path(drf_spectacular_sidecar.__file__).parent
    / "static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
)
LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
# Hosts a web page would load assets from; none may be left in the copy.
ASSET_HOSTS = re.compile(r"https?://(cdn\.|fonts\.googleapis|fonts\.gstatic|unpkg\.)")


def vendored(text: str) -> str:
    """The bundle's text with the logo made an empty image and no source map."""
    text = text.replace(LOGO, "data:,")
    text = re.sub(r"\n//# sourceMappingURL=\S+\s*$", "\n", text)
    left = sorted({m.group(0) for m in ASSET_HOSTS.finditer(text)})
    if left:
        raise SystemExit(f"{SOURCE} would load from outside: {left}")
    return text


def main(target: str) -> None:
    """Write the vendored bundle to ``target``, and beside it the licence file its
    first line names."""
    Path(target).write_text(vendored(SOURCE.read_text(encoding="utf-8")), "utf-8")
    shutil.copy(f"{SOURCE}.LICENSE.txt", f"{target}.LICENSE.txt")


if __name__ == "__main__":
    main(sys.argv[1])

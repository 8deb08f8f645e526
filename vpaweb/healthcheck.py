"""The image's HEALTHCHECK: ``python3 -m vpaweb.healthcheck`` asks the local web server.

Exits 0 when ``http://127.0.0.1:$PORT/healthz`` answers 200 within 4 s, 1 otherwise,
printing why (Docker keeps the last lines in ``docker inspect``). Standard library only,
so it does not import Django.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    """Probe /healthz once."""
    url = f"http://127.0.0.1:{os.environ.get('PORT', '8000')}/healthz"
    request = urllib.request.Request(url, headers={"Host": "localhost"})
    try:
        with urllib.request.urlopen(request, timeout=4) as response:
            status = response.status
    except (urllib.error.URLError, OSError) as exc:
        print(f"{url}: {exc}")
        return 1
    print(f"{url}: HTTP {status}")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())

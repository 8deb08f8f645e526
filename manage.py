#!/usr/bin/env python
"""Django's command-line utility for vpaweb.

Local runs find their secret key by themselves: with neither SECRET_KEY nor
SECRET_KEY_FILE set, manage.py reads ``var/secret_key``
(``$VPAWEB_VAR_DIR/secret_key``), which ``make run`` creates. Production entry points
(``vpaweb.wsgi``, Celery) do not: there a missing key stops the start.
"""

import os
import sys
from pathlib import Path


def main() -> None:
    """Run a management command."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    from vpaweb.env import use_local_secret_key

    use_local_secret_key(Path(__file__).resolve().parent)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()

"""Typed readers of environment variables for the settings module.

Each raises ``ImproperlyConfigured`` naming the variable when its value is bad, so a
typo in a deployment fails at start-up with a message that says what to fix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """Return the variable's text, or ``default`` when unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """Read a boolean: 1/true/yes/on or 0/false/no/off (any case)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use true or false")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Read an integer, optionally no smaller than ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """Read a number, optionally no smaller than ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name}={raw!r} must be a finite number")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    """Read a comma-separated list, dropping blanks."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


# A Kubernetes object name (RFC 1123 subdomain): what ``spec.recommenders[].name`` of a
# VerticalPodAutoscaler, and other names vpaweb is known by in a cluster, must match.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")


def env_name(name: str, default: str) -> str:
    """Read a Kubernetes name: lower-case letters, digits, ``-`` and ``.``, starting and
    ending with a letter or digit, at most 253 characters (blank means ``default``)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a Kubernetes name: lower-case letters, digits, "
            "'-' and '.', starting and ending with a letter or digit"
        )
    return value


def env_header_pair(name: str) -> tuple[str, str] | None:
    """Read ``HEADER,value`` (e.g. ``HTTP_X_FORWARDED_PROTO,https``) as a pair, or None
    when unset or empty; the header is Django's META name (``HTTP_`` + upper case)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    parts = [part.strip() for part in raw.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ImproperlyConfigured(
            f"{name}={raw!r} must be HEADER,value, e.g. HTTP_X_FORWARDED_PROTO,https"
        )
    header, value = parts
    if not header.startswith("HTTP_") or header.upper() != header:
        raise ImproperlyConfigured(
            f"{name}={raw!r}: the header must be its META name, upper case with "
            "the HTTP_ prefix, e.g. HTTP_X_FORWARDED_PROTO"
        )
    return header, value


def env_secret(name: str, default: str = "") -> str:
    """Read a secret from ``NAME`` or from the file named by ``NAME_FILE``."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{name}_FILE={file_name!r} cannot be read: {exc.strerror}"
            ) from None
    return os.environ.get(name, default)


def use_local_secret_key(base_dir: Path) -> Path | None:
    """For ``manage.py`` only: with neither ``SECRET_KEY`` nor ``SECRET_KEY_FILE`` set,
    point ``SECRET_KEY_FILE`` at the key ``make run`` generated
    (``$VPAWEB_VAR_DIR/secret_key``, default ``<base_dir>/var/secret_key``) when it
    exists; return that path, or None when nothing was changed.

    The rule: local commands after ``make run`` find the key by themselves; every other
    entry point (``vpaweb.wsgi`` under gunicorn, Celery worker and beat) never calls
    this, so production still refuses to start without a configured key.
    """
    if os.environ.get("SECRET_KEY") or os.environ.get("SECRET_KEY_FILE"):
        return None
    var_dir = Path(os.environ.get("VPAWEB_VAR_DIR") or base_dir / "var")
    key = var_dir / "secret_key"
    if not key.is_file():
        return None
    os.environ["SECRET_KEY_FILE"] = str(key)
    return key


def database_from_url(name: str, url: str) -> dict[str, object]:
    """A DATABASES entry from ``postgres://user:pass@host:port/db`` or ``sqlite:///path``."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql", "pgsql"):
        database = unquote(parts.path.lstrip("/"))
        if not database:
            raise ImproperlyConfigured(f"{name}={url!r} names no database")
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured(f"{name}={url!r} has a bad port") from None
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": database,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
            # No JIT compilation: the dashboard's aggregates (a few hundred thousand
            # rows) are estimated above jit_above_cost, and compiling their
            # expressions took longer than running them (1.9 s of JIT for a 0.4 s
            # query at 100,000 containers; docs/dashboard.md "Page times").
            "OPTIONS": {"options": "-c jit=off"},
        }
    if parts.scheme == "sqlite":
        # sqlite:///relative, sqlite:////absolute paths: read as dj-database-url does.
        path = unquote(parts.path)[1:]
        if not path:
            raise ImproperlyConfigured(f"{name}={url!r} names no database file")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path}
    raise ImproperlyConfigured(
        f"{name}={url!r}: only postgres:// and sqlite:/// URLs are supported"
    )

"""gunicorn's configuration for production: `gunicorn -c vpaweb/gunicorn_conf.py
vpaweb.wsgi:application`, configured only from the environment (README "Production")."""
# - GUNICORN_BIND (default 0.0.0.0:8000): where to listen.
# - WEB_CONCURRENCY (default 2 x CPUs + 1): worker processes.
# - GUNICORN_THREADS (default 8): request threads per worker (``gthread``, with the read
#   deadline of vpaweb/gunicorn_worker.py). An idle or keep-alive connection holds no
#   thread; a slow client (slowloris) holds one for GUNICORN_READ_TIMEOUT at most, and a
#   worker whose threads are all held accepts nothing new, so ten of them leave /healthz
#   answered. Each thread may hold a database connection:
#   WEB_CONCURRENCY x GUNICORN_THREADS per pod, within PostgreSQL's max_connections.
# - GUNICORN_READ_TIMEOUT (default 10 s): a request (head and body) must arrive within
#   this long of its first byte, else the connection is dropped.
# - GUNICORN_TIMEOUT (default 30 s): a worker whose main loop is silent for longer is
#   killed (a request thread running long does not silence it).
# - VPAWEB_REQUEST_DEADLINE_S: an /api/ request still running after this many seconds is
#   answered with the API's JSON error (503, code ``timeout``) instead of being killed
#   with the worker (recommender/api/deadline.py). Defaults to GUNICORN_TIMEOUT - 5 s
#   (at least 1 s); it must stay below GUNICORN_TIMEOUT.
# - GUNICORN_MAX_REQUESTS (default 1000): a worker is replaced after this many requests
#   (with jitter), which bounds the memory any one worker can accumulate. The worker
#   serves the connections it accepted before it goes, and goes at once
#   (vpaweb/gunicorn_worker.py): no request fails over a replacement.
# - FORWARDED_ALLOW_IPS: gunicorn's own variable, for proxies it may trust.
#
# The app and every view are imported once, in the master, before the workers are forked
# (``preload_app`` and ``when_ready``): a worker, and each replacement after
# GUNICORN_MAX_REQUESTS, starts in a few milliseconds instead of about a second of CPU
# taken from the workers serving requests, and the workers share that memory. A code
# change therefore needs a restart of the master, not a HUP.

from __future__ import annotations

import os


def _int(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise SystemExit(f"{name}={value} must be at least {minimum}")
    return value


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = _int("WEB_CONCURRENCY", 2 * (os.cpu_count() or 1) + 1, 1)
worker_class = "vpaweb.gunicorn_worker.ReadDeadlineWorker"
threads = _int("GUNICORN_THREADS", 8, 1)
# A worker takes no more connections than it has threads: one whose threads are all held
# (slow clients) stops accepting, and the kernel hands new connections to the others
# (it would otherwise keep giving most of them to the same worker).
worker_connections = threads
# Read by the worker class from the environment (it has no gunicorn setting).
os.environ["GUNICORN_READ_TIMEOUT"] = str(_int("GUNICORN_READ_TIMEOUT", 10, 1))
preload_app = True
timeout = _int("GUNICORN_TIMEOUT", 30, 2)
graceful_timeout = timeout
# No keep-alive, as with sync workers: every thread serves a request, none waits on an
# idle connection (worker_connections = threads leaves no room for one).
keepalive = 0
max_requests = _int("GUNICORN_MAX_REQUESTS", 1000, 0)
max_requests_jitter = max_requests // 10
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
# The deadline of the app, below the timeout: the workers inherit this environment.
_deadline = os.environ.setdefault("VPAWEB_REQUEST_DEADLINE_S", str(max(1, timeout - 5)))
try:
    _deadline_s = float(_deadline)
except ValueError:
    raise SystemExit(
        f"VPAWEB_REQUEST_DEADLINE_S={_deadline!r} is not a number"
    ) from None
if not 0 <= _deadline_s < timeout:
    raise SystemExit(
        f"VPAWEB_REQUEST_DEADLINE_S={_deadline} must be below "
        f"GUNICORN_TIMEOUT={timeout} (0 turns the deadline off)"
    )


def when_ready(server: object) -> None:
    """In the master, before the first fork: import every URLconf and view (the app
    itself is preloaded), build the URL reverse map and compile the project's
    templates (each worker's first request of a page would otherwise pay for them),
    and close any database connection that importing opened, so that no worker
    inherits a shared one."""
    from django.db import connections
    from django.urls import get_resolver

    from recommender.api.strict_query import allowed_query_parameters

    get_resolver().url_patterns  # noqa: B018 (imports every URLconf and view)
    get_resolver().reverse_dict  # noqa: B018 (builds what every {% url %} reads)
    allowed_query_parameters()  # the API's schema, read by every /api/ request
    compile_templates()
    connections.close_all()


def compile_templates() -> list[str]:
    """Compile every template under the project's templates/ into the cached loader
    (Django's default when DEBUG is off), so the forked workers share them; the names
    compiled. A template that does not compile stops the server here, at start."""
    from django.conf import settings
    from django.template.loader import get_template

    root = settings.BASE_DIR / "templates"
    names = sorted(str(path.relative_to(root)) for path in root.rglob("*.html"))
    for name in names:
        get_template(name)
    return names


def post_worker_init(worker: object) -> None:
    """Load every view before the first request (already done by ``when_ready`` in
    the master; kept for a config without preload_app): a worker's first request would
    otherwise pay for importing the whole app, inside its deadline and timeout."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (imports every URLconf and view)


def worker_abort(worker: object) -> None:
    """Log a killed worker's last words (its request ran past the deadline and the
    timeout both, e.g. stuck in a C call that signals cannot interrupt)."""
    log = getattr(worker, "log", None)
    if log is not None:
        log.error(
            "worker %s timed out after %s s (past VPAWEB_REQUEST_DEADLINE_S too); "
            "its client gets gunicorn's error page",
            getattr(worker, "pid", "?"),
            timeout,
        )

"""vpaweb settings: the environment is the only input (see README and .env.example).

With nothing set, vpaweb runs on one machine: SQLite under var/, tasks run in-process, a
locmem cache, and the simulated cluster. DATABASE_URL switches to PostgreSQL; REDIS_URL
switches the Celery broker, the result backend and the cache to Redis.
"""

from __future__ import annotations

from pathlib import Path

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from vpaweb.env import (
    database_from_url,
    env_bool,
    env_float,
    env_header_pair,
    env_int,
    env_list,
    env_name,
    env_secret,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VPAWEB_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY (or SECRET_KEY_FILE) must be set unless DEBUG=true (manage.py "
            "also finds var/secret_key, which `make run` creates)"
        )
    SECRET_KEY = "insecure-development-key-only-used-while-DEBUG-is-on"
# The public keys of deploy/compose/demo.env and of the trial overlay
# (deploy/overlays/trial) sign sessions anyone can forge: accepted only where
# VPAWEB_DEMO says this is a demo or a trial (both set it).
DEMO = env_bool("VPAWEB_DEMO", False)
PUBLIC_DEMO_SECRET_KEY = (
    "demo-only-secret-key-change-me-for-anything-but-a-trial-0123456789"
)
PUBLIC_TRIAL_SECRET_KEY = (
    "trial-only-secret-key-change-me-0123456789-abcdefghijklmnopqrstuvwxyz"
)
if SECRET_KEY in (PUBLIC_DEMO_SECRET_KEY, PUBLIC_TRIAL_SECRET_KEY) and not DEMO:
    raise ImproperlyConfigured(
        "SECRET_KEY is the public demo key of deploy/compose/demo.env or of "
        "deploy/overlays/trial: set a secret of your own (or VPAWEB_DEMO=true for the "
        "local compose demo or the trial only)"
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "recommender",
]

MIDDLEWARE = [
    # Outermost: the deadline covers every other layer of an /api/ request.
    "recommender.api.deadline.RequestDeadlineMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A view's lost database connection is a 503 with Retry-After, not a 500.
    "vpaweb.database_outage.DatabaseUnavailableMiddleware",
    "vpaweb.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Unknown query parameters of an /api/ operation are a 400 naming them.
    "recommender.api.strict_query.StrictQueryMiddleware",
    # Last, as django-axes asks: answers a locked-out login with the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "vpaweb.urls"
WSGI_APPLICATION = "vpaweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # The kill switch and paused clusters in every page's header.
                "recommender.web.context.safety",
                # The currency beside every amount of money.
                "recommender.web.context.money",
            ],
            # The dashboard's filters live with the dashboard (recommender/web/).
            "libraries": {"dashboard": "recommender.web.templatetags.dashboard"},
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": database_from_url("DATABASE_URL", DATABASE_URL)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "db.sqlite3",
            # The scheduler loop and the web server share the file: wait for locks.
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
            # Kept open between requests (as PostgreSQL's, vpaweb/env.py): opening one
            # costs about a millisecond of CPU, a tenth of an API request.
            "CONN_MAX_AGE": 60,
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Login throttling (django-axes): after VPAWEB_LOGIN_FAILURE_LIMIT failed logins, the
# account is locked, and so is the address, each on its own (a guesser cannot spread
# over accounts, nor lock everyone out from one address), for the cool-off time. An
# admin unlocks in the admin (Axes > Access attempts: delete) or with
# `manage.py axes_reset_username NAME` / `axes_reset_ip ADDRESS`. Shared by all
# processes: attempts are stored in the database.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("VPAWEB_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("VPAWEB_LOGIN_COOLOFF_MINUTES", 15.0, minimum=0.0) / 60
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "recommender/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "vpaweb.security.client_ip"
AXES_VERBOSE = False
# Reverse proxies in front that append to X-Forwarded-For (0: use the peer address).
TRUSTED_PROXY_COUNT = env_int("VPAWEB_TRUSTED_PROXY_COUNT", 0, minimum=0)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# `manage.py collectstatic` writes here; the container image collects into the image
# and `manage.py serve` (`make run`) collects before it serves.
STATIC_ROOT = Path(env_str("VPAWEB_STATIC_ROOT", str(VAR_DIR / "staticfiles")))
# Collected files get a content hash in their names (plotly-basic.min.js ->
# plotly-basic.min.<hash>.js) and a precompressed .gz copy (no brotli: it made
# collectstatic take 36 s of CPU instead of 2 s); WhiteNoise serves the gzip copy to
# browsers that accept it, and hashed names with a 10-year immutable cache.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage",
    },
}
# Only the hashed names are collected (and compressed): half the work and the space.
WHITENOISE_KEEP_ONLY_HASHED_FILES = True

SESSION_COOKIE_HTTPONLY = True
# htmx reads the token from the cookie-less meta tag instead.
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# HTTPS switches of `manage.py check --deploy`, each read from the environment under
# Django's own name (README "Production"). Off by default: `make run` serves plain HTTP.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Kubernetes probes and Prometheus' scrapes call the pod over plain HTTP: no redirect
# for them (/metrics has its own bearer token).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics(/recommendations)?$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# Served over HTTPS as deployed (any of the switches above on, DEBUG off): a key that
# `check --deploy` would only warn about (security.W009: under 50 characters or under 5
# different ones) is refused, as a 1-character key signs sessions anyone can forge.
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_UNIQUE = 5
if (
    not DEBUG
    and not DEMO
    and (SECURE_SSL_REDIRECT or SESSION_COOKIE_SECURE or SECURE_HSTS_SECONDS > 0)
    and (
        len(SECRET_KEY) < SECRET_KEY_MIN_LENGTH
        or len(set(SECRET_KEY)) < SECRET_KEY_MIN_UNIQUE
    )
):
    raise ImproperlyConfigured(
        f"SECRET_KEY is too short for production: at least {SECRET_KEY_MIN_LENGTH} "
        f"characters, {SECRET_KEY_MIN_UNIQUE} of them different (e.g. `python -c "
        '"import secrets; print(secrets.token_urlsafe(50))"`)'
    )
# Behind a TLS-terminating proxy: HTTP_X_FORWARDED_PROTO,https (only if the proxy sets
# or strips that header on every request).
SECURE_PROXY_SSL_HEADER = env_header_pair("SECURE_PROXY_SSL_HEADER")
# Scripts only from this site (no inline script, no eval); styles may be inline, as
# plotly and Swagger UI set them; images also as data: URLs (Swagger UI, plotly).
CONTENT_SECURITY_POLICY = env_str("VPAWEB_CONTENT_SECURITY_POLICY").strip() or (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
    "worker-src 'self' blob:; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)
if CONTENT_SECURITY_POLICY.lower() == "off":
    CONTENT_SECURITY_POLICY = ""

# --- Background work ------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = env_int("VPAWEB_TASK_TIME_LIMIT_S", 900, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Expensive requests (namespace comparisons) run on a queue of their own, consumed by a
# worker of their own (docs/deploy.md: `celery worker -Q heavy`), so a flood of them
# never holds back refresh_cluster and update_cluster on the default queue.
HEAVY_QUEUE = env_str("VPAWEB_HEAVY_QUEUE", "heavy")
CELERY_TASK_ROUTES = {
    "recommender.tasks.compare_namespace": {"queue": HEAVY_QUEUE},
    "recommender.tasks.what_if": {"queue": HEAVY_QUEUE},
}
# Per user: at most this many comparisons / what-ifs at once, and this many a minute
# (counted across processes, services/access/heavy_jobs.py).
HEAVY_JOBS_RUNNING = env_int("VPAWEB_HEAVY_JOBS_RUNNING", 2, minimum=1)
HEAVY_JOBS_PER_MINUTE = env_int("VPAWEB_HEAVY_JOBS_PER_MINUTE", 10, minimum=1)
# Per process: comparisons and what-ifs run in a request hold at most this share of the
# request threads (GUNICORN_THREADS, read by vpaweb/gunicorn_conf.py too; at least
# one), so /healthz and the pages always find a thread; past it, 503 busy.
REQUEST_THREADS = env_int("GUNICORN_THREADS", 8, minimum=1)
HEAVY_SYNC_SHARE = 0.25
# Active API tokens one person may hold (tokens made on the command line excepted).
API_TOKENS_PER_USER = env_int("VPAWEB_API_TOKENS_PER_USER", 10, minimum=1)
# A what-if costing more container-days (containers x days replayed) than this runs
# on the heavy queue and is answered 202 with a job to poll
# (services/replay/whatif_jobs.py).
WHATIF_SYNC_CONTAINER_DAYS = env_float(
    "VPAWEB_WHATIF_SYNC_CONTAINER_DAYS", 8.0, minimum=0.0
)
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND: str | None = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
        }
    }
else:
    # The embedded default: tasks run in-process and errors propagate to the caller.
    CELERY_BROKER_URL = "memory://localhost/"
    CELERY_RESULT_BACKEND = None
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = True
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

REFRESH_INTERVAL_S = env_int("VPAWEB_REFRESH_INTERVAL_S", 60, minimum=5)
# A checkpoint not changed materially is rewritten once this old (oldest first), within
# the store phase's time budget (upstream: --checkpoints-timeout); docs/refresh.md.
CHECKPOINT_INTERVAL_S = env_int("VPAWEB_CHECKPOINT_INTERVAL_S", 600, minimum=0)
CHECKPOINTS_TIMEOUT_S = env_float("VPAWEB_CHECKPOINTS_TIMEOUT_S", 10.0, minimum=0.1)
# Usage may reach Prometheus this late (a scrape gap, remote write): each cycle reads
# the last this-many seconds again, and checkpoints hold only what lies before them
# (0: each minute is read once); docs/refresh.md, "Late samples".
LATE_SAMPLES_S = env_int("VPAWEB_LATE_SAMPLES_S", 0, minimum=0)
# Containers met for the first time are ingested this many at a time, so the memory of
# a first contact does not grow with the fleet (0: the whole fleet at once);
# docs/refresh.md, "Bounded memory at first contact".
FIRST_CONTACT_CHUNK_CONTAINERS = env_int(
    "VPAWEB_FIRST_CONTACT_CHUNK_CONTAINERS", 500, minimum=0
)
# A whole-cluster pass over more containers than this ingests its steady workloads in
# windows by namespace (a namespace of a quarter of it or more alone, the smaller ones
# together), so its working set is not the fleet's; docs/refresh.md, "Memory of a
# worker". 0: one window.
STEADY_WINDOW_CONTAINERS = env_int("VPAWEB_STEADY_WINDOW_CONTAINERS", 10000, minimum=0)
# With a broker, a whole-cluster refresh leaves the first contact of new workloads to
# one task per namespace, which the Celery workers share; docs/refresh.md.
FIRST_CONTACT_BY_SHARD = env_bool("VPAWEB_FIRST_CONTACT_BY_SHARD", True)

# --- The updater (docs/updater.md) ---------------------------------------------------
# How often each cluster's updater proposes, applies and verifies resize changes.
UPDATER_INTERVAL_S = env_int("VPAWEB_UPDATER_INTERVAL_S", 60, minimum=5)
# Upstream's --min-replicas and --eviction-tolerance (a policy's min_replicas wins).
UPDATER_MIN_REPLICAS = env_int("VPAWEB_UPDATER_MIN_REPLICAS", 2, minimum=1)
UPDATER_EVICTION_TOLERANCE = env_float(
    "VPAWEB_UPDATER_EVICTION_TOLERANCE", 0.5, minimum=0.0
)
# The global rate limit per cluster: at most this many evictions / in-place resizes
# per cycle (0 = none at all).
UPDATER_MAX_EVICTIONS_PER_CYCLE = env_int(
    "VPAWEB_UPDATER_MAX_EVICTIONS_PER_CYCLE", 10, minimum=0
)
UPDATER_MAX_RESIZES_PER_CYCLE = env_int(
    "VPAWEB_UPDATER_MAX_RESIZES_PER_CYCLE", 50, minimum=0
)
# Propose (and approve) changes but never write to a cluster.
UPDATER_DRY_RUN = env_bool("VPAWEB_UPDATER_DRY_RUN", False)
# The global kill switch: no cluster write at all (the admin has the same toggle).
UPDATER_KILL_SWITCH = env_bool("VPAWEB_UPDATER_KILL_SWITCH", False)
# The recommender name vpaweb answers to: a VerticalPodAutoscaler whose
# spec.recommenders names it gets vpaweb's recommendation in its status
# (docs/updater.md, the drop-in path).
RECOMMENDER_NAME = env_name("VPAWEB_RECOMMENDER_NAME", "vpaweb")
# An applying change not verified on a discovery within this time is marked failed.
UPDATER_VERIFY_TIMEOUT_S = env_int("VPAWEB_UPDATER_VERIFY_TIMEOUT_S", 3600, minimum=60)
# An evicted pod's replacement Pending as Unschedulable for longer fails the change.
UPDATER_UNSCHEDULABLE_TIMEOUT_S = env_int(
    "VPAWEB_UPDATER_UNSCHEDULABLE_TIMEOUT_S", 300, minimum=0
)

CELERY_BEAT_SCHEDULE = {
    # Each updater interval: every cluster's updater cycle (one worker per cluster).
    "update-all-clusters": {
        "task": "recommender.tasks.update_all_clusters",
        "schedule": float(UPDATER_INTERVAL_S),
    },
    # Each minute: discover, ingest since watermarks, recommend (upstream's 1-min loop).
    "refresh-all-clusters": {
        "task": "recommender.tasks.refresh_all_clusters",
        "schedule": float(REFRESH_INTERVAL_S),
    },
    # Hourly at minute 7: drop aggregates idle for 8 days (upstream's hourly GC).
    "expire-idle-aggregates": {
        "task": "recommender.tasks.expire_idle_aggregates",
        "schedule": crontab(minute=7),
    },
    # Hourly at minute 37: prune history past its retention (RETENTION_* above), a
    # bounded run away from the expiry's minute.
    "prune-history": {
        "task": "recommender.tasks.prune_history",
        "schedule": crontab(minute=37),
    },
}

# --- Notification channels (services/operations/notifications, docs/notifications.md)
# Links in messages point here: the dashboard as its users reach it.
DASHBOARD_URL = env_str("VPAWEB_DASHBOARD_URL", "http://127.0.0.1:8000")
# A channel's webhook gets this long to answer; a slower one is a failure, kept on the
# channel, and the cycle goes on.
NOTIFY_TIMEOUT_S = env_float("VPAWEB_NOTIFY_TIMEOUT_S", 3.0, minimum=0.1)

# --- Admission webhook (recommender/webhook.py, docs/webhook.md) ----------------------
# The answer is sent within this many seconds whatever happens (fail open): well under
# the MutatingWebhookConfiguration's timeoutSeconds, which holds the pod's creation.
WEBHOOK_DEADLINE_S = env_float("VPAWEB_WEBHOOK_DEADLINE_S", 0.5, minimum=0.01)
# timeoutSeconds written by `manage.py webhook install` (the API server allows 1-30;
# vpaweb allows at most 5 so a slow vpaweb never holds pod creation long).
WEBHOOK_TIMEOUT_S = env_int("VPAWEB_WEBHOOK_TIMEOUT_S", 3, minimum=1)
if WEBHOOK_TIMEOUT_S > 5:
    raise ImproperlyConfigured(
        f"VPAWEB_WEBHOOK_TIMEOUT_S must be at most 5, not {WEBHOOK_TIMEOUT_S}"
    )
# The in-process cache of the webhook's inputs is reloaded at least this often.
WEBHOOK_RELOAD_S = env_float("VPAWEB_WEBHOOK_RELOAD_S", 60.0, minimum=1.0)
# A cache older than this (the database unreachable that long) is not used.
WEBHOOK_MAX_SNAPSHOT_AGE_S = env_float(
    "VPAWEB_WEBHOOK_MAX_SNAPSHOT_AGE_S", 900.0, minimum=10.0
)
# A workload discovery has not seen for this long has a stale recommendation.
WEBHOOK_MAX_RECOMMENDATION_AGE_S = env_float(
    "VPAWEB_WEBHOOK_MAX_RECOMMENDATION_AGE_S", 86400.0, minimum=60.0
)
# Initial mode and the updater act only on recommendations backed by this many hours
# of history (services/advice/history.py); 0 acts on any.
MIN_HISTORY_HOURS = env_float("VPAWEB_MIN_HISTORY_HOURS", 24.0, minimum=0.0)
# What one client may hold of the webhook server (recommender/webhook_connections.py):
# connections open at once (more are closed at accept), request bodies in memory
# across connections (a body that does not fit is answered 503 at once), and the time
# from a request's first byte to its last (a slower client is dropped).
WEBHOOK_MAX_CONNECTIONS = env_int("VPAWEB_WEBHOOK_MAX_CONNECTIONS", 256, minimum=4)
# At least 8: three quarters of it (the rest is kept for small bodies) hold a 5 MiB one.
WEBHOOK_MAX_BUFFERED_MIB = env_int("VPAWEB_WEBHOOK_MAX_BUFFERED_MIB", 32, minimum=8)
WEBHOOK_READ_DEADLINE_S = env_float("VPAWEB_WEBHOOK_READ_DEADLINE_S", 5.0, minimum=0.5)
# A PEM CA: `webhook serve` then admits reviews only from clients presenting a
# certificate it signed (the API server's, docs/webhook.md); the default is its
# --client-ca option.
WEBHOOK_CLIENT_CA = env_str("VPAWEB_WEBHOOK_CLIENT_CA")
# vpaweb's own namespace: never sent to the webhook (so it can never block itself).
WEBHOOK_NAMESPACE = env_str("VPAWEB_WEBHOOK_NAMESPACE", "vpaweb")
# The cluster whose pods `/mutate` (without a cluster in the path) admits.
WEBHOOK_CLUSTER = env_str("VPAWEB_WEBHOOK_CLUSTER")

# --- Clusters and sources -------------------------------------------------------------
# The simulated cluster serves when no real cluster is configured (or when asked for).
SIMULATION_ENABLED = env_bool("VPAWEB_SIMULATION", True)
SIMULATION_SEED = env_int("VPAWEB_SIMULATION_SEED", 20261121)
SIMULATION_WORKLOADS = env_int("VPAWEB_SIMULATION_WORKLOADS", 120, minimum=1)
SIMULATION_HISTORY_DAYS = env_float("VPAWEB_SIMULATION_HISTORY_DAYS", 8.0, minimum=0.0)

# Prometheus history (recommender/sources/prometheus.py, docs/prometheus.md). With a URL
# set, Kubernetes clusters read usage and OOM history from it instead of metrics-server.
PROMETHEUS_URL = env_str("PROMETHEUS_URL")
PROMETHEUS_BEARER_TOKEN = env_secret("PROMETHEUS_BEARER_TOKEN")
PROMETHEUS_USERNAME = env_str("PROMETHEUS_USERNAME")
PROMETHEUS_PASSWORD = env_secret("PROMETHEUS_PASSWORD")
PROMETHEUS_CA_FILE = env_str("PROMETHEUS_CA_FILE")
PROMETHEUS_TIMEOUT_S = env_float("PROMETHEUS_TIMEOUT_S", 30.0, minimum=0.1)
PROMETHEUS_RETRIES = env_int("PROMETHEUS_RETRIES", 3, minimum=0)
# services/backfill.py accepts (0, 366] days: refuse anything else at startup, not at
# every back-fill.
PROMETHEUS_BACKFILL_DAYS = env_float("PROMETHEUS_BACKFILL_DAYS", 8.0, minimum=0.01)
if PROMETHEUS_BACKFILL_DAYS > 366:
    raise ImproperlyConfigured(
        f"PROMETHEUS_BACKFILL_DAYS={PROMETHEUS_BACKFILL_DAYS} must be at most 366"
    )
# rate() needs two scrapes per window: raise this to twice a scrape interval above 30 s.
PROMETHEUS_RATE_WINDOW_S = env_int("PROMETHEUS_RATE_WINDOW_S", 60, minimum=1)
PROMETHEUS_CONCURRENCY = env_int("PROMETHEUS_CONCURRENCY", 4, minimum=1)
# Prometheus refuses more than 11,000 points per series in one range query.
PROMETHEUS_MAX_POINTS = env_int("PROMETHEUS_MAX_POINTS", 11000, minimum=2)
# gzip Prometheus' answers: saves bandwidth, costs Prometheus CPU (off: same network).
PROMETHEUS_GZIP = env_bool("PROMETHEUS_GZIP", False)
PROMETHEUS_NAMESPACE_LABEL = env_str("PROMETHEUS_NAMESPACE_LABEL", "namespace")
PROMETHEUS_POD_LABEL = env_str("PROMETHEUS_POD_LABEL", "pod")
PROMETHEUS_CONTAINER_LABEL = env_str("PROMETHEUS_CONTAINER_LABEL", "container")
PROMETHEUS_CPU_METRIC = env_str(
    "PROMETHEUS_CPU_METRIC", "container_cpu_usage_seconds_total"
)
PROMETHEUS_MEMORY_METRIC = env_str(
    "PROMETHEUS_MEMORY_METRIC", "container_memory_working_set_bytes"
)
PROMETHEUS_CADVISOR_SELECTOR = env_str("PROMETHEUS_CADVISOR_SELECTOR")
PROMETHEUS_KUBE_STATE_SELECTOR = env_str("PROMETHEUS_KUBE_STATE_SELECTOR")

# Kubernetes API reads (recommender/cluster/kube_client.py, docs/kubernetes.md). The
# kubeconfig is the client's own KUBECONFIG; names avoid KUBERNETES_*, which Kubernetes
# injects into pods.
KUBERNETES_CONNECT_TIMEOUT_S = env_float(
    "VPAWEB_K8S_CONNECT_TIMEOUT_S", 5.0, minimum=0.1
)
KUBERNETES_READ_TIMEOUT_S = env_float("VPAWEB_K8S_READ_TIMEOUT_S", 30.0, minimum=0.1)
KUBERNETES_RETRIES = env_int("VPAWEB_K8S_RETRIES", 4, minimum=0)
KUBERNETES_BACKOFF_S = env_float("VPAWEB_K8S_BACKOFF_S", 0.5, minimum=0.0)
# Also caps a server's Retry-After, so a throttled list cannot stall a refresh for long.
KUBERNETES_MAX_BACKOFF_S = env_float("VPAWEB_K8S_MAX_BACKOFF_S", 30.0, minimum=0.0)
KUBERNETES_PAGE_SIZE = env_int("VPAWEB_K8S_PAGE_SIZE", 500, minimum=1)

# --- Dashboard ------------------------------------------------------------------------
# Monthly savings estimate: list prices of on-demand cloud capacity (see the README).
PRICE_PER_CORE_HOUR = env_float("VPAWEB_PRICE_PER_CORE_HOUR", 0.031611, minimum=0.0)
PRICE_PER_GIB_HOUR = env_float("VPAWEB_PRICE_PER_GIB_HOUR", 0.004237, minimum=0.0)
# A CSV of prices by node name, instance type or node labels, used for nodes without
# OpenCost's cost metrics (services/refresh/node_prices.py, docs/prometheus.md); ""
# = none.
PRICE_TABLE = env_str("VPAWEB_PRICE_TABLE", "")
# The currency of every price above, printed beside every amount of money (the
# dashboard, notifications, PR text, the digest): an ISO 4217 code.
CURRENCY = env_str("VPAWEB_CURRENCY", "USD")
# The node label that names a node's pool for "nodes you can free" (docs/dashboard.md);
# nodes without it fall back to GKE's, EKS's and Karpenter's pool labels.
NODE_POOL_LABEL = env_str("VPAWEB_NODE_POOL_LABEL", "node.kubernetes.io/instance-type")
# How often a refresh reads the nodes and pods again and repacks the pools when they
# or the recommendations changed (docs/dashboard.md, "Nodes you can free"); between
# times the stored plan stands, with its age shown. 0: every whole-cluster refresh.
NODE_POOLS_INTERVAL_S = env_float("VPAWEB_NODE_POOLS_INTERVAL_S", 300.0, minimum=0.0)
# Rollups by label: the workload label that names a team (docs/dashboard.md).
ROLLUP_LABEL_KEY = env_str("VPAWEB_ROLLUP_LABEL_KEY", "team")
# The savings trend: hourly snapshots per namespace, thinned to one a day after
# SAVINGS_TREND_HOURLY_DAYS and dropped after SAVINGS_TREND_DAYS.
SAVINGS_TREND_DAYS = env_int("VPAWEB_SAVINGS_TREND_DAYS", 400, minimum=1)
SAVINGS_TREND_HOURLY_DAYS = env_int("VPAWEB_SAVINGS_TREND_HOURLY_DAYS", 14, minimum=1)

# --- Retention (recommender/services/operations/retention.py, docs/refresh.md) ------
# History older than these many days is pruned by the hourly prune task, in batches of
# RETENTION_BATCH rows, each its own short transaction, for at most RETENTION_BUDGET_S
# seconds a run (what is left goes on the next run): it never holds a lock a refresh
# waits for. A container's latest recommendation is never pruned.
RETENTION_RECOMMENDATION_DAYS = env_int(
    "VPAWEB_RETENTION_RECOMMENDATION_DAYS", 90, minimum=1
)
# Recommendation history older than this keeps one row per container and day.
RETENTION_RECOMMENDATION_DETAIL_DAYS = env_int(
    "VPAWEB_RETENTION_RECOMMENDATION_DETAIL_DAYS", 14, minimum=1
)
RETENTION_OOM_KILL_DAYS = env_int("VPAWEB_RETENTION_OOM_KILL_DAYS", 90, minimum=1)
# The hourly usage the workload page's chart draws (8 days of it): older hours go.
RETENTION_USAGE_DAYS = env_int("VPAWEB_RETENTION_USAGE_DAYS", 9, minimum=1)
RETENTION_RUN_DAYS = env_int("VPAWEB_RETENTION_RUN_DAYS", 30, minimum=1)
RETENTION_AUDIT_DAYS = env_int("VPAWEB_RETENTION_AUDIT_DAYS", 400, minimum=1)
RETENTION_ADMISSION_COUNT_DAYS = env_int(
    "VPAWEB_RETENTION_ADMISSION_COUNT_DAYS", 30, minimum=1
)
# Resize changes that are closed (applied, rejected, failed, expired, superseded).
RETENTION_CHANGE_DAYS = env_int("VPAWEB_RETENTION_CHANGE_DAYS", 90, minimum=1)
# Workloads gone from their cluster this long are deleted with their containers,
# policy, checkpoints and history.
RETENTION_INACTIVE_DAYS = env_int("VPAWEB_RETENTION_INACTIVE_DAYS", 30, minimum=1)
# Login logs and failed-login records of django-axes (expired sessions always go).
RETENTION_LOGIN_DAYS = env_int("VPAWEB_RETENTION_LOGIN_DAYS", 90, minimum=1)
RETENTION_BATCH = env_int("VPAWEB_RETENTION_BATCH", 2000, minimum=10)
RETENTION_BUDGET_S = env_float("VPAWEB_RETENTION_BUDGET_S", 30.0, minimum=1.0)

# --- REST API -------------------------------------------------------------------------
# Requests per token (per user for sessions) and period: s/min/hour/day (docs/api.md).
API_RATE = env_str("VPAWEB_API_RATE", "1200/min")
# Largest request body the API reads; a larger one gets a 413 before any parsing.
API_MAX_BODY_BYTES = env_int("VPAWEB_API_MAX_BODY_BYTES", 5 * 2**20, minimum=1024)
# Structure limits of every body, checked while it is scanned (api/bodies.py,
# docs/api.md): YAML documents; values and keys of all documents, aliases expanded;
# nesting; keys of one mapping; characters of one string (1 MiB, a ConfigMap's maximum).
API_MAX_DOCUMENTS = env_int("VPAWEB_API_MAX_DOCUMENTS", 500, minimum=1)
API_MAX_NODES = env_int("VPAWEB_API_MAX_NODES", 100_000, minimum=100)
API_MAX_DEPTH = env_int("VPAWEB_API_MAX_DEPTH", 64, minimum=8)
if API_MAX_DEPTH > 200:
    raise ImproperlyConfigured(
        f"VPAWEB_API_MAX_DEPTH={API_MAX_DEPTH} must be at most 200 (Python's recursion "
        "limit is 1000 and parsers recurse once per level)"
    )
API_MAX_KEYS = env_int("VPAWEB_API_MAX_KEYS", 10_000, minimum=10)
API_MAX_SCALAR_CHARS = env_int("VPAWEB_API_MAX_SCALAR_CHARS", 2**20, minimum=64)
# Containers one rightsize request may size; more is refused before any lookup.
API_MAX_CONTAINERS = env_int("VPAWEB_API_MAX_CONTAINERS", 1000, minimum=1)
# The drift check's default tolerance (POST /api/v1/check, manage.py check-manifests):
# a request is within it when it differs from the recommended one by at most the
# percentage of the recommendation or the floor, whichever is larger.
CHECK_CPU_PERCENT = env_int("VPAWEB_CHECK_CPU_PERCENT", 20, minimum=0)
CHECK_MEMORY_PERCENT = env_int("VPAWEB_CHECK_MEMORY_PERCENT", 20, minimum=0)
CHECK_CPU_FLOOR_MILLICORES = env_int("VPAWEB_CHECK_CPU_FLOOR_MILLICORES", 50, minimum=0)
CHECK_MEMORY_FLOOR_BYTES = env_int(
    "VPAWEB_CHECK_MEMORY_FLOOR_BYTES", 64 * 2**20, minimum=0
)
# An /api/ request still running after this many seconds gets a JSON 503 (0 = no
# deadline); vpaweb/gunicorn_conf.py sets it below gunicorn's worker timeout.
REQUEST_DEADLINE_S = env_float("VPAWEB_REQUEST_DEADLINE_S", 0.0, minimum=0.0)
REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes a missing credential 401, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "recommender.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "recommender.api.schema.ApiAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_PARSER_CLASSES": ["recommender.api.formats.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["recommender.api.auth.ApiRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": API_RATE},
    "EXCEPTION_HANDLER": "recommender.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "recommender.api.schema.close_input_objects",
    ],
    "TITLE": "vpaweb API",
    "DESCRIPTION": (
        "Right-sizing recommendations for Kubernetes containers. Authenticate with "
        "`Authorization: Bearer <token>` (create one with "
        "`manage.py apitoken create`); see docs/api.md."
    ),
    "VERSION": "1.0.0",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Only the login page and health checks answer anonymous users (tests/web).
    # The schema and its docs pages need a role (a token or a viewer), like the API.
    "SERVE_PERMISSIONS": ["recommender.api.auth.CanRead"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Several models have a "kind", "mode", "source" or "status": name each enum once.
    "ENUM_NAME_OVERRIDES": {
        # The export's container_kind (app, sidecar, init), not Container.Kind's names.
        "ExportContainerKindEnum": ["app", "sidecar", "init"],
        # The drift check (api/rightsize_serializers.py).
        "CheckVerdictEnum": ["ok", "drift"],
        "ContainerVerdictEnum": ["ok", "drift", "unchecked"],
        "ClusterKindEnum": "recommender.models.Cluster.Kind",
        "WorkloadKindEnum": "recommender.models.Workload.Kind",
        "ContainerKindEnum": "recommender.models.Container.Kind",
        "RunKindEnum": "recommender.models.RefreshRun.Kind",
        "RunStatusEnum": "recommender.models.RefreshRun.Status",
        "ChangeStatusEnum": "recommender.models.ResizeChange.Status",
        "UpdateModeEnum": "recommender.models.Policy.Mode",
        "PolicySourceEnum": "recommender.models.Policy.Source",
        "ContainerScalingModeEnum": "recommender.engine.capping.MODES",
        # Every field naming a profile (policy, what-if, compare-profiles A and B).
        "ProfileEnum": "recommender.api.schema.PROFILE_NAMES",
        "ResourceNameEnum": ["cpu", "memory"],
        "AdviceSourceEnum": ["recommendation", "static_coefficient", "none"],
        "QueryKindEnum": ["RecommendationQuery"],
        "ProvisioningStatusEnum": "recommender.api.serializers.WORKLOAD_STATUSES",
    },
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs pages load nothing from outside (tests/browser/test_live_pages.py): the
    # assets come from drf-spectacular-sidecar, ReDoc uses system fonts
    # (templates/drf_spectacular/redoc.html) and Swagger UI sends no spec to the online
    # validator.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Own metrics (recommender/metrics.py, docs/metrics.md) ---------------------------
# /metrics asks for this bearer token (or VPAWEB_METRICS_TOKEN_FILE); unset, it is off.
METRICS_TOKEN = env_secret("VPAWEB_METRICS_TOKEN")
# The Celery worker serves its counters on this port (0: not served).
WORKER_METRICS_PORT = env_int("VPAWEB_WORKER_METRICS_PORT", 0, minimum=0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
    },
    "filters": {
        "one_line_client_errors": {"()": "vpaweb.security.OneLineClientErrors"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # 403s and other client errors: one line, no traceback.
        "django.request": {"filters": ["one_line_client_errors"]},
    },
}

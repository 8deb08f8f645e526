#!/bin/sh
# vpaweb's image entry point: the first argument picks what the container runs.
#   web      gunicorn (vpaweb/gunicorn_conf.py): the dashboard, the API, /healthz,
#            /readyz and /metrics
#   worker   a Celery worker (refresh cycles)
#   beat     the Celery beat scheduler (one per deployment)
#   migrate  database migrations, then `manage.py bootstrap --no-refresh` (run once per
#            release, before web/worker/beat; the worker computes the recommendations)
#   manage   any manage.py command:  docker run vpaweb manage createsuperuser
#   anything else runs as given.
set -eu

fresh_metrics_dir() {
    # prometheus-client's multi-process files: one directory per container, emptied at
    # start so counters of a previous run are not added twice.
    if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
        rm -rf "${PROMETHEUS_MULTIPROC_DIR}"
        mkdir -p "${PROMETHEUS_MULTIPROC_DIR}"
    fi
}

# Every process imports the metrics module: the directory must exist.
[ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ] && mkdir -p "${PROMETHEUS_MULTIPROC_DIR}"

command="${1:-web}"
[ $# -gt 0 ] && shift
case "$command" in
    web)
        fresh_metrics_dir
        # vpaweb/gunicorn_conf.py reads GUNICORN_BIND, WEB_CONCURRENCY, GUNICORN_TIMEOUT,
        # GUNICORN_MAX_REQUESTS and gunicorn's own FORWARDED_ALLOW_IPS.
        export GUNICORN_BIND="${GUNICORN_BIND:-0.0.0.0:${PORT:-8000}}"
        exec gunicorn -c vpaweb/gunicorn_conf.py vpaweb.wsgi:application "$@"
        ;;
    worker)
        fresh_metrics_dir
        exec celery -A vpaweb worker --loglevel "${LOG_LEVEL:-INFO}" "$@"
        ;;
    beat)
        exec celery -A vpaweb beat --loglevel "${LOG_LEVEL:-INFO}" \
            --schedule "${VPAWEB_VAR_DIR:-/tmp}/celerybeat-schedule" "$@"
        ;;
    migrate)
        python manage.py migrate --no-input
        exec python manage.py bootstrap --no-refresh "$@"
        ;;
    manage)
        exec python manage.py "$@"
        ;;
    *)
        exec "$command" "$@"
        ;;
esac

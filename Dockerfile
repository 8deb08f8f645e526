# vpaweb's one image: web, worker, beat (and later the admission webhook), chosen by the
# command (deploy/docker/entrypoint.sh). Build:  docker build -t vpaweb .
# The base is pinned and can be swapped:  docker build --build-arg BASE_IMAGE=... .
# Only python3 and its venv module are needed from the base, so a Debian image with
# Debian's python3.11 works as well as the official one.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- build: a virtualenv with the pinned requirements, plotly.js, collected static files
FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/venv
COPY requirements.txt /tmp/requirements.txt
# Every pinned requirement ships a binary wheel: no compiler, here or below.
RUN /opt/venv/bin/pip install --only-binary=:all: -r /tmp/requirements.txt
WORKDIR /app
COPY . /app
# The dashboard's charts use plotly.js' basic bundle, committed in static/vendor/. The
# Python side of plotly (and narwhals, which only plotly needs) is not used at run time:
# it leaves the image (70 MB less).
# ReDoc's bundle is copied from drf-spectacular-sidecar without its one outside address
# (tools/vendor_redoc.py). collectstatic writes hashed names with gzip copies.
RUN /opt/venv/bin/python tools/vendor_redoc.py static/vendor/redoc.standalone.js \
 && /opt/venv/bin/pip uninstall --yes --quiet plotly narwhals \
 && SECRET_KEY=collectstatic-only VPAWEB_STATIC_ROOT=/app/staticfiles VPAWEB_VAR_DIR=/tmp/var \
    /opt/venv/bin/python manage.py collectstatic --no-input --verbosity 0 \
 && /opt/venv/bin/python -m compileall -q /app/recommender /app/vpaweb

# --- final: the virtualenv and the code, a non-root user, nothing to compile with
FROM ${BASE_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VPAWEB_VAR_DIR=/var/lib/vpaweb \
    VPAWEB_STATIC_ROOT=/app/staticfiles \
    PROMETHEUS_MULTIPROC_DIR=/tmp/vpaweb-metrics \
    PORT=8000 \
    WEB_CONCURRENCY=2
RUN groupadd --system --gid 10001 vpaweb \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/vpaweb --no-create-home vpaweb \
 && mkdir -p /var/lib/vpaweb /var/lib/vpaweb-webhook \
 && chown vpaweb:vpaweb /var/lib/vpaweb /var/lib/vpaweb-webhook \
 && chmod 0700 /var/lib/vpaweb-webhook
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
WORKDIR /app
USER 10001:10001
VOLUME ["/var/lib/vpaweb"]
EXPOSE 8000
# /healthz of the web server; the worker and beat override it (docker-compose.yml).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "-m", "vpaweb.healthcheck"]
ENTRYPOINT ["/app/deploy/docker/entrypoint.sh"]
CMD ["web"]

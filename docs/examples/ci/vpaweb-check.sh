#!/bin/sh
# The vpaweb drift check as a CI step, with curl only (7.84 or newer, for %header{}).
#
#   VPAWEB_URL=https://vpaweb.example.com VPAWEB_TOKEN=vpaweb_… \
#     sh vpaweb-check.sh k8s/rendered.yaml
#
# Posts the manifests to /api/v1/check and writes the JUnit XML report to
# $VPAWEB_JUNIT (default vpaweb-check.xml). Exit status: 0 every request is within
# tolerance, 1 drift (the report lists the containers), 2 nothing was checked (an
# unknown workload: a typo in the cluster, namespace or name; recommendations without
# enough history yet) or an error (the answer is printed). $VPAWEB_CHECK_QUERY adds
# query options, e.g.
# "cluster=prod&cpu_percent=25&memory_floor=128Mi".
set -u
manifests=${1:?usage: vpaweb-check.sh MANIFESTS.yaml}
report=${VPAWEB_JUNIT:-vpaweb-check.xml}
status=$(curl -sS -o "$report" -w '%{http_code} %header{vpaweb-exit-code}' \
  -H "Authorization: Bearer $VPAWEB_TOKEN" \
  -H "Content-Type: application/yaml" -H "Accept: application/xml" \
  --data-binary @"$manifests" \
  "$VPAWEB_URL/api/v1/check?${VPAWEB_CHECK_QUERY:-}") || exit 2
case "$status" in
  "200 0")
    echo "vpaweb: every request is within tolerance ($report)"
    exit 0 ;;
  "200 1")
    echo "vpaweb: requests drifted from the recommendations ($report):"
    grep -o '<testcase classname="[^"]*" name="[^"]*">' "$report" | sed 's/<testcase classname="\([^"]*\)" name="\([^"]*\)">/  \1 \2/'
    exit 1 ;;
  "200 2")
    echo "vpaweb: nothing was checked ($report):"
    grep -o '<error message="[^"]*"' "$report" | sed 's/<error message="\([^"]*\)"/  \1/'
    exit 2 ;;
  *)
    echo "vpaweb: the check failed (HTTP status and exit code: $status)"
    cat "$report"
    exit 2 ;;
esac

#!/bin/sh
# As the official redis image's entry point: flags alone mean redis-server, and a
# redis-server started without a config file answers other containers (protected mode off).
set -e
case "$1" in
    -*) set -- redis-server "$@" ;;
esac
if [ "$1" = redis-server ]; then
    shift
    case "${1:-}" in
        *.conf) set -- redis-server "$@" ;;
        *) set -- redis-server --protected-mode no "$@" ;;
    esac
fi
exec "$@"

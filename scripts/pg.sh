#!/usr/bin/env bash
# pg.sh start|stop|status|url: a PostgreSQL 15 server in a data directory of the project's own.
#
# PostgreSQL refuses to run as root, so when we are root the server runs as the postgres user
# (the directory is chowned to it). Idempotent: start on a running server and stop on a stopped
# one do nothing. Settings come from the environment:
#   GAPLESS_RUN_DIR   where the data directory and socket live (default: <repo>/.run)
#   GAPLESS_PG_PORT   TCP port on 127.0.0.1 (default 55432)
# The superuser is "gapless" with trust authentication on loopback only: a local dev/test server.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
run_dir=${GAPLESS_RUN_DIR:-$here/.run}
port=${GAPLESS_PG_PORT:-55432}
data=$run_dir/pg-$port
bin=/usr/lib/postgresql/15/bin

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# As root the server runs as postgres, which must be able to reach the data directory: a checkout
# under /root (mode 700) is out of its reach. Then the data directory goes under postgres's own
# home instead, named after the run directory so that several checkouts do not share one.
if [ "$(id -u)" = 0 ] && [ "${1:-}" != url ]; then
  mkdir -p "$run_dir"
  if ! runuser -u postgres -- test -x "$run_dir" 2>/dev/null; then
    pg_home=$(getent passwd postgres | cut -d: -f6)
    data=$pg_home/gapless/$(printf '%s' "$run_dir" | md5sum | cut -c1-12)-$port
    mkdir -p "$(dirname "$data")"
    chown postgres:postgres "$(dirname "$data")"
  fi
fi

case "${1:-}" in
  start)
    if [ ! -x "$bin/pg_ctl" ]; then
      echo "pg.sh: PostgreSQL 15 is not installed ($bin/pg_ctl missing); run scripts/setup.sh" >&2
      exit 1
    fi
    mkdir -p "$run_dir"
    if [ ! -f "$data/PG_VERSION" ]; then
      mkdir -p "$data"
      if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$data"; fi
      chmod 700 "$data"
      as_pg "$bin/initdb" -D "$data" -U gapless -A trust -E UTF8 --locale=C.UTF-8 >"$run_dir/initdb-$port.log" 2>&1 ||
        { cat "$run_dir/initdb-$port.log" >&2; exit 1; }
    fi
    if as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      exit 0
    fi
    as_pg "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start \
      -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=512MB -c max_wal_size=4GB" >/dev/null ||
      { tail -20 "$data/server.log" >&2; exit 1; }
    ;;
  stop)
    if [ -f "$data/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      as_pg "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    fi
    ;;
  status)
    as_pg "$bin/pg_ctl" -D "$data" status
    ;;
  url)
    echo "postgresql://gapless@127.0.0.1:$port/${2:-postgres}"
    ;;
  *)
    echo "usage: pg.sh start|stop|status|url [dbname]" >&2
    exit 2
    ;;
esac

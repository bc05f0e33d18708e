#!/usr/bin/env bash
# scale_bench.sh: the scaling benchmark of issue 3 (bench/scale_bench.cc): end-to-end tx/s of the
# fleet with 1, 2 and 4 workers next to the single-process Indexer, against a PostgreSQL and a
# redis-server of its own, started here with scripts/pg.sh and scripts/redis.sh and stopped when
# it exits. With --sources rpc,kafka,copy also the Kafka block source of issue 9 (a mock Kafka
# cluster that scale_bench starts itself) and raw COPY of the same rows.
#
# Usage: bench/scale_bench.sh [build-dir] [scale_bench flags...]
#          (default build dir: <repo>/build-scale, with scale_bench built)
#   GAPLESS_RUN_DIR=/tmp/gapless-scale-run  GAPLESS_PG_PORT=55633  GAPLESS_REDIS_PORT=56679
# e.g. bench/scale_bench.sh build-scale --blocks 400 --range 20 --repeat 3
#      bench/scale_bench.sh build-scale --blocks 400 --sources rpc,kafka,copy --repeat 5
#      bench/scale_bench.sh build-scale --blocks 1000 --workers 1,2 --sources none \
#        --events redis,kafka,amqp --repeat 5     (indexing with the event relay on vs off)
# Refuses to run if a Redis already answers on its port (it would not be ours to load and stop).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-scale
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
build=$(cd "$build" && pwd)
bench=$build/bench/scale_bench
export GAPLESS_RUN_DIR=${GAPLESS_RUN_DIR:-/tmp/gapless-scale-run}
export GAPLESS_PG_PORT=${GAPLESS_PG_PORT:-55633}
export GAPLESS_REDIS_PORT=${GAPLESS_REDIS_PORT:-56679}

[ -x "$bench" ] || { echo "scale_bench.sh: $bench missing; ninja -C $build scale_bench" >&2; exit 1; }
if redis-cli -p "$GAPLESS_REDIS_PORT" ping >/dev/null 2>&1; then
  echo "scale_bench.sh: a Redis already answers on port $GAPLESS_REDIS_PORT; not starting ours" >&2
  exit 1
fi
stop() {
  "$here/scripts/redis.sh" stop || true
  "$here/scripts/pg.sh" stop || true
}
trap stop EXIT
"$here/scripts/pg.sh" start
"$here/scripts/redis.sh" start

"$bench" --pg "$("$here/scripts/pg.sh" url)" --redis "$("$here/scripts/redis.sh" url)" "$@"

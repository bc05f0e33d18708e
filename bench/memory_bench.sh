#!/usr/bin/env bash
# memory_bench.sh: the peak resident memory of a gapless process (issue 19 item 5), a process of
# its own, over mainnet-shaped blocks from scale_bench's fixture node (`scale_bench --serve`:
# mainnet block 17000000 re-stamped as every block of the range), into a PostgreSQL of its own
# (started here with scripts/pg.sh, stopped when it exits). Each configuration indexes the same
# blocks into a fresh database; GNU time reports the peak RSS (the kernel's high-water mark of the
# process).
#
# Usage: bench/memory_bench.sh [build-dir] [--source rpc|fleet|kafka] [--blocks 1000] [--config "FLAGS"]...
#          (default build dir: <repo>/build-rel, with gapless and scale_bench built, and
#          gapless-kafka-mock for --source kafka)
#   GAPLESS_RUN_DIR=/tmp/gapless-memory-run  GAPLESS_PG_PORT=55634  GAPLESS_REDIS_PORT=56634
# --source rpc (default): `gapless index --rpc`. Without --config: the defaults, and
#   --range-size 500 --concurrency 16 --batch 50 (the largest flags of the issue).
# --source fleet: `gapless run --rpc` (a leader and RPC workers in one process, a redis-server of its
#   own). Without --config: the defaults, --range-size 500 --workers 16 --batch 50, and both again
#   with --prefetch on (two decoded parts per worker, each half its share of the budget).
# --source kafka: the blocks are first produced (`gapless produce --window 5`) into a 256-partition
#   topic on librdkafka's mock cluster (gapless-kafka-mock, a process of its own, so the stored
#   topic is not counted; the mock keeps only the last ~5 MB of each partition, so a partition
#   holds one window of 5 mainnet-sized blocks, and a worker's range of 50 comes from 10 of them:
#   the scattered case, where windows are held longest), then `gapless run --source kafka` (a leader and Kafka workers in one
#   process, a redis-server of its own) indexes them, each configuration in a consumer group of
#   its own. Without --config: the defaults (4 workers, windows of 50), and --range-size 500
#   --workers 16.
# Each line printed: the flags, peak RSS in MiB, seconds, transactions/s.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-rel
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
build=$(cd "$build" && pwd)
blocks=1000
source=rpc
configs=()
while [ $# -gt 0 ]; do
  case $1 in
    --blocks) blocks=$2; shift 2 ;;
    --source) source=$2; shift 2 ;;
    --config) configs+=("$2"); shift 2 ;;
    *) echo "memory_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $source in
  rpc) [ ${#configs[@]} -gt 0 ] || configs=("" "--range-size 500 --concurrency 16 --batch 50") ;;
  fleet) [ ${#configs[@]} -gt 0 ] || configs=("" "--range-size 500 --workers 16 --batch 50"
    "--prefetch on" "--range-size 500 --workers 16 --batch 50 --prefetch on") ;;
  kafka) [ ${#configs[@]} -gt 0 ] || configs=("" "--range-size 500 --workers 16") ;;
  *) echo "memory_bench.sh: --source rpc, fleet or kafka, not $source" >&2; exit 2 ;;
esac
gapless=$build/src/cli/gapless
serve=$build/bench/scale_bench
mock=$build/src/testing/gapless-kafka-mock
needed=("$gapless" "$serve")
[ "$source" = kafka ] && needed+=("$mock")
for b in "${needed[@]}"; do
  [ -x "$b" ] || { echo "memory_bench.sh: $b missing; ninja -C $build gapless scale_bench gapless-kafka-mock" >&2; exit 1; }
done
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y time >/dev/null
export GAPLESS_RUN_DIR=${GAPLESS_RUN_DIR:-/tmp/gapless-memory-run}
export GAPLESS_PG_PORT=${GAPLESS_PG_PORT:-55634}
export GAPLESS_REDIS_PORT=${GAPLESS_REDIS_PORT:-56634}
mkdir -p "$GAPLESS_RUN_DIR"
first=17000000
last=$((first + blocks - 1))

server_pid=
mock_pid=
stop() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null || true
  "$here/scripts/pg.sh" stop || true
  [ "$source" != rpc ] && "$here/scripts/redis.sh" stop || true
}
trap stop EXIT
"$here/scripts/pg.sh" start >/dev/null
pg=$("$here/scripts/pg.sh" url)
db=${pg%/*}/gapless_memory_bench

"$serve" --serve --blocks "$blocks" --first "$first" >"$GAPLESS_RUN_DIR/serve.out" 2>&1 &
server_pid=$!
for _ in $(seq 1 600); do
  grep -q '^serving ' "$GAPLESS_RUN_DIR/serve.out" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$GAPLESS_RUN_DIR/serve.out" >&2; exit 1; }
  sleep 0.5
done
rpc=$(awk '/^serving /{print $2; exit}' "$GAPLESS_RUN_DIR/serve.out")
[ -n "$rpc" ] || { echo "memory_bench.sh: the fixture node did not start" >&2; exit 1; }
txs_per_block=$(sed -n 's/.*(\([0-9]*\) txs each.*/\1/p' "$GAPLESS_RUN_DIR/serve.out")
echo "memory_bench: blocks $first..$last from $(head -1 "$GAPLESS_RUN_DIR/serve.out" | cut -d' ' -f3-)"

if [ "$source" != rpc ]; then
  "$here/scripts/redis.sh" start >/dev/null
  redis=redis://127.0.0.1:$GAPLESS_REDIS_PORT/0
fi
if [ "$source" = kafka ]; then
  # The mock cluster reads commands on its stdin and exits at its end: a fifo held open here.
  rm -f "$GAPLESS_RUN_DIR/mock.in"
  mkfifo "$GAPLESS_RUN_DIR/mock.in"
  "$mock" 1 <"$GAPLESS_RUN_DIR/mock.in" >"$GAPLESS_RUN_DIR/mock.out" 2>&1 &
  mock_pid=$!
  exec 7>"$GAPLESS_RUN_DIR/mock.in"
  for _ in $(seq 1 100); do
    [ -s "$GAPLESS_RUN_DIR/mock.out" ] && break
    sleep 0.1
  done
  brokers=$(head -1 "$GAPLESS_RUN_DIR/mock.out")
  echo "create blocks 256 1" >&7
  "$gapless" produce --rpc "$rpc" --brokers "$brokers" --topic blocks --from "$first" \
    --to "$last" --window 5 --log-level warn >"$GAPLESS_RUN_DIR/produce.log" 2>&1 || {
    echo "memory_bench.sh: gapless produce failed:" >&2
    tail -20 "$GAPLESS_RUN_DIR/produce.log" >&2
    exit 1
  }
  echo "memory_bench: produced to topic blocks (256 partitions, windows of 5) on $brokers"
fi
printf '%-60s %12s %9s %10s\n' "flags" "peak MiB" "seconds" "tx/s"
for config in "${configs[@]}"; do
  psql "$pg" -qc "DROP DATABASE IF EXISTS gapless_memory_bench WITH (FORCE)" >/dev/null
  psql "$pg" -qc "CREATE DATABASE gapless_memory_bench" >/dev/null
  if [ "$source" = rpc ]; then
    cmd=("$gapless" index --rpc "$rpc")
  elif [ "$source" = fleet ]; then
    redis-cli -p "$GAPLESS_REDIS_PORT" FLUSHALL >/dev/null
    cmd=("$gapless" run --rpc "$rpc" --redis "$redis" --progress off)
  else
    redis-cli -p "$GAPLESS_REDIS_PORT" FLUSHALL >/dev/null
    group=memory-bench-$RANDOM$RANDOM  # from the topic's beginning
    cmd=("$gapless" run --source kafka --rpc "$rpc" --brokers "$brokers" --topic blocks
      --group "$group" --redis "$redis" --progress off)
  fi
  # shellcheck disable=SC2086 # the configuration's flags are words
  /usr/bin/time -f '%M %e' -o "$GAPLESS_RUN_DIR/time.out" "${cmd[@]}" \
    --db "$db" --from "$first" --to "$last" --token-metadata off $config \
    >"$GAPLESS_RUN_DIR/index.log" 2>&1 || {
    echo "memory_bench.sh: gapless ${cmd[1]} $config failed:" >&2
    tail -20 "$GAPLESS_RUN_DIR/index.log" >&2
    exit 1
  }
  read -r kib seconds <"$GAPLESS_RUN_DIR/time.out"
  awk -v c="${config:-(defaults)}" -v k="$kib" -v s="$seconds" -v t=$((blocks * txs_per_block)) \
    'BEGIN { printf "%-60s %12.1f %9.2f %10.0f\n", c, k / 1024, s, t / s }'
done

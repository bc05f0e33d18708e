#!/usr/bin/env bash
# memory_bench.sh: the peak resident memory of `gapless index` (issue 19 item 5), a process of its
# own, over mainnet-shaped blocks from scale_bench's fixture node (`scale_bench --serve`: mainnet
# block 17000000 re-stamped as every block of the range), into a PostgreSQL of its own (started
# here with scripts/pg.sh, stopped when it exits). Each configuration indexes the same blocks into
# a fresh database; GNU time reports the peak RSS (the kernel's high-water mark of the process).
#
# Usage: bench/memory_bench.sh [build-dir] [--blocks 1000] [--config "FLAGS"]...
#          (default build dir: <repo>/build-rel, with gapless and scale_bench built)
#   GAPLESS_RUN_DIR=/tmp/gapless-memory-run  GAPLESS_PG_PORT=55634
# Without --config: the defaults, and --range-size 500 --concurrency 16 --batch 50 (the largest
# flags of the issue). Each line printed: the flags, peak RSS in MiB, seconds, transactions/s.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-rel
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
build=$(cd "$build" && pwd)
blocks=1000
configs=()
while [ $# -gt 0 ]; do
  case $1 in
    --blocks) blocks=$2; shift 2 ;;
    --config) configs+=("$2"); shift 2 ;;
    *) echo "memory_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ ${#configs[@]} -gt 0 ] || configs=("" "--range-size 500 --concurrency 16 --batch 50")
gapless=$build/src/cli/gapless
serve=$build/bench/scale_bench
for b in "$gapless" "$serve"; do
  [ -x "$b" ] || { echo "memory_bench.sh: $b missing; ninja -C $build gapless scale_bench" >&2; exit 1; }
done
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y time >/dev/null
export GAPLESS_RUN_DIR=${GAPLESS_RUN_DIR:-/tmp/gapless-memory-run}
export GAPLESS_PG_PORT=${GAPLESS_PG_PORT:-55634}
mkdir -p "$GAPLESS_RUN_DIR"
first=17000000
last=$((first + blocks - 1))

server_pid=
stop() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  "$here/scripts/pg.sh" stop || true
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
printf '%-60s %12s %9s %10s\n' "flags" "peak MiB" "seconds" "tx/s"
for config in "${configs[@]}"; do
  psql "$pg" -qc "DROP DATABASE IF EXISTS gapless_memory_bench WITH (FORCE)" >/dev/null
  psql "$pg" -qc "CREATE DATABASE gapless_memory_bench" >/dev/null
  # shellcheck disable=SC2086 # the configuration's flags are words
  /usr/bin/time -f '%M %e' -o "$GAPLESS_RUN_DIR/time.out" "$gapless" index --rpc "$rpc" \
    --db "$db" --from "$first" --to "$last" --token-metadata off $config \
    >"$GAPLESS_RUN_DIR/index.log" 2>&1 || {
    echo "memory_bench.sh: gapless index $config failed:" >&2
    tail -20 "$GAPLESS_RUN_DIR/index.log" >&2
    exit 1
  }
  read -r kib seconds <"$GAPLESS_RUN_DIR/time.out"
  awk -v c="${config:-(defaults)}" -v k="$kib" -v s="$seconds" -v t=$((blocks * txs_per_block)) \
    'BEGIN { printf "%-60s %12.1f %9.2f %10.0f\n", c, k / 1024, s, t / s }'
done

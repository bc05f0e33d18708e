#!/usr/bin/env bash
# traces_bench.sh: indexing with --traces on against off (issue 18), same run, same chain: the
# devnet traffic (devnet/traffic.js: token transfers, forwarders, a CREATE/CREATE2 factory,
# self-destructs, reverted inner calls) on an anvil, a PostgreSQL of its own; `gapless index` of
# the whole chain into a fresh database, off and on alternately, --repeat times each. Reports the
# median seconds and tx/s of each and the ratio on/off, and the rows --traces adds.
#
# Usage: bench/traces_bench.sh [build-dir] [--blocks N] [--repeat R] [--concurrency C]
#          (default build dir: <repo>/build-rel, with src/cli/gapless built)
#   GAPLESS_RUN_DIR=/tmp/gapless-traces-run  GAPLESS_PG_PORT=55733  GAPLESS_ANVIL_PORT=48645
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-rel
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
blocks=300
repeat=3
concurrency=4
while [ $# -gt 0 ]; do
  case "$1" in
    --blocks) blocks=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    *) echo "traces_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
gapless=$build/src/cli/gapless
[ -x "$gapless" ] || { echo "traces_bench.sh: $gapless missing; ninja -C $build gapless" >&2; exit 1; }
export GAPLESS_RUN_DIR=${GAPLESS_RUN_DIR:-/tmp/gapless-traces-run}
export GAPLESS_PG_PORT=${GAPLESS_PG_PORT:-55733}
export GAPLESS_ANVIL_PORT=${GAPLESS_ANVIL_PORT:-48645}
rpc=http://127.0.0.1:$GAPLESS_ANVIL_PORT

stop() {
  "$here/scripts/anvil.sh" stop || true
  "$here/scripts/pg.sh" stop || true
}
trap stop EXIT
"$here/scripts/pg.sh" start
"$here/scripts/anvil.sh" start
node "$here/devnet/traffic.js" --rpc "$rpc" --blocks "$blocks" --seed 1 --no-blobs \
  --out "$GAPLESS_RUN_DIR/traces-bench-manifest.json" >/dev/null
head=$(curl -s -X POST -H 'Content-Type: application/json' \
  --data '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "$rpc" |
  sed -E 's/.*"result":"(0x[0-9a-f]+)".*/\1/')
head=$((head))
pg=$("$here/scripts/pg.sh" url)
admin=${pg%/*}/postgres

# One run into a fresh database: prints "seconds transactions traces".
run() {
  local db=traces_bench_$1
  psql -q "$admin" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  local url=${pg%/*}/$db
  local start end
  start=$(date +%s.%N)
  "$gapless" index --rpc "$rpc" --db "$url" --from 0 --to "$head" --concurrency "$concurrency" \
    --progress off --log-level warn $2 >/dev/null
  end=$(date +%s.%N)
  local txs traces
  txs=$(psql -tA "$url" -c "SELECT count(*) FROM transactions")
  traces=$(psql -tA "$url" -c "SELECT count(*) FROM traces")
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }') $txs $traces"
}

off=() on=()
for i in $(seq 1 "$repeat"); do
  read -r s txs _ < <(run off "")
  off+=("$s")
  read -r s txs traces < <(run on --traces)
  on+=("$s")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m_off=$(median "${off[@]}")
m_on=$(median "${on[@]}")
printf 'chain: blocks 0..%s, %s transactions, %s traces (--traces)\n' "$head" "$txs" "$traces"
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }
printf 'traces off: %.2f s median of %s (%.0f tx/s)  [%s]\n' "$m_off" "$repeat" \
  "$(div "$txs" "$m_off")" "${off[*]}"
printf 'traces on:  %.2f s median of %s (%.0f tx/s)  [%s]\n' "$m_on" "$repeat" \
  "$(div "$txs" "$m_on")" "${on[*]}"
printf 'ratio on/off (throughput): %.2fx\n' "$(div "$m_off" "$m_on")"

#!/usr/bin/env bash
# factory_bench.sh: the contracts mode's factories (issue 36) against the same events without a
# factory, same run, same chain: an anvil where devnet/events.js made --pools children of a
# factory (one per block), each emitting --rounds rounds of events, and a PostgreSQL of its own.
# Two configs decode the same pools' events: `factory` names them through the factory (children
# found from its PoolCreated events, each from its creation block), `addresses` lists the same
# addresses outright (the baseline: no child to find). The contract of anonymous events is left
# out of both (events mode with a factory asks by topic 0, which an anonymous event lacks).
# Measures, --repeat times each, alternating, `gapless index` of the whole chain into a fresh
# database, start to exit:
#   full/factory, full/addresses     --data full (every block, receipt and log)
#   events/factory, events/addresses --data events (eth_getLogs; with the factory every address
#                                    asked by topic 0)
# Reports the medians, the rows of zoo.pools_swap (equal, or the run is wrong) and the ratios
# factory / addresses.
#
# Usage: bench/factory_bench.sh [build-dir] [--pools N] [--rounds N] [--repeat R]
#          (default build dir: <repo>/build-release, with src/cli/gapless built)
#   GAPLESS_RUN_DIR=/tmp/gapless-factory-run  GAPLESS_PG_PORT=55834  GAPLESS_ANVIL_PORT=48746
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-release
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
pools=1000
rounds=2
repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --pools) pools=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "factory_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
gapless=$build/src/cli/gapless
[ -x "$gapless" ] || { echo "factory_bench.sh: $gapless missing; ninja -C $build gapless" >&2; exit 1; }
export GAPLESS_RUN_DIR=${GAPLESS_RUN_DIR:-/tmp/gapless-factory-run}
export GAPLESS_PG_PORT=${GAPLESS_PG_PORT:-55834}
export GAPLESS_ANVIL_PORT=${GAPLESS_ANVIL_PORT:-48746}
rpc=http://127.0.0.1:$GAPLESS_ANVIL_PORT
dir=$GAPLESS_RUN_DIR/factory-bench
rm -rf "$dir"
mkdir -p "$dir"

stop() {
  "$here/scripts/anvil.sh" stop || true
  "$here/scripts/pg.sh" stop || true
}
trap stop EXIT
"$here/scripts/pg.sh" start >/dev/null
# Blocks of up to 100M gas: a round over 1,000 pools fits in few blocks.
GAPLESS_ANVIL_ARGS="--gas-limit 100000000" "$here/scripts/anvil.sh" start >/dev/null
node "$here/devnet/events.js" --rpc "$rpc" --dir "$dir" --rounds "$rounds" --pools "$pools" \
  >"$dir/events.log"
last=$(node -e 'console.log(require(process.argv[1]).last)' "$dir/manifest.json")
# Both configs without the contract of anonymous events (from "- name: events" to "- name: pools").
for c in contracts contracts-by-address; do
  awk '/^  - name: events$/ {skip = 1} /^  - name: pools$/ {skip = 0} !skip' "$dir/$c.yaml" \
    >"$dir/$c-named.yaml"
done
factory=$dir/contracts-named.yaml
addresses=$dir/contracts-by-address-named.yaml

pg=$("$here/scripts/pg.sh" url)
admin=${pg%/*}/postgres
fresh() {
  psql -q "$admin" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $1" \
    -c "CREATE DATABASE $1" >/dev/null
  echo "${pg%/*}/$1"
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# One `gapless index` into a fresh database $1: prints its seconds.
index() {
  local db=$1 url start end
  shift
  url=$(fresh "$db")
  start=$(date +%s.%N)
  "$gapless" index --rpc "$rpc" --db "$url" --from 0 --to "$last" --progress off \
    --log-level warn "$@" >/dev/null
  end=$(date +%s.%N)
  secs "$start" "$end"
}
rows() { psql -tA "${pg%/*}/$1" -c "SELECT count(*) FROM zoo.pools_swap"; }

full_f=() full_a=() ev_f=() ev_a=()
for i in $(seq 1 "$repeat"); do
  full_f+=("$(index factory_bench_full_f --contracts "$factory")")
  full_a+=("$(index factory_bench_full_a --contracts "$addresses")")
  ev_f+=("$(index factory_bench_ev_f --data events --contracts "$factory")")
  ev_a+=("$(index factory_bench_ev_a --data events --contracts "$addresses")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
children=$(psql -tA "${pg%/*}/factory_bench_full_f" -c "SELECT count(*) FROM zoo.children")
printf 'chain: blocks 0..%s, %s pools made by the factory, %s rounds of events\n' \
  "$last" "$pools" "$rounds"
printf 'children found (full/factory): %s\n' "$children"
median_of() { local -n runs=$1; median "${runs[@]}"; }
list_of() { local -n runs=$1; echo "${runs[*]}"; }
for mode in full ev; do
  mf=$(median_of "${mode}_f") ma=$(median_of "${mode}_a")
  rf=$(rows "factory_bench_${mode}_f") ra=$(rows "factory_bench_${mode}_a")
  printf '%-6s factory: %.2f s (%s pools_swap rows)  [%s]\n' "$mode" "$mf" "$rf" \
    "$(list_of "${mode}_f")"
  printf '%-6s addresses: %.2f s (%s pools_swap rows)  [%s]\n' "$mode" "$ma" "$ra" \
    "$(list_of "${mode}_a")"
  printf '%-6s factory / addresses (time): %sx%s\n' "$mode" "$(ratio "$mf" "$ma")" \
    "$([ "$rf" = "$ra" ] && echo "" || echo "  ROWS DIFFER")"
done

#!/usr/bin/env bash
# contracts_bench.sh: the contracts mode (issue 36) against its floor, same run, same chain: an
# anvil holding the peer comparison chain (bench/contracts_chain.js: --blocks blocks of one
# transferMany each, --per-block ERC-20 Transfer logs a block), a PostgreSQL of its own. Measures,
# --repeat times each, alternating:
#   events  `gapless index --data events --contracts transfers.yaml` (a Transfer-only config) of
#           the whole chain into a fresh database, start to exit
#   floor   what no indexer can avoid: a minimal client fetching the same logs and their blocks'
#           headers from the same node (bench/getlogs_floor.js: the whole range in one
#           eth_getLogs, headers in batches of 100), plus raw COPY of the rows `events` stored
#           (blocks, logs, the decoded table) into the same tables of a fresh database
#   full    `gapless index` (every block, transaction, receipt and log) with the config and
#           without it: what decoding costs in full mode
# Reports the medians and the ratios: floor/events (throughput relative to the floor; the target
# is >= 0.8) and full with/without decoding.
#
# Usage: bench/contracts_bench.sh [build-dir] [--blocks N] [--per-block N] [--repeat R]
#          (default build dir: <repo>/build-release, with src/cli/gapless built)
#   GAPLESS_RUN_DIR=/tmp/gapless-contracts-run  GAPLESS_PG_PORT=55833  GAPLESS_ANVIL_PORT=48745
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-release
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
blocks=2000
per_block=50
repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --blocks) blocks=$2; shift 2 ;;
    --per-block) per_block=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "contracts_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
gapless=$build/src/cli/gapless
[ -x "$gapless" ] || { echo "contracts_bench.sh: $gapless missing; ninja -C $build gapless" >&2; exit 1; }
export GAPLESS_RUN_DIR=${GAPLESS_RUN_DIR:-/tmp/gapless-contracts-run}
export GAPLESS_PG_PORT=${GAPLESS_PG_PORT:-55833}
export GAPLESS_ANVIL_PORT=${GAPLESS_ANVIL_PORT:-48745}
rpc=http://127.0.0.1:$GAPLESS_ANVIL_PORT
dir=$GAPLESS_RUN_DIR/contracts-bench
rm -rf "$dir"
mkdir -p "$dir"

stop() {
  "$here/scripts/anvil.sh" stop || true
  "$here/scripts/pg.sh" stop || true
}
trap stop EXIT
"$here/scripts/pg.sh" start >/dev/null
"$here/scripts/anvil.sh" start >/dev/null
node "$here/bench/contracts_chain.js" --rpc "$rpc" --dir "$dir" --blocks "$blocks" \
  --per-block "$per_block"
read -r token first last transfers < <(node -e '
  const m = require(process.argv[1]);
  console.log(m.token, m.first, m.last, m.transfers);' "$dir/manifest.json")
pg=$("$here/scripts/pg.sh" url)
admin=${pg%/*}/postgres
fresh() {
  psql -q "$admin" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
  echo "${pg%/*}/$1"
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# One `gapless index` into a fresh database: prints its seconds.
index() {
  local url
  url=$(fresh "$1")
  shift
  local start end
  start=$(date +%s.%N)
  "$gapless" index --rpc "$rpc" --db "$url" --from 0 --to "$last" --progress off \
    --log-level warn "$@" >/dev/null
  end=$(date +%s.%N)
  secs "$start" "$end"
}

# The raw COPY half of the floor: the rows of database $1 (blocks, logs, bench.token_transfer)
# copied into the same tables of a fresh database made from its schema. Prints its seconds.
raw_copy() {
  local src=${pg%/*}/$1
  local dst
  dst=$(fresh contracts_bench_copy)
  pg_dump --schema-only "$src" | psql -q "$dst" >/dev/null
  for t in blocks logs bench.token_transfer; do
    psql -q "$src" -c "\\copy (SELECT * FROM $t) TO '$dir/$t.copy'"
  done
  local start end
  start=$(date +%s.%N)
  psql -q "$dst" -c "\\copy blocks FROM '$dir/blocks.copy'" \
    -c "\\copy logs FROM '$dir/logs.copy'" \
    -c "\\copy bench.token_transfer FROM '$dir/bench.token_transfer.copy'"
  end=$(date +%s.%N)
  secs "$start" "$end"
}

ev=() floor=() full_on=() full_off=()
for i in $(seq 1 "$repeat"); do
  ev+=("$(index contracts_bench_events --data events --contracts "$dir/transfers.yaml")")
  read -r fetch logs headers < <(node "$here/bench/getlogs_floor.js" --rpc "$rpc" \
    --address "$token" --from 0 --to "$last")
  copy=$(raw_copy contracts_bench_events)
  floor+=("$(awk -v a="$fetch" -v b="$copy" 'BEGIN { printf "%.3f", a + b }')")
  full_on+=("$(index contracts_bench_full_on --contracts "$dir/transfers.yaml")")
  full_off+=("$(index contracts_bench_full_off)")
done
events_url=${pg%/*}/contracts_bench_events
rows=$(psql -tA "$events_url" -c "SELECT count(*) FROM bench.token_transfer")
stored=$(psql -tA "$events_url" -c "SELECT count(*) FROM blocks")
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
m_ev=$(median "${ev[@]}")
m_floor=$(median "${floor[@]}")
m_on=$(median "${full_on[@]}")
m_off=$(median "${full_off[@]}")
printf 'chain: blocks 0..%s, %s transfers of one token (%s logs, %s headers fetched by the floor)\n' \
  "$last" "$transfers" "$logs" "$headers"
printf 'events mode: %.2f s median of %s (%.0f transfers/s; %s decoded rows, %s blocks stored)  [%s]\n' \
  "$m_ev" "$repeat" "$(div "$rows" "$m_ev")" "$rows" "$stored" "${ev[*]}"
printf 'floor (fetch + raw COPY): %.2f s median  [%s]\n' "$m_floor" "${floor[*]}"
printf 'events mode / floor (throughput): %.2fx (target >= 0.8)\n' "$(div "$m_floor" "$m_ev")"
printf 'full mode, decoding on: %.2f s  [%s]\n' "$m_on" "${full_on[*]}"
printf 'full mode, decoding off: %.2f s  [%s]\n' "$m_off" "${full_off[*]}"
printf 'decoding cost in full mode: %+.1f%% (target < 10%%)\n' \
  "$(awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "%.1f", (a / b - 1) * 100 }')"
printf 'events mode against full mode without decoding: %.1fx faster\n' "$(div "$m_off" "$m_ev")"

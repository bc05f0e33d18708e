#!/usr/bin/env bash
# coord_bench.sh: the coordination benchmark of issue 3: gapless's no-op tasks per second
# (bench/coord_bench) in three queue designs — one-trip (CompleteAndClaim: one round trip per
# task), batched (CompleteAndClaimBatch: one round trip per BATCH tasks, issue 35) and two-trips
# (Claim then Complete, the earlier design) — next to BullMQ processing no-op jobs
# (bench/bullmq/noop.js), on one redis-server of its own, with the same job count and concurrency,
# interleaved in one run.
#
# Usage: bench/coord_bench.sh [build-dir]     (default: <repo>/build-bench, with coord_bench built)
#   TASKS=20000  REPEAT=3  CONCURRENCY="1 4 8 16"  BATCH=8  GAPLESS_REDIS_PORT=56390
# Starts redis-server with scripts/redis.sh (run dir <build>/bench-run), installs bench/bullmq's
# node_modules with `npm ci` if missing, and stops the server it started when it exits. Prints one
# line per run as it goes, then a table of medians: jobs/s of the four, the ratios to BullMQ, and
# the one-trip p50/p99 per-task latency.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build-bench}" && pwd)
bench=$build/bench/coord_bench
tasks=${TASKS:-20000}
repeat=${REPEAT:-3}
concurrency=${CONCURRENCY:-1 4 8 16}
batch=${BATCH:-8}
export GAPLESS_REDIS_PORT=${GAPLESS_REDIS_PORT:-56390}
export GAPLESS_RUN_DIR=$build/bench-run
url=redis://127.0.0.1:$GAPLESS_REDIS_PORT

[ -x "$bench" ] || { echo "coord_bench.sh: $bench missing; ninja -C $build coord_bench" >&2; exit 1; }
if [ ! -d "$here/bench/bullmq/node_modules/bullmq" ]; then
  npm ci --prefix "$here/bench/bullmq" --no-audit --no-fund >&2
fi
if redis-cli -p "$GAPLESS_REDIS_PORT" ping >/dev/null 2>&1; then
  echo "coord_bench.sh: a Redis already answers on port $GAPLESS_REDIS_PORT; not starting ours" >&2
  exit 1
fi
"$here/scripts/redis.sh" start
trap '"$here/scripts/redis.sh" stop' EXIT

field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }  # one numeric field of a JSON line
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {
  if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }

echo "coord_bench.sh: $tasks tasks, concurrency {$concurrency}, batch $batch, $repeat repetitions, $url"
echo "redis: $(redis-server --version | cut -d' ' -f3), node $(node --version)," \
  "bullmq $(node -p "require('$here/bench/bullmq/node_modules/bullmq/package.json').version")"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
declare -A one bat two bull p50 p99
runners=(one-trip batched two-trips bullmq)
for c in $concurrency; do
  for rep in $(seq 1 "$repeat"); do
    # Rotate the order per repetition, so that none of the four always runs first (on the
    # warmer, or the busier, server).
    for i in 0 1 2 3; do
      who=${runners[$(((rep - 1 + i) % 4))]}
      case $who in
        one-trip)
          line=$("$bench" --redis "$url" --tasks "$tasks" --concurrency "$c" --mode one-trip)
          one[$c]+="$(field jobs_per_s <<<"$line") "
          p50[$c]+="$(field p50_us <<<"$line") "
          p99[$c]+="$(field p99_us <<<"$line") "
          ;;
        batched)
          line=$("$bench" --redis "$url" --tasks "$tasks" --concurrency "$c" --mode one-trip \
            --batch "$batch")
          bat[$c]+="$(field jobs_per_s <<<"$line") "
          ;;
        two-trips)
          line=$("$bench" --redis "$url" --tasks "$tasks" --concurrency "$c" --mode two-trips)
          two[$c]+="$(field jobs_per_s <<<"$line") "
          ;;
        bullmq)
          line=$(node "$here/bench/bullmq/noop.js" --redis "$url" --jobs "$tasks" \
            --concurrency "$c")
          bull[$c]+="$(field jobs_per_s <<<"$line") "
          ;;
      esac
      echo "c=$c rep=$rep $who $line  [$(uptime | sed 's/.*load average: //')]"
    done
  done
done
echo "load after: $(uptime | sed 's/.*load average/load average/')"
echo
printf '%-4s %9s %9s %9s %9s %8s %8s %8s %7s %7s   %s\n' conc "one-trip" "batch$batch" \
  "two-trips" "bullmq/s" "1trip/bq" "batch/bq" "2trip/bq" "p50 us" "p99 us" \
  "all runs (one-trip | batched | two-trips | bullmq jobs/s)"
for c in $concurrency; do
  o=$(median <<<"${one[$c]}")
  a=$(median <<<"${bat[$c]}")
  t=$(median <<<"${two[$c]}")
  b=$(median <<<"${bull[$c]}")
  printf '%-4s %9.0f %9.0f %9.0f %9.0f %7.2fx %7.2fx %7.2fx %7.0f %7.0f   %s| %s| %s| %s\n' "$c" \
    "$o" "$a" "$t" "$b" "$(ratio "$o" "$b")" "$(ratio "$a" "$b")" "$(ratio "$t" "$b")" \
    "$(median <<<"${p50[$c]}")" "$(median <<<"${p99[$c]}")" "$(printf '%.0f ' ${one[$c]})" \
    "$(printf '%.0f ' ${bat[$c]})" "$(printf '%.0f ' ${two[$c]})" "$(printf '%.0f ' ${bull[$c]})"
done

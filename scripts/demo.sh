#!/usr/bin/env bash
# demo.sh: command 1 of the README. Installs what is missing, builds gapless (Release), starts a
# local PostgreSQL 15 (.run/, port 55432), a redis-server (port 56380) and an anvil devnet (port
# 8545), sends a few hundred
# blocks of real traffic (ETH transfers, contract deployments, ERC-20/721/1155 transfers, every
# transaction type, reverts), indexes it with `gapless run --workers 4 --events redis://...`
# (workers coordinated through Redis, events published to Redis Streams) with a live progress
# display while `gapless events tail` and `gapless consume balances` receive the events and the
# run's /metrics is scraped (--metrics-addr), verifies it and prints a summary; then the contracts
# mode: devnet/events.js's contracts indexed with --contracts, a few decoded rows printed. The
# servers keep running so you can explore; `scripts/demo.sh stop` stops them.
# Environment: GAPLESS_DEMO_BLOCKS (default 400) blocks of traffic.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export GAPLESS_RUN_DIR=${GAPLESS_RUN_DIR:-$here/.run}
export GAPLESS_PG_PORT=${GAPLESS_PG_PORT:-55432}
export GAPLESS_ANVIL_PORT=${GAPLESS_ANVIL_PORT:-8545}
export GAPLESS_REDIS_PORT=${GAPLESS_REDIS_PORT:-56380}
export GAPLESS_ANVIL_SLOTS=${GAPLESS_ANVIL_SLOTS:-2}
build=$here/build-release
db_name=gapless_demo
rpc=http://127.0.0.1:$GAPLESS_ANVIL_PORT

if [ "${1:-}" = stop ]; then
  scripts/anvil.sh stop
  scripts/redis.sh stop
  scripts/pg.sh stop
  echo "demo servers stopped"
  exit 0
fi

scripts/setup.sh
echo "== build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "${GAPLESS_JOBS:-2}" --target gapless
gapless=$build/src/cli/gapless

echo "== servers"
scripts/pg.sh start
db=$(scripts/pg.sh url "$db_name")
psql -q "$(scripts/pg.sh url postgres)" -tc "SELECT 1 FROM pg_database WHERE datname = '$db_name'" |
  grep -q 1 || psql -q "$(scripts/pg.sh url postgres)" -c "CREATE DATABASE $db_name"
# A fresh devnet each time: anvil keeps its chain in memory, and the database must hold one chain.
scripts/anvil.sh stop
scripts/anvil.sh start
scripts/redis.sh start
redis=$(scripts/redis.sh url)
redis-cli -p "$GAPLESS_REDIS_PORT" FLUSHALL >/dev/null  # the coordination state of a previous devnet
psql -q "$db" -c "DROP SCHEMA public CASCADE; CREATE SCHEMA public;" 2>/dev/null
echo "   PostgreSQL: $db"
echo "   anvil:      $rpc"
echo "   Redis:      $redis"

echo "== devnet traffic"
node devnet/traffic.js --rpc "$rpc" --blocks "${GAPLESS_DEMO_BLOCKS:-400}" --seed 1 \
  --out "$GAPLESS_RUN_DIR/devnet-manifest.json"

chain_id=$(jq -r .chainId "$GAPLESS_RUN_DIR/devnet-manifest.json")
events_log="$GAPLESS_RUN_DIR/events.jsonl"
echo "== gapless events tail and gapless consume balances, in the background"
# Both subscribe before the run publishes anything: tail prints every envelope as a JSON line,
# the balances consumer keeps token_balances in the same database from token.transfer events.
"$gapless" events tail --bus "$redis" --chain-id "$chain_id" --log-level warn >"$events_log" &
tail_pid=$!
"$gapless" consume balances --bus "$redis" --db "$db" --redis "$redis" --chain-id "$chain_id" \
  --group demo-balances --log-level warn --metrics-addr 127.0.0.1:59465 &
balances_pid=$!
trap 'kill "$tail_pid" "$balances_pid" 2>/dev/null || true' EXIT
sleep 1

echo "== gapless run --workers 4 --from 0 --to latest --events $redis --metrics-addr 127.0.0.1:59464"
echo "   the live status page while it runs: http://127.0.0.1:59464/  (/metrics, /readyz there too)"
# Its /metrics is scraped every half second while it runs, as Prometheus would.
metrics="$GAPLESS_RUN_DIR/metrics.txt"
rm -f "$metrics"
"$gapless" run --rpc "$rpc" --db "$db" --redis "$redis" --from 0 --to latest --range-size 20 \
  --workers 4 --events "$redis" --metrics-addr 127.0.0.1:59464 &
run_pid=$!
while kill -0 "$run_pid" 2>/dev/null; do
  curl -sf http://127.0.0.1:59464/metrics >"$metrics.new" 2>/dev/null && mv "$metrics.new" "$metrics"
  sleep 0.5
done
wait "$run_pid"

echo "== the run's last /metrics scrape (http://127.0.0.1:59464/metrics while it ran), a few lines"
grep -E '^gapless_(blocks|transactions|logs|token_transfers)_indexed_total|^gapless_ranges_committed_total|^gapless_rpc_requests_total|^gapless_leader |^gapless_frontier_next_block|^gapless_events_published_total|^gapless_range_write_seconds_(count|sum)' \
  "$metrics" || echo "(no scrape: the run ended before the first one)"

echo "== events received by gapless events tail"
transfers=$(psql -qtA "$db" -c "SELECT count(*) FROM token_transfers")
for _ in $(seq 1 60); do
  applied=$(psql -qtA "$db" -c "SELECT count(*) FROM applied_events" 2>/dev/null || echo 0)
  [ "$applied" = "$transfers" ] && break
  sleep 0.5
done
echo "== the balances consumer's /metrics and /readyz (http://127.0.0.1:59465/)"
curl -sf http://127.0.0.1:59465/metrics | grep -E '^gapless_consumer_events_total' || true
curl -s http://127.0.0.1:59465/readyz || true
kill "$tail_pid" "$balances_pid" 2>/dev/null || true
wait "$tail_pid" "$balances_pid" 2>/dev/null || true
trap - EXIT
jq -r .event_type "$events_log" | sort | uniq -c
echo "the first three (of $(wc -l <"$events_log")), cut to 200 characters:"
head -3 "$events_log" | cut -c1-200

echo "== token_balances (gapless consume balances) against the SQL aggregate of token_transfers"
psql -q "$db" <<'SQL'
WITH moves AS (
  SELECT to_address AS holder, token_address AS token, COALESCE(token_id, -1) AS token_id,
         value AS delta FROM token_transfers
   WHERE to_address <> '\x0000000000000000000000000000000000000000'
  UNION ALL
  SELECT from_address, token_address, COALESCE(token_id, -1), -value FROM token_transfers
   WHERE from_address <> '\x0000000000000000000000000000000000000000'
), expected AS (SELECT holder, token, token_id, sum(delta) AS balance FROM moves GROUP BY 1, 2, 3)
SELECT (SELECT count(*) FROM token_balances) AS balances,
       (SELECT count(*) FROM applied_events) AS transfers_applied,
       (SELECT count(*) FROM (SELECT * FROM expected EXCEPT SELECT holder, token, token_id, balance
                                FROM token_balances) d) AS differences;
SQL

echo "== gapless status"
"$gapless" status --db "$db" --redis "$redis" --rpc "$rpc" --bus "$redis" --group demo-balances

echo "== gapless verify"
"$gapless" verify --db "$db"

echo "== what is in PostgreSQL"
psql -q "$db" <<'SQL'
SELECT (SELECT count(*) FROM blocks)          AS blocks,
       (SELECT count(*) FROM transactions)    AS transactions,
       (SELECT count(*) FROM transactions WHERE status = 0) AS failed,
       (SELECT count(*) FROM logs)            AS logs,
       (SELECT count(*) FROM token_transfers) AS token_transfers;
SELECT coalesce(transaction_type::text, '?') AS tx_type, count(*) FROM transactions
 GROUP BY 1 ORDER BY 1;
SELECT CASE token_standard WHEN 20 THEN 'ERC-20' WHEN 721 THEN 'ERC-721' ELSE 'ERC-1155' END
       AS standard, count(*) AS transfers, count(DISTINCT token_address) AS tokens
  FROM token_transfers GROUP BY token_standard ORDER BY token_standard;
SQL
echo "== contracts mode: contracts' events decoded from their ABIs into typed tables"
# devnet/events.js deploys contracts whose events carry every ABI type (and a factory whose pools
# emit swaps) on the same devnet and writes a contracts config for them (docs/contracts.md); they
# are indexed into a database of their own, its events decoded into the schema `zoo`.
contracts_dir="$GAPLESS_RUN_DIR/contracts-demo"
rm -rf "$contracts_dir"
node devnet/events.js --rpc "$rpc" --dir "$contracts_dir" --rounds 12
contracts_db_name=gapless_demo_contracts
psql -q "$(scripts/pg.sh url postgres)" -c "DROP DATABASE IF EXISTS $contracts_db_name" \
  -c "CREATE DATABASE $contracts_db_name"
contracts_db=$(scripts/pg.sh url "$contracts_db_name")
"$gapless" index --rpc "$rpc" --db "$contracts_db" --from 0 --to latest --progress off \
  --log-level warn --contracts "$contracts_dir/contracts.yaml"
psql -q "$contracts_db" <<'SQL'
SELECT table_name, event_signature FROM decoded_tables
 WHERE schema_name = 'zoo' AND contract <> '' ORDER BY 1 LIMIT 8;
SELECT block_number, log_index, neg, tick, small, big FROM zoo.events_ints
 ORDER BY block_number, log_index LIMIT 3;
SELECT block_number, '0x' || encode(address, 'hex') AS pool, amount0, amount1, tick
  FROM zoo.pools_swap ORDER BY block_number, log_index LIMIT 3;
SELECT table_name, reason FROM zoo.undecoded ORDER BY block_number, log_index LIMIT 2;
SQL

cat <<EOF2
Try:
  $gapless export --db $db --table token_transfers | head
  $gapless export --db $contracts_db --table zoo.pools_swap | head
  $gapless status --db $db --redis $redis --rpc $rpc --bus $redis --group demo-balances
  $gapless events tail --bus $redis --chain-id $chain_id --from-beginning --type block.new --count 5
  psql $db
Stop the servers with: scripts/demo.sh stop
EOF2

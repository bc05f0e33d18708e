#!/usr/bin/env bash
# demo.sh: command 1 of the README. Installs what is missing, builds gapless (Release), starts a
# local PostgreSQL 15 (.run/, port 55432), a redis-server (port 56380) and an anvil devnet (port
# 8545), sends a few hundred
# blocks of real traffic (ETH transfers, contract deployments, ERC-20/721/1155 transfers, every
# transaction type, reverts), indexes it with `gapless run --workers 4` (workers coordinated
# through Redis) with a live progress display, verifies it and prints a summary. The servers keep running so you can explore; `scripts/demo.sh stop` stops them.
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

echo "== gapless run --workers 4 --from 0 --to latest"
"$gapless" run --rpc "$rpc" --db "$db" --redis "$redis" --from 0 --to latest --range-size 20 \
  --workers 4

echo "== gapless status"
"$gapless" status --db "$db" --redis "$redis" --rpc "$rpc"

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
cat <<EOF2
Try:
  $gapless export --db $db --table token_transfers | head
  $gapless status --db $db --redis $redis --rpc $rpc
  psql $db
Stop the servers with: scripts/demo.sh stop
EOF2

#!/usr/bin/env bash
# chaos.sh: the chaos harness as a command of its own (docs/chaos.md). Installs what is missing
# (scripts/setup.sh), builds gapless and gapless-chaos in their own build directory (unsanitized,
# -O0, with the mutation switches compiled in: inert unless --mutation names one), starts a
# PostgreSQL server for the harness's databases (scripts/pg.sh, port 55434 in .run/), runs
# gapless-chaos with the arguments given, and stops the server. Everything else (redis-servers,
# anvil, the gapless processes, the proxies) each seed starts and stops itself.
#
#   scripts/chaos.sh --seeds 1..100 --minutes 2              # the long run of docs/chaos.md
#   scripts/chaos.sh --seeds 1..10 --minutes 1 --mutation fence
# Environment: GAPLESS_CHAOS_BUILD_DIR (default build-chaos), GAPLESS_JOBS (default 2).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${GAPLESS_CHAOS_BUILD_DIR:-$here/build-chaos}
jobs=${GAPLESS_JOBS:-2}

scripts/setup.sh
echo "== configure ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g0" \
  -DGAPLESS_MUTATIONS=ON >/dev/null 2>&1
echo "== build"
cmake --build "$build" -j "$jobs" --target gapless gapless-chaos
export GAPLESS_RUN_DIR=$here/.run GAPLESS_PG_PORT=${GAPLESS_CHAOS_PG_PORT:-55434}
scripts/pg.sh start >/dev/null
trap 'scripts/pg.sh stop >/dev/null' EXIT
export GAPLESS_TEST_PG_URL="postgresql://gapless@127.0.0.1:$GAPLESS_PG_PORT/postgres"
export GAPLESS_ANVIL=$here/node_modules/.bin/anvil
echo "== chaos"
"$build/src/chaos/gapless-chaos" --work-dir "$here/.run/chaos" "$@"

#!/usr/bin/env bash
# chaos.sh: the chaos harness as a command of its own (docs/chaos.md). Installs what is missing
# (scripts/setup.sh), builds gapless and gapless-chaos in their own build directory (unsanitized,
# -O0, with the mutation switches compiled in: inert unless --mutation names one) and runs
# gapless-chaos with the arguments given. Everything (a PostgreSQL server, redis-servers,
# RabbitMQ, the Kafka mock cluster, anvil, the gapless processes, the proxies) each seed starts
# and stops itself.
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
cmake --build "$build" -j "$jobs" --target gapless gapless-chaos gapless-kafka-mock
export GAPLESS_ANVIL=$here/node_modules/.bin/anvil
echo "== chaos"
"$build/src/chaos/gapless-chaos" --work-dir "$here/.run/chaos" "$@"

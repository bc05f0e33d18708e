#!/usr/bin/env bash
# test.sh: command 2 of the README. Installs what is missing, builds with AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs the whole test suite with CTest, which starts and stops the
# servers the integration tests need (PostgreSQL, anvil) as fixtures. The last line is CTest's
# summary. Extra arguments go to ctest (e.g. -L unit, -R fixtures).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${GAPLESS_TEST_BUILD_DIR:-$here/build-test}
jobs=${GAPLESS_JOBS:-2}

scripts/setup.sh
echo "== configure ($build, ASan+UBSan)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGAPLESS_SANITIZE=ON >/dev/null
echo "== build"
cmake --build "$build" -j "$jobs"
echo "== test"
# The sanitizers stop on the first report; leaks are reported at exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
exec ctest --output-on-failure -j "$jobs" "$@"

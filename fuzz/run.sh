#!/usr/bin/env bash
# Builds the decode fuzzer (libFuzzer + ASan + UBSan, clang-14) in its own build directory and
# runs it briefly on a corpus seeded from the shared fixtures. CTest runs it as `fuzz.decode`.
#
# Usage: fuzz/run.sh <build dir>      (the fuzz build goes to <build dir>/fuzz-build)
# Environment: FUZZ_SECONDS (default 30), FUZZ_JOBS (build parallelism, default 2),
#              FUZZ_CC / FUZZ_CXX (default clang-14 / clang++-14).
# Exit status: 0 clean run; 77 clang is not installed (CTest reports the test as skipped);
# anything else: the build failed or the fuzzer found a crash, leak, timeout or broken invariant
# (the reproducer is written to <build dir>/fuzz-build/artifacts/).
set -euo pipefail

build=${1:?usage: fuzz/run.sh <build dir>}
src=$(cd "$(dirname "$0")/.." && pwd)
out="$(cd "$build" && pwd)/fuzz-build"
cc=${FUZZ_CC:-clang-14}
cxx=${FUZZ_CXX:-clang++-14}
seconds=${FUZZ_SECONDS:-30}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz: $cxx not found; skipping"
  exit 77
fi

# Everything the fuzz target links (core, decode) is coverage-instrumented and sanitized; the
# target itself adds -fsanitize=fuzzer (fuzz/CMakeLists.txt). Only the fuzz target is built, but
# the whole tree is configured, as the top-level CMakeLists requires.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
flags+=" -fno-omit-frame-pointer -gline-tables-only"
mkdir -p "$out"
echo "fuzz: configuring $out"
cmake -S "$src" -B "$out" -G Ninja -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DGAPLESS_FUZZ=ON >"$out/configure.log" 2>&1 || {
  cat "$out/configure.log"
  exit 1
}
echo "fuzz: building decode_fuzz"
ninja -C "$out" -j"${FUZZ_JOBS:-2}" decode_fuzz

fixtures="$src/../shared/fixtures"
if [ -f "$out/CMakeCache.txt" ]; then
  shared=$(sed -n 's/^GAPLESS_SHARED_DIR:PATH=//p' "$out/CMakeCache.txt")
  [ -n "$shared" ] && fixtures="$shared/fixtures"
fi
seeds="$out/seeds"
corpus="$out/corpus"  # kept between runs: it grows with what earlier runs found
artifacts="$out/artifacts/"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$artifacts"
if command -v python3 >/dev/null 2>&1; then
  python3 "$src/fuzz/make_seeds.py" "$fixtures" "$seeds"
else  # without python: the bare mainnet answers only
  { cat "$fixtures/mainnet/17000000/block.json"; printf '\0'; \
    cat "$fixtures/mainnet/17000000/receipts.json"; } >"$seeds/mainnet-17000000"
fi
echo "fuzz: $(ls "$seeds" | wc -l) seeds, $(ls "$corpus" | wc -l) corpus entries; running ${seconds}s"

# -max_len: big enough for every seed, small enough to keep mutations fast. -rss_limit_mb:
# ASan's overhead on 2 GB default is fine; a decode that needs more is a bug worth reporting.
# -timeout: one input taking over 10 s is a hang.
"$out/fuzz/decode_fuzz" "$corpus" "$seeds" \
  -dict="$src/fuzz/decode.dict" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$artifacts" -print_final_stats=1
echo "fuzz: clean"

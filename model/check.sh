#!/usr/bin/env bash
# check.sh: model-checks the HA-leader protocol (model/leader.pml) with spin. Runs the base model
# exhaustively in three bounded configurations (each must report 0 errors), each mutation with the
# property that must catch it (each must report a counterexample for that very property), the
# literal reading of P3 (a known, documented counterexample), and reachability checks that show
# the properties are not vacuous. Prints one line per check (states, seconds) and exits non-zero
# if any expectation fails. Exit 77 (CTest's skip) if spin is not installed.
#
# Usage: model/check.sh                 the test-suite set (about a minute on 2 cores, < 1 GB)
#        model/check.sh --deep          larger bounds too (many minutes, several GB; by hand)
#        model/check.sh --trace FLAGS   the shortest counterexample for spin flags FLAGS, e.g.
#                                       --trace -DM2 -DONLY_P3, as a list of protocol steps
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
model=$here/leader.pml
deep=0
trace=0
case "${1:-}" in
  "") ;;
  --deep) deep=1 ;;
  --trace) trace=1; shift ;;
  *) echo "usage: $0 [--deep | --trace SPIN_FLAGS...]" >&2; exit 2 ;;
esac

if ! command -v spin >/dev/null 2>&1; then
  echo "check.sh: spin is not installed (apt-get install spin); skipping" >&2
  exit 77
fi
cc=${CC:-gcc}
command -v "$cc" >/dev/null 2>&1 || { echo "check.sh: no C compiler ($cc)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gapless-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/leader.pml"
memlim=${GAPLESS_MODEL_MEMLIM:-2048}   # MB per pan run; reaching it fails the check
[ "$deep" = 1 ] && memlim=${GAPLESS_MODEL_MEMLIM:-12000}

if [ "$trace" = 1 ]; then
  cd "$work"
  spin -a "$@" leader.pml >/dev/null
  "$cc" -w -O0 -DSAFETY -DMEMLIM="$memlim" -o pan pan.c
  ./pan -m10000 -i >pan.log 2>&1 || true   # -i: iteratively shorter counterexamples
  if [ ! -f leader.pml.trail ]; then
    grep -e "errors:" -e "states, stored" pan.log
    echo "no counterexample"
    exit 1
  fi
  grep "assertion violated" pan.log | tail -1 || true
  spin -t -DTRACE "$@" leader.pml | sed -n 's/^ *MSC: //p'
  exit 0
fi

failures=0
echo "model check: $(spin -V | head -1), $("$cc" --version | head -1)"

# run NAME EXPECT OPT FLAGS...
#   EXPECT: "pass" (0 errors, complete search) or the text the violated assertion must contain.
#   OPT: the C optimization level for pan (-O1 for the big searches; -O0 compiles 8x faster).
run() {
  local name=$1 expect=$2 opt=$3
  shift 3
  local dir=$work/$name
  mkdir -p "$dir"
  cp "$work/leader.pml" "$dir/"
  local start end secs out states errors verdict
  start=$(date +%s.%N)
  (cd "$dir" && spin -a "$@" leader.pml >spin.log 2>&1 &&
    "$cc" -w "$opt" -DSAFETY -DMEMLIM="$memlim" -o pan pan.c >cc.log 2>&1 &&
    ./pan -m10000 -w22 >pan.log 2>&1) || true
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  out=$dir/pan.log
  states=$(awk '/states, stored/ { print $1; exit }' "$out" 2>/dev/null || true)
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" 2>/dev/null | head -1 || true)
  verdict=FAIL
  if [ -z "$errors" ]; then
    verdict="FAIL (no result; see below)"
  elif grep -q -e "max search depth too small" -e "reached -DMEMLIM" -e "out of memory" "$out"; then
    verdict="FAIL (incomplete search)"
  elif [ "$expect" = pass ]; then
    [ "$errors" = 0 ] && verdict=ok
  elif [ "$errors" -ge 1 ] && grep -q -F -e "$expect" "$out"; then
    verdict=ok
  fi
  printf '%-4s %-14s errors %-2s %9s states %6ss  %s\n' "$verdict" "$name" "${errors:-?}" \
    "${states:-?}" "$secs" "$*"
  if [ "$verdict" != ok ]; then
    failures=$((failures + 1))
    echo "  expected: $( [ "$expect" = pass ] && echo "0 errors" || echo "a violation of: $expect")"
    for log in "$dir/spin.log" "$dir/cc.log"; do
      [ -s "$log" ] && tail -n 15 "$log" | sed 's/^/  | /'
    done
    grep -e '^pan' -e 'errors:' "$out" 2>/dev/null | sed 's/^/  | /' || true
    if [ -f "$dir/leader.pml.trail" ]; then
      echo "  counterexample:"
      (cd "$dir" && spin -t -DTRACE "$@" leader.pml 2>&1 | sed -n 's/^ *MSC: /  | /p' | head -n 60)
    fi
  fi
}

# Assertion texts, as pan prints them, that identify each property.
p1='accset'                 # P1 no fork
p2='leadertoks'             # P2 one leader per token
p3='(late<'                 # P3 no zombie write lands
p3lit='(tok[c]>=maxgrant)'  # P3, the literal reading

echo "-- base model: every property, exhaustive (expect 0 errors)"
run base pass -O1 -DNC=2 -DH=2 -DMAXP=3
run base-3c pass -O1 -DNC=3 -DH=1 -DMAXP=3 -DFIXED_ORDER
run base-epochs pass -O1 -DNC=2 -DH=2 -DMAXE=2

echo "-- mutations: the named property must fail"
run M1-P1 "$p1" -O0 -DM1 -DONLY_P1 -DNC=2 -DH=2 -DMAXP=3
run M2-P3 "$p3" -O0 -DM2 -DONLY_P3 -DNC=2 -DH=2 -DMAXP=3
run M2-P2 "$p2" -O0 -DM2 -DONLY_P2 -DNC=2 -DH=2 -DMAXP=3
run M3-P2 "$p2" -O0 -DM3 -DONLY_P2 -DNC=2 -DH=2 -DMAXP=3
run M4-P2 "$p2" -O0 -DM4 -DONLY_P2 -DNC=2 -DH=2 -DMAXP=3

echo "-- the literal reading of P3 fails on the unmutated protocol, harmlessly (model/README.md)"
run P3-literal "$p3lit" -O0 -DP3_LITERAL -DONLY_P3 -DNC=2 -DH=2 -DMAXP=3

echo "-- reachability: the situations the properties are about do occur (expect a 'violation')"
run reach-zombie '(late>0)' -O0 -DREACH_ZOMBIE -DNC=2 -DH=2 -DMAXP=3
run reach-takeover '(leadertoks!=' -O0 -DREACH_TAKEOVER -DNC=2 -DH=2 -DMAXP=3
run reach-nonmono '(best<=maxgrant)' -O0 -DREACH_NONMONO -DNC=2 -DH=2 -DMAXP=3

if [ "$deep" = 1 ]; then
  echo "-- deep: larger bounds (expect 0 errors)"
  run deep-4p pass -O2 -DNC=2 -DH=1 -DMAXP=4
  run deep-3c pass -O2 -DNC=3 -DH=1 -DMAXP=3
  run deep-3c-2h pass -O2 -DNC=3 -DH=2 -DMAXP=3 -DFIXED_ORDER
  run deep-epochs pass -O2 -DNC=2 -DH=2 -DMAXE=3
  run deep-repair pass -O2 -DNC=2 -DH=2 -DMAXP=3 -DREPAIR
fi

if [ "$failures" -ne 0 ]; then
  echo "model check: $failures check(s) did not meet their expectation"
  exit 1
fi
echo "model check: all expectations met"

#!/usr/bin/env bash
# anvil.sh start|stop|status|url: a local anvil devnet (a real EVM node) for tests and the demo.
#
# anvil comes from the npm package @foundry-rs/anvil-linux-amd64 (scripts/setup.sh installs it into
# <repo>/node_modules); GAPLESS_ANVIL overrides the binary. Idempotent: start on a running node and
# stop on a stopped one do nothing. stop signals only the pid this script started (its pid file).
# Settings come from the environment:
#   GAPLESS_RUN_DIR          pid file and log live here (default: <repo>/.run)
#   GAPLESS_ANVIL_PORT       TCP port on 127.0.0.1 (default 8545)
#   GAPLESS_CHAIN_ID         chain id (default 31337)
#   GAPLESS_ANVIL_BLOCK_TIME seconds between blocks (interval mining; fractions like 0.5 work);
#                            unset = automine (one block per transaction, or evm_mine on demand)
#   GAPLESS_ANVIL_SLOTS      --slots-in-an-epoch (default 32). anvil answers the block tags
#                            "safe" with latest - SLOTS and "finalized" with latest - 2*SLOTS
#                            (clamped at 0), so with the default a block is finalized 64 blocks
#                            after it was mined. Use a small value (e.g. 2) in tests.
#   GAPLESS_ANVIL_HARDFORK   --hardfork (default: anvil's own, "latest")
#   GAPLESS_ANVIL_ARGS       extra arguments passed as they are (word-split)
#   GAPLESS_ANVIL_VERBOSE    1 = let anvil log every RPC call to the log file (default: --quiet)
# The node uses anvil's default mnemonic: 10 unlocked dev accounts with 10000 ETH each, which
# eth_sendTransaction can use without keys. Transactions are mined in arrival order (--order fifo),
# so the traffic generator's blocks do not depend on fees.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
run_dir=${GAPLESS_RUN_DIR:-$here/.run}
port=${GAPLESS_ANVIL_PORT:-8545}
chain_id=${GAPLESS_CHAIN_ID:-31337}
slots=${GAPLESS_ANVIL_SLOTS:-32}
pid_file=$run_dir/anvil-$port.pid
log_file=$run_dir/anvil-$port.log
url=http://127.0.0.1:$port

find_anvil() {
  if [ -n "${GAPLESS_ANVIL:-}" ]; then
    echo "$GAPLESS_ANVIL"
  elif [ -x "$here/node_modules/.bin/anvil" ]; then
    echo "$here/node_modules/.bin/anvil"
  elif [ -x "$here/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil" ]; then
    echo "$here/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
  else
    command -v anvil || true
  fi
}

# The pid in the pid file, if that process is alive and is an anvil; empty otherwise.
live_pid() {
  [ -f "$pid_file" ] || return 0
  local pid
  pid=$(cat "$pid_file" 2>/dev/null || true)
  case "$pid" in '' | *[!0-9]*) return 0 ;; esac
  alive "$pid" || return 0
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
  case "$cmd" in *anvil*) echo "$pid" ;; esac
}

# True while $1 runs (a zombie, dead but not yet reaped by its parent, counts as gone).
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local state
  state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)
  [ "$state" != Z ]
}

# Prints the chain id (hex) that the node on $url reports, or nothing.
rpc_chain_id() {
  curl -s --max-time 2 -H 'Content-Type: application/json' \
    -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "$url" 2>/dev/null |
    sed -n 's/.*"result":"\(0x[0-9a-fA-F]*\)".*/\1/p' || true
}

case "${1:-}" in
  start)
    if [ -n "$(live_pid)" ]; then
      exit 0
    fi
    rm -f "$pid_file"
    if [ -n "$(rpc_chain_id)" ]; then
      echo "anvil.sh: something else already answers on $url (not started by this script)" >&2
      exit 1
    fi
    anvil=$(find_anvil)
    if [ -z "$anvil" ] || [ ! -x "$anvil" ]; then
      echo "anvil.sh: anvil not found (node_modules/.bin/anvil missing); run scripts/setup.sh" >&2
      exit 1
    fi
    if ! command -v curl >/dev/null; then
      echo "anvil.sh: curl is needed; run scripts/setup.sh" >&2
      exit 1
    fi
    mkdir -p "$run_dir"
    args=(--host 127.0.0.1 --port "$port" --chain-id "$chain_id" --slots-in-an-epoch "$slots"
      --order fifo --color never)
    [ "${GAPLESS_ANVIL_VERBOSE:-0}" = 1 ] || args+=(--quiet)
    [ -z "${GAPLESS_ANVIL_BLOCK_TIME:-}" ] || args+=(--block-time "$GAPLESS_ANVIL_BLOCK_TIME")
    [ -z "${GAPLESS_ANVIL_HARDFORK:-}" ] || args+=(--hardfork "$GAPLESS_ANVIL_HARDFORK")
    # shellcheck disable=SC2206
    [ -z "${GAPLESS_ANVIL_ARGS:-}" ] || args+=($GAPLESS_ANVIL_ARGS)
    echo "$anvil ${args[*]}" >"$log_file"
    # setsid: a Ctrl-C in the terminal that ran "start" must not take the node down with it.
    setsid "$anvil" "${args[@]}" </dev/null >>"$log_file" 2>&1 &
    pid=$!
    echo "$pid" >"$pid_file"
    want=$(printf '0x%x' "$chain_id")
    for _ in $(seq 1 300); do
      if ! alive "$pid"; then
        rm -f "$pid_file"
        echo "anvil.sh: anvil exited during start; last lines of $log_file:" >&2
        tail -20 "$log_file" >&2
        exit 1
      fi
      got=$(rpc_chain_id)
      if [ -n "$got" ]; then
        if [ "$got" != "$want" ]; then
          echo "anvil.sh: node on $url reports chain id $got, expected $want" >&2
          exit 1
        fi
        exit 0
      fi
      sleep 0.1
    done
    echo "anvil.sh: anvil (pid $pid) did not answer eth_chainId on $url within 30 s; see $log_file" >&2
    exit 1
    ;;
  stop)
    pid=$(live_pid)
    if [ -n "$pid" ]; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do
        alive "$pid" || break
        sleep 0.1
      done
      if alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        while alive "$pid"; do sleep 0.1; done
      fi
    fi
    rm -f "$pid_file"
    ;;
  status)
    pid=$(live_pid)
    if [ -n "$pid" ]; then
      echo "anvil is running (pid $pid) on $url, chain id $(rpc_chain_id)"
    else
      echo "anvil is not running (port $port)"
      exit 3
    fi
    ;;
  url)
    echo "$url"
    ;;
  *)
    echo "usage: anvil.sh start|stop|status|url" >&2
    exit 2
    ;;
esac

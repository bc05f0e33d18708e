#!/usr/bin/env bash
# devnet_fixture.sh start|stop RUN_DIR PORT [BLOCKS] [CHAIN_ID]: an anvil devnet the integration
# tests share. start launches anvil and sends deterministic traffic (ETH, ERC-20/721/1155 transfers,
# reverts, all transaction types) for BLOCKS blocks (default 150) on chain CHAIN_ID (default 31337),
# writing what it sent to RUN_DIR/devnet-PORT.json for the tests to compare with. Devnets that tests
# may use at the same time get different chain ids: the gapless binary keys Redis by chain id.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export GAPLESS_RUN_DIR=$2 GAPLESS_ANVIL_PORT=$3 GAPLESS_ANVIL_SLOTS=2 GAPLESS_CHAIN_ID=${5:-31337}
case "$1" in
  start)
    "$here/scripts/anvil.sh" stop
    "$here/scripts/anvil.sh" start
    node "$here/devnet/traffic.js" --rpc "http://127.0.0.1:$3" --blocks "${4:-150}" --seed 7 \
      --pad 4 --out "$2/devnet-$3.json"
    ;;
  stop)
    "$here/scripts/anvil.sh" stop
    ;;
esac

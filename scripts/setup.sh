#!/usr/bin/env bash
# setup.sh: installs everything gapless needs to build and test, idempotently and without prompts.
#
# 1. Debian packages (compilers, libraries, PostgreSQL 15, redis-server, RabbitMQ, librdkafka,
#    rabbitmq-c, curl, Crypto++ and libsecp256k1 (block verification), cpp-httplib (the
#    /metrics endpoint), spin for the protocol model in model/, chromium (the status page's test,
#    headless), node + npm if missing). dpkg-query decides what is missing; only
#    then does it run apt-get update and apt-get install, so a second run is fast and needs no
#    network.
# 2. npm packages of package.json into <repo>/node_modules: anvil (@foundry-rs/anvil-linux-amd64,
#    which ships the binary itself) and solc-js. Skipped when node_modules matches the lock file.
# 3. Checks that anvil runs and that solc-js is there.
# One line per step. Runs as root, or with sudo for apt when not root.
# Environment: GAPLESS_APT_EXTRA  more Debian packages to install (space-separated).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

packages=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates jq
  clang-14 libclang-rt-14-dev clang-format
  libcurl4-openssl-dev libsimdjson-dev libpq-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  postgresql-15 redis-server libhiredis-dev libssl-dev
  librdkafka-dev librabbitmq-dev rabbitmq-server
  libcrypto++-dev libsecp256k1-dev libcpp-httplib-dev libyaml-cpp-dev
  spin faketime chromium openssl
)
# shellcheck disable=SC2206
packages+=(${GAPLESS_APT_EXTRA:-})
# Node: the machine may already have a newer node and npm outside Debian's packages (e.g. in
# /usr/local/bin); Debian's are installed only when either command is missing.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

step() { printf 'setup: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# --- 1. Debian packages ---------------------------------------------------------------------
# One dpkg-query for all (it names unknown packages on stderr and exits 1: both expected).
installed=" $(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${packages[@]}" 2>/dev/null |
  awk '$1 == "ii" { printf "%s ", $2 }' || true)"
missing=()
for p in "${packages[@]}"; do
  case "$installed" in *" $p "*) ;; *) missing+=("$p") ;; esac
done
if [ ${#missing[@]} -eq 0 ]; then
  step "apt: all ${#packages[@]} packages present"
else
  step "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  # DPkg::Lock::Timeout: wait for another apt/dpkg run instead of failing at once.
  if ! { as_root apt-get update -q && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}"; } >"$log" 2>&1; then
    tail -30 "$log" >&2
    rm -f "$log"
    echo "setup: apt-get failed" >&2
    exit 1
  fi
  rm -f "$log"
  step "apt: installed ${#missing[@]} packages"
fi

# --- 2. npm packages ----------------------------------------------------------------------------
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "setup: $tool not found after apt" >&2; exit 1; }
done
node_major=$(node --version | sed 's/^v\([0-9]*\).*/\1/')
if [ "${node_major:-0}" -lt 18 ]; then
  echo "setup: node $(node --version) is too old: devnet/*.js need node 18 or later (fetch)" >&2
  exit 1
fi
# node_modules is complete when npm's own record of it (node_modules/.package-lock.json) is
# newer than package.json and package-lock.json and the binaries we need are there.
anvil_bin=node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
npm_ok() {
  [ -f node_modules/.package-lock.json ] && [ -x "$anvil_bin" ] && [ -f node_modules/solc/soljson.js ] &&
    [ node_modules/.package-lock.json -nt package.json ] &&
    { [ ! -f package-lock.json ] || [ ! package-lock.json -nt node_modules/.package-lock.json ]; }
}
if npm_ok; then
  step "npm: node_modules up to date"
else
  log=$(mktemp)
  if [ -f package-lock.json ]; then cmd=(npm ci); else cmd=(npm install); fi
  step "npm: ${cmd[*]} ($(node --version), npm $(npm --version 2>/dev/null))"
  if ! "${cmd[@]}" --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
    grep -v 'Unknown user config' "$log" | tail -30 >&2
    rm -f "$log"
    echo "setup: ${cmd[*]} failed" >&2
    exit 1
  fi
  rm -f "$log"
  # npm links node_modules/.bin/anvil to the package's binary; make sure it exists (and is
  # executable) even where npm skipped bin links.
  if [ ! -x node_modules/.bin/anvil ]; then
    mkdir -p node_modules/.bin
    ln -sf ../@foundry-rs/anvil-linux-amd64/bin/anvil node_modules/.bin/anvil
  fi
  chmod +x "$anvil_bin"
  touch node_modules/.package-lock.json
  npm_ok || { echo "setup: node_modules incomplete after ${cmd[*]}" >&2; exit 1; }
fi

# --- 3. checks --------------------------------------------------------------------------------
anvil_version=$(node_modules/.bin/anvil --version 2>/dev/null | head -1) ||
  { echo "setup: node_modules/.bin/anvil does not run" >&2; exit 1; }
step "anvil: ${anvil_version#anvil Version: } at node_modules/.bin/anvil"
solc_version=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' node_modules/solc/package.json | head -1)
[ -n "$solc_version" ] || { echo "setup: solc-js is missing" >&2; exit 1; }
step "solc-js: $solc_version"

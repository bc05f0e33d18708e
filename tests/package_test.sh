#!/usr/bin/env bash
# package_test.sh BUILD_DIR: the .deb as an operator meets it (issue 17). Packs BUILD_DIR with
# CPack, checks its contents and control files, installs it with dpkg, checks the gapless user and
# /etc/gapless, verifies the systemd units (systemd-analyze, when present), runs the leader unit's
# ExecStart line as the unit would (user gapless, the packaged config with secrets in files of
# their own) against the test servers until /readyz says ready, then a worker unit's beside it
# until it is ready and blocks are indexed, and purges the package.
# Needs root (dpkg); exits 77 (skipped) otherwise, and when a gapless package is already installed
# (it is not this test's to replace). Environment: GAPLESS_TEST_PG_URL, GAPLESS_TEST_REDIS_URL,
# GAPLESS_TEST_ANVIL_URL.
set -euo pipefail
build=$(cd "$1" && pwd)
say() { printf 'package_test: %s\n' "$*"; }
if [ "$(id -u)" != 0 ]; then say "skipped: needs root for dpkg"; exit 77; fi
if dpkg-query -W -f='${Status}' gapless 2>/dev/null | grep -q "install ok installed"; then
  say "skipped: a gapless package is installed already"; exit 77
fi
work=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  dpkg --purge gapless >/dev/null 2>&1 || true
  psql -q "$GAPLESS_TEST_PG_URL" -c "DROP DATABASE IF EXISTS gapless_package_test" \
    >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

say "cpack"
(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/pkg/gapless_*_amd64.deb)
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/gapless ./usr/lib/systemd/system/gapless-leader.service \
  ./usr/lib/systemd/system/gapless-worker@.service ./etc/gapless/gapless.conf \
  ./usr/share/doc/gapless/operations.md; do
  grep -q " $f\$" <<<"$contents" || { say "FAIL: $f is not in the package"; exit 1; }
done
dpkg-deb -f "$deb" Depends | grep -q libpq5 || { say "FAIL: no shared-library dependencies"; exit 1; }
dpkg-deb -I "$deb" conffiles | grep -qx /etc/gapless/gapless.conf ||
  { say "FAIL: gapless.conf is not a conffile"; exit 1; }

say "dpkg -i"
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
getent passwd gapless >/dev/null || { say "FAIL: no gapless user"; exit 1; }
[ "$(stat -c '%U:%G %a' /etc/gapless)" = "root:gapless 750" ] ||
  { say "FAIL: /etc/gapless is $(stat -c '%U:%G %a' /etc/gapless)"; exit 1; }
/usr/bin/gapless --version | grep -q "gapless" || { say "FAIL: gapless --version"; exit 1; }

if command -v systemd-analyze >/dev/null 2>&1; then
  say "systemd-analyze verify"
  # Its complaints about the host (no running systemd, missing targets) are not the units'.
  if ! systemd-analyze verify /usr/lib/systemd/system/gapless-leader.service \
    /usr/lib/systemd/system/gapless-worker@9471.service >"$work/verify.log" 2>&1; then
    if grep -E "gapless-(leader|worker)" "$work/verify.log" | grep -vqi "network-online"; then
      cat "$work/verify.log"; say "FAIL: systemd-analyze verify"; exit 1
    fi
  fi
fi

say "the leader unit's ExecStart, as user gapless"
psql -q "$GAPLESS_TEST_PG_URL" -c "DROP DATABASE IF EXISTS gapless_package_test" >/dev/null
psql -q "$GAPLESS_TEST_PG_URL" -c "CREATE DATABASE gapless_package_test" >/dev/null
db_url=${GAPLESS_TEST_PG_URL%/*}/gapless_package_test
for f in db rpc redis; do install -m 600 -o gapless -g gapless /dev/null "/etc/gapless/$f.url"; done
echo "$db_url" >/etc/gapless/db.url
echo "$GAPLESS_TEST_ANVIL_URL" >/etc/gapless/rpc.url
echo "$GAPLESS_TEST_REDIS_URL" >/etc/gapless/redis.url
exec_start=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/gapless-leader.service)
# shellcheck disable=SC2086
runuser -u gapless -- $exec_start >"$work/leader.log" 2>&1 &
pid=$!
ready=""
for _ in $(seq 1 120); do
  if curl -sf http://127.0.0.1:9464/readyz >"$work/readyz" 2>/dev/null; then ready=yes; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
if [ -z "$ready" ]; then
  curl -s http://127.0.0.1:9464/readyz || true
  cat "$work/leader.log"; say "FAIL: the leader never became ready"; exit 1
fi
grep -q "leader: ok: this process leads" "$work/readyz" || { cat "$work/readyz"; exit 1; }
# The packaged config logs JSON, and the secrets' files are read, not shown in ps.
head -1 "$work/leader.log" | grep -q '^{"time":' || { cat "$work/leader.log"; exit 1; }
tr "\0" " " </proc/"$pid"/cmdline | grep -qF "$db_url" && { say "FAIL: a secret in argv"; exit 1; }

say "a worker unit's ExecStart (instance 9471), as user gapless, indexes beside the leader"
exec_start=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/gapless-worker@.service)
exec_start=${exec_start//%i/9471}
# shellcheck disable=SC2086
runuser -u gapless -- $exec_start >"$work/worker.log" 2>&1 &
worker_pid=$!
blocks=0
for _ in $(seq 1 240); do
  blocks=$(psql -qtA "$db_url" -c "SELECT count(*) FROM blocks" 2>/dev/null || echo 0)
  if [ "${blocks:-0}" -gt 0 ] && curl -sf http://127.0.0.1:9471/readyz >"$work/worker-readyz"; then
    break
  fi
  kill -0 "$worker_pid" 2>/dev/null || break
  sleep 0.5
done
if [ "${blocks:-0}" -eq 0 ] || [ ! -s "$work/worker-readyz" ]; then
  curl -s http://127.0.0.1:9471/readyz || true
  cat "$work/worker.log"; kill "$worker_pid" 2>/dev/null || true
  say "FAIL: the worker unit indexed nothing or never became ready ($blocks blocks)"; exit 1
fi
kill -TERM "$worker_pid"
wait "$worker_pid" || true
kill -TERM "$pid"
wait "$pid" || true
pid=""

say "dpkg --purge"
rm -f /etc/gapless/db.url /etc/gapless/rpc.url /etc/gapless/redis.url
dpkg --purge gapless >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
[ ! -e /usr/bin/gapless ] || { say "FAIL: /usr/bin/gapless left behind"; exit 1; }
getent passwd gapless >/dev/null && { say "FAIL: the gapless user left behind"; exit 1; }
say "ok"

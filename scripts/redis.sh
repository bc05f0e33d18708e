#!/usr/bin/env bash
# redis.sh start|stop|status|url: a redis-server of the project's own on 127.0.0.1, for tests and
# the demo. No persistence (tests want a clean slate, and losing Redis data is a case gapless must
# survive anyway), maxmemory-policy noeviction, which gapless requires, and keyspace notifications
# of expired and generic events (Egx), which the HA leader's followers subscribe to so that a
# freed lock is taken at once (without them they poll). Idempotent; start refuses a port that
# a server it did not start holds; stop signals only the pid this script started (its pid file).
#   GAPLESS_RUN_DIR     pid file, log and working directory (default: <repo>/.run)
#   GAPLESS_REDIS_PORT  TCP port (default 56379)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
run_dir=${GAPLESS_RUN_DIR:-$here/.run}
port=${GAPLESS_REDIS_PORT:-56379}
dir=$run_dir/redis-$port
pid_file=$dir/redis.pid

running() { [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null &&
  ! grep -q '^State:\s*Z' "/proc/$(cat "$pid_file")/status" 2>/dev/null; }

case "${1:-}" in
  start)
    command -v redis-server >/dev/null || { echo "redis.sh: redis-server missing; run scripts/setup.sh" >&2; exit 1; }
    mkdir -p "$dir"
    if running; then exit 0; fi
    # A server this script did not start (another checkout's, one started by hand) would answer
    # the ping below, and the tests would run against its settings and data.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "redis.sh: something else already listens on port $port (not started by this script)" >&2
      exit 1
    fi
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --pidfile "$pid_file" \
      --logfile "$dir/redis.log" --daemonize yes --save "" --appendonly no \
      --maxmemory-policy noeviction --notify-keyspace-events Egx --protected-mode yes
    for _ in $(seq 1 100); do
      running && redis-cli -p "$port" ping >/dev/null 2>&1 && exit 0
      sleep 0.05
    done
    echo "redis.sh: redis-server on port $port did not answer; see $dir/redis.log" >&2
    exit 1
    ;;
  stop)
    if running; then
      pid=$(cat "$pid_file")
      kill "$pid"
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        grep -q '^State:\s*Z' "/proc/$pid/status" 2>/dev/null && break
        sleep 0.05
      done
    fi
    rm -f "$pid_file"
    ;;
  status)
    if running; then echo "redis-server running on port $port (pid $(cat "$pid_file"))"; else echo "not running"; exit 3; fi
    ;;
  url)
    echo "redis://127.0.0.1:$port"
    ;;
  *)
    echo "usage: redis.sh start|stop|status|url" >&2
    exit 2
    ;;
esac

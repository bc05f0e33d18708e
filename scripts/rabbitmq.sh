#!/usr/bin/env bash
# rabbitmq.sh start|stop|status|url: a RabbitMQ node of the project's own on 127.0.0.1, for tests
# and the demo. Its own node name (gapless-amqp-<port>@localhost), data, logs, config and Erlang
# cookie in its own directory (below), no plugins, and nothing read from /etc/rabbitmq. The
# distribution port is set explicitly (port + 1000, or port - 1000 above 64535, or the next port
# up when a socket already holds that one: a CI run beside other work once lost all three start
# attempts to a connection whose local port it was) so two nodes on one machine never collide;
# the shared epmd on 4369 that the first node starts stays running.
# Debian's rabbitmq-server runs as user rabbitmq, so as root the node is started through runuser
# and its directory belongs to rabbitmq. Each start begins empty (the directory is wiped when
# the node is not running). Idempotent; start waits until the AMQP port answers (at most 180 s;
# a node that dies while booting, as one did on a loaded machine, is started again, twice at most;
# then it prints the log's tail and the VM's crash dump head); stop signals only the pid this node
# wrote (SIGTERM: a graceful shutdown, persistent messages kept) and waits for it to exit.
#   GAPLESS_AMQP_PORT  AMQP port (default 56720); the node's pid file, data and log are in
#                      ${TMPDIR:-/tmp}/gapless-rabbitmq-<port>
set -euo pipefail
port=${GAPLESS_AMQP_PORT:-56720}
# The node's directory is not under the run directory: the rabbitmq user must reach it, and a
# checkout may live below a directory only root can enter (mktemp -d makes them 0700). /tmp (or
# $TMPDIR) is world-traversable.
dir=${TMPDIR:-/tmp}/gapless-rabbitmq-$port
pid_file=$dir/pid
node=gapless-amqp-$port@localhost
if [ "$port" -gt 64535 ]; then dist_port=$((port - 1000)); else dist_port=$((port + 1000)); fi
server=/usr/lib/rabbitmq/bin/rabbitmq-server

running() { [ -s "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null &&
  ! grep -q '^State:\s*Z' "/proc/$(cat "$pid_file")/status" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }
# True when a socket (listening or connected) has local port $1: the node could not bind it.
port_taken() {
  awk -v p="$(printf '%04X' "$1")" 'FNR > 1 { split($2, a, ":"); if (a[2] == p) found = 1 }
    END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

case "${1:-}" in
  start)
    [ -x "$server" ] || { echo "rabbitmq.sh: rabbitmq-server missing; run scripts/setup.sh" >&2; exit 1; }
    if running; then exit 0; fi
    # A fresh node each start: the tests want a clean slate (no queues of an earlier run).
    rm -rf "$dir"
    mkdir -p "$dir/log" "$dir/mnesia"
    if port_open; then echo "rabbitmq.sh: port $port is taken by another process" >&2; exit 1; fi
    cat >"$dir/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$port
loopback_users = none
log.console = false
log.file.level = info
EOF
    echo '[].' >"$dir/enabled_plugins"
    : >"$dir/rabbitmq-env.conf"
    as_rabbit=()
    if [ "$(id -u)" = 0 ]; then
      chown -R rabbitmq:rabbitmq "$dir"
      as_rabbit=(runuser -u rabbitmq --)
    fi
    rm -f "$pid_file"
    launch() {
    for _ in $(seq 1 100); do port_taken "$dist_port" || break; dist_port=$((dist_port + 1)); done
    "${as_rabbit[@]}" env HOME="$dir" \
      RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
      RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
      RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config" \
      RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
      RABBITMQ_NODENAME="$node" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$port" \
      RABBITMQ_DIST_PORT="$dist_port" \
      RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
      RABBITMQ_PID_FILE="$pid_file" ERL_CRASH_DUMP="$dir/log/erl_crash.dump" \
      "$server" -detached
    }
    # The Erlang VM of a node that is booting, found by its home directory (-detached leaves no
    # launcher to wait for).
    booting() { pgrep -u rabbitmq -f -- "beam.smp.* -home $dir( |$)" >/dev/null 2>&1 ||
      pgrep -f -- "beam.smp.* -home $dir( |$)" >/dev/null 2>&1; }
    # On a loaded machine a node has died while booting, before it logged anything (a CI run
    # beside a chaos run): such a node is started again, twice at most. The wait is for
    # readiness, not a timing check: up to 180 s per attempt.
    for attempt in 1 2 3; do
      if [ "$attempt" -gt 1 ]; then  # what the dead node left of its database goes
        rm -rf "$dir/mnesia" && mkdir -p "$dir/mnesia"
        [ "$(id -u)" = 0 ] && chown rabbitmq:rabbitmq "$dir/mnesia"
      fi
      launch
      for i in $(seq 1 1800); do
        if port_open && running; then exit 0; fi
        # Gone 5 s after the launch with no pid written: it died while booting.
        if [ "$i" -gt 50 ] && ! running && ! booting; then break; fi
        sleep 0.1
      done
      if running || booting; then break; fi  # still booting after 180 s: give up
      echo "rabbitmq.sh: the node on port $port exited while starting (attempt $attempt)" >&2
      head -c 2000 "$dir/log/erl_crash.dump" >&2 2>/dev/null || true
    done
    echo "rabbitmq.sh: RabbitMQ on port $port did not answer; log tail:" >&2
    tail -n 30 "$dir/log/$node.log" >&2 2>/dev/null || true
    exit 1
    ;;
  stop)
    if running; then
      pid=$(cat "$pid_file")
      kill "$pid"
      for _ in $(seq 1 300); do
        kill -0 "$pid" 2>/dev/null || break
        grep -q '^State:\s*Z' "/proc/$pid/status" 2>/dev/null && break
        sleep 0.1
      done
      if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    rm -f "$pid_file"
    ;;
  status)
    if running; then echo "RabbitMQ node $node running on port $port (pid $(cat "$pid_file"))"; else echo "not running"; exit 3; fi
    ;;
  url)
    echo "amqp://guest:guest@127.0.0.1:$port"
    ;;
  *)
    echo "usage: rabbitmq.sh start|stop|status|url" >&2
    exit 2
    ;;
esac

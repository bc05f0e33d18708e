// gapless: the command-line entry point. Defines the flags and their help, layers them (flags >
// GAPLESS_* env > config file), turns the chosen subcommand's flags into its options, sets up
// logging, runs the command (node/commands.h, where everything is wired) and maps how it ended to
// the exit code. Nothing here opens a connection.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cli/block_bounds.h"
#include "cli/json_log.h"
#include "cli/layered_args.h"
#include "core/status.h"
#include "node/commands.h"
#include "rpc/endpoint_pool.h"

namespace gapless {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

// What the flags say, as CLI11 binds them (the initial values are the documented defaults).
struct CommonArgs {
  std::string config;
  std::string log_level = "info";
  std::string log_format = "text";
  std::string db;
  std::string metrics_addr;
};

struct IndexArgs {  // index, run, worker
  std::string rpc;
  std::string from = "0";
  std::string to = "finalized";
  uint64_t chain_id = 0;
  uint64_t range_size = 50;
  uint32_t batch = 10;
  uint32_t concurrency = 4;
  uint32_t db_connections = 2;
  int max_attempts = 5;
  int rpc_timeout_ms = 20'000;
  int connect_timeout_ms = 5'000;
  std::string write_mode = "staging";
  std::string copy_format = "binary";
  uint64_t memory_budget_mib = 256;
  uint64_t partition_blocks = 0;
  std::string index_near_head = "10000";
  std::string progress = "auto";
  bool verify = true;  // on by default: under 15% of throughput (bench/RESULTS.md)
  bool verify_senders = false;
  bool traces = false;
  std::string rpc_hedge = "on";
  std::string token_metadata = "on";
};

// --rpc: one URL, or a pool of endpoints (rpc/endpoint_pool.h).
constexpr const char* kRpcHelp =
    "JSON-RPC URL of an EVM node (http or https), or several separated by commas, each with "
    "optional settings after a space, e.g. \"https://a/KEY weight=3 rate-limit=50, "
    "https://b/KEY\": "
    "a pool that routes by weight and health, fails over, hedges slow requests and learns each "
    "endpoint's limits (docs/rpc-pool.md)";

// The list is checked where it is given, so a typo stops the command before anything starts.
CLI::Validator RpcListCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto parsed = gapless::ParseEndpointList(value);
        return parsed.ok() ? std::string() : parsed.status().message();
      },
      "URL[ weight=W][ rate-limit=R][,URL...]");
}

// The HA leader's lock nodes: run, leader, worker, status.
struct ElectionArgs {
  std::string lock_nodes;  // comma-separated redis:// URLs; empty: the coordination Redis
  int64_t leader_ttl_ms = 3'000;
  int64_t lock_node_timeout_ms = 100;
  uint64_t head_log_window = 4'096;
};

struct RunArgs {  // run, leader, worker
  std::string redis;
  uint32_t workers = 4;
  int64_t lease_ttl_ms = 30'000;
  std::string prefetch = "off";  // WorkerOptions::prefetch
  double rate_limit = 0;         // requests per second per endpoint, fleet-wide; 0 = none
  bool follow = false;
  uint64_t confirmations = 0;
  uint64_t max_reorg_depth = 64;
  int64_t max_lease_expiries = 10;
  int64_t dlq_wait_ms = 30'000;
  std::string source = "rpc";  // rpc | kafka
  std::string brokers;
  std::string topic;
  std::string group = "gapless-blocks";
  int64_t kafka_flush_ms = 2'000;
  int64_t range_lock_ttl_ms = 60'000;
  int64_t heal_gaps_after_ms = 30'000;
};

// --source and the Kafka block stream's flags (run, leader, worker).
void AddSourceOptions(CLI::App* sub, RunArgs* run, bool with_leader) {
  sub->add_option("--source", run->source,
                  with_leader ? "Where the blocks come from: rpc (the work queue, fetched over "
                                "--rpc) or kafka (a block stream consumed by Kafka workers; the "
                                "leader then queues only gaps for RPC workers)"
                              : "Where the blocks come from: rpc (ranges from the Redis queue, "
                                "fetched over --rpc) or kafka (a consumer group on --topic; --rpc "
                                "optional: it fetches blocks the stream lacks)")
      ->check(CLI::IsMember({"rpc", "kafka"}))
      ->capture_default_str();
  if (with_leader) {
    sub->add_option("--heal-gaps-after", run->heal_gaps_after_ms,
                    "With --source kafka: queue blocks missing from the stream for RPC workers "
                    "once the gap is this old, ms (0: only report it in status)")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}));
  }
  if (sub->get_name() == "leader") return;
  sub->add_option("--brokers", run->brokers,
                  "With --source kafka: the brokers, host:port[,host:port...]");
  sub->add_option("--topic", run->topic,
                  "With --source kafka: the block topic (docs/kafka-blocks.md)");
  sub->add_option("--group", run->group, "With --source kafka: the consumer group")
      ->capture_default_str();
  sub->add_option("--kafka-flush", run->kafka_flush_ms,
                  "With --source kafka: write a range not received whole once its newest block "
                  "is this old, ms")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{10}, int64_t{600'000}));
  sub->add_option("--range-lock-ttl", run->range_lock_ttl_ms,
                  "With --source kafka: TTL of a range lock, ms (the heartbeat extends it every "
                  "third)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{300}, int64_t{3'600'000}));
}

struct ReconcileArgs {
  std::string redis;
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t range_size = 50;
};

struct VerifyArgs {
  uint64_t from = 0;
  std::string to = "max";
  bool deep = false;
  bool verify_senders = false;
  bool anvil_blob_roots = false;
};

struct ExportArgs {
  std::string table;
  uint64_t from = 0;
  std::string to = "max";
  std::string format = "csv";
  std::string output = "-";
  std::string token_standards = "erc20,erc721";
};

struct FleetArgs {  // status, dlq
  std::string redis;
  uint64_t chain_id = 0;      // 0: the chain recorded in the database
  std::string rpc;            // status: the head, for the lag
  std::string redis_replica;  // status: display data from this replica
  bool json = false;          // status --json
  std::string dlq_action;
  std::string dlq_task;
};

struct EventsArgs {
  std::string events;  // index, run, leader: comma-separated bus URLs
  bool mempool = false;
  int64_t confirm_timeout_ms = 10'000;
  std::string bus;  // tail, replay (replay: comma-separated)
  uint64_t chain_id = 0;
  std::vector<std::string> types;
  bool from_beginning = false;
  uint64_t count = 0;
  uint64_t from = 0;
  uint64_t to = 0;
  std::string groups;  // status: consumer groups whose lag to show
  // publish
  std::string type;
  std::string identity;
  std::string payload;
  // produce
  std::string brokers;
  std::string topic;
  uint64_t window = 50;
  // consume
  std::string redis;
  std::string group = "balances";
  size_t concurrency = 4;
  int64_t status_interval_s = 30;
  std::vector<std::string> ordered = {"block.new", "block.reverted"};
};

struct Args {
  CommonArgs common;
  EventsArgs events;
  IndexArgs index;
  RunArgs run;
  ElectionArgs election;
  ReconcileArgs reconcile;
  VerifyArgs verify;
  ExportArgs exp;
  FleetArgs fleet;
};

struct Subcommands {
  CLI::App* index;
  CLI::App* run;
  CLI::App* leader;
  CLI::App* worker;
  CLI::App* reconcile;
  CLI::App* verify;
  CLI::App* exp;
  CLI::App* status;
  CLI::App* dlq;
  CLI::App* events;  // a group: its subcommands are tail and replay
  CLI::App* events_tail;
  CLI::App* events_replay;
  CLI::App* events_publish;
  CLI::App* produce;
  CLI::App* consume;  // a group: its subcommand is balances
  CLI::App* consume_balances;

  // Every subcommand that takes options (a group such as events is not one of them).
  std::vector<CLI::App*> all() const {
    return {index,         verify,         exp,     status,          dlq,
            run,           leader,         worker,  reconcile,       events_tail,
            events_replay, events_publish, produce, consume_balances};
  }
};

// --config and --log-level: every subcommand (AddCommon adds --db to them).
void AddConfigAndLogging(CLI::App* sub, CommonArgs* common) {
  sub->add_option("--config", common->config,
                  "Config file of `key = value` lines; keys are the long option names");
  sub->add_option("--log-level", common->log_level, "trace|debug|info|warn|error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  sub->add_option("--log-format", common->log_format,
                  "text, or json: one object per line (time, level, module, message, and the "
                  "worker, epoch and block range where the message names them)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
}

// --metrics-addr: every long-running command (index, run, leader, worker, consume balances).
void AddMetricsAddr(CLI::App* sub, CommonArgs* common) {
  sub->add_option("--metrics-addr", common->metrics_addr,
                  "Serve /metrics (Prometheus), /healthz and /readyz on HOST:PORT, e.g. "
                  "127.0.0.1:9464 (0.0.0.0:9464: every interface); off when not given");
}

void AddCommon(CLI::App* sub, CommonArgs* common) {
  AddConfigAndLogging(sub, common);
  sub->add_option("--db", common->db,
                  "PostgreSQL URL, e.g. postgresql://user@127.0.0.1:5432/gapless; a server off "
                  "the loopback is verified (sslmode=verify-full, the system's CAs) unless the "
                  "URL sets sslmode; sslrootcert=PATH names a private CA")
      ->required();
}

// Appends "[env: GAPLESS_X]" to every option's help so --help documents the environment too.
void DocumentEnv(CLI::App* sub) {
  for (CLI::Option* opt : sub->get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "help") continue;
    const std::string& key = opt->get_lnames()[0];
    std::string doc = opt->get_description() + " [env: " + EnvNameForKey(key) + "]";
    if (SecretKeys().count(key) > 0) {
      doc += " [or from a file, out of `ps`: --" + key + "-file PATH, --" + key + " @PATH, " +
             EnvNameForKey(key + "-file") + "]";
    }
    opt->description(doc);
  }
}

// The data path's flags: index (single = true) and, without --concurrency, run and worker.
void AddIndexOptions(CLI::App* sub, Args* a, bool single) {
  IndexArgs& index = a->index;
  AddCommon(sub, &a->common);
  sub->add_option("--rpc", index.rpc, kRpcHelp)->required()->check(RpcListCheck());
  sub->add_option("--rpc-hedge", index.rpc_hedge,
                  "With several --rpc endpoints: also send a request to another endpoint when "
                  "the first has not answered within its recent p95 latency or the other "
                  "endpoints', whichever is lower (at most 10% of the requests, plus 5); on or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--from", index.from, "First block")->capture_default_str();
  sub->add_option("--to", index.to, "Last block: a number, latest, safe or finalized")
      ->capture_default_str();
  sub->add_option("--chain-id", index.chain_id,
                  "Expected chain id; refuse to run against another chain (0: take the node's)")
      ->capture_default_str();
  sub->add_option("--range-size", index.range_size,
                  "Blocks per committed range (one database transaction)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sub->add_option("--batch", index.batch, "Blocks per JSON-RPC batch request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  if (single) {
    sub->add_option("--concurrency", index.concurrency,
                    "Fetch workers, i.e. the most JSON-RPC requests in flight at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
  }
  sub->add_option("--db-connections", index.db_connections, "PostgreSQL connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  sub->add_option("--max-attempts", index.max_attempts,
                  "Attempts per request and per range before the run stops with the error")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  sub->add_option("--rpc-timeout", index.rpc_timeout_ms, "JSON-RPC request timeout, ms")
      ->capture_default_str();
  sub->add_option("--connect-timeout", index.connect_timeout_ms, "TCP/TLS connect timeout, ms")
      ->capture_default_str();
  sub->add_option("--write-mode", index.write_mode,
                  "staging: COPY into staging tables + INSERT ON CONFLICT DO NOTHING; replace: "
                  "delete the range's rows and COPY straight into the tables")
      ->capture_default_str()
      ->check(CLI::IsMember({"staging", "replace"}));
  sub->add_option("--copy-format", index.copy_format,
                  "binary: COPY rows in PostgreSQL's binary format (the server parses nothing); "
                  "text: its text format (for a PostgreSQL-compatible server without binary "
                  "COPY). The stored rows are the same")
      ->capture_default_str()
      ->check(CLI::IsMember({"binary", "text"}));
  sub->add_option("--memory-budget", index.memory_budget_mib,
                  "MiB the process may use for the blocks it fetches and holds, whatever "
                  "--range-size, --concurrency/--workers and --batch say: a range larger than a "
                  "thread's share is fetched and committed in parts, batches shrink to fit; a "
                  "Kafka worker writes what it holds past its share and hands back what it polls "
                  "while it cannot (0: no budget)")
      ->capture_default_str();
  sub->add_option("--partition-blocks", index.partition_blocks,
                  "Blocks per partition of the data tables, for a database without partitions "
                  "yet (refused once it has them): smaller partitions keep a busy chain's writes "
                  "fast as the index grows, larger ones make lookups that no block number bounds "
                  "cheaper (docs/schema.md; default: the database's, 1000000)")
      ->capture_default_str();
  sub->add_option("--index-near-head", index.index_near_head,
                  "The leader builds a partition's secondary indexes (lookups by hash, address, "
                  "token) once its blocks are all committed, or at once while the frontier is "
                  "within this many blocks of the end of the run (the head when following), so a "
                  "backfill far behind the head writes partitions with their primary key alone; "
                  "'always': build them as each partition is created (docs/schema.md)")
      ->capture_default_str();
  sub->add_flag("--verify,!--no-verify", index.verify,
                "Prove every block against its own header before writing it: transactions, "
                "receipts and withdrawals roots, logs bloom, block hash (docs/verify.md); a "
                "mismatch is retried, then dead-lettered, never written. On by default; "
                "--no-verify turns it off")
      ->capture_default_str();
  sub->add_flag("--verify-senders", index.verify_senders,
                "With or without --verify: also recover each transaction's sender from its "
                "signature (secp256k1) and compare it with `from` (costly)");
  sub->add_flag("--traces", index.traces,
                "Also index every transaction's call tree into the traces table (internal "
                "transactions): trace_block, or debug_traceBlockByHash with the callTracer "
                "where the node lacks it; each top-level trace is checked against its "
                "transaction, each answer against the block's hash; with --events, each frame "
                "below the top that moved value is a "
                "trace.internal_transfer event. Needs a node with a tracing API (an archive node "
                "for old blocks); not with --source kafka");
  sub->add_option("--token-metadata", index.token_metadata,
                  "Read each token's name, symbol, decimals and total supply (eth_call at the "
                  "block where it first appears: a transfer of it, or its creation) into the "
                  "tokens table; a method that is missing or reverts is NULL. off: no token "
                  "rows (contracts are indexed either way)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--progress", index.progress,
                  "auto: a live bar on a terminal, plain lines every 10 s otherwise; tty; "
                  "plain; off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tty", "plain", "off"}));
  AddMetricsAddr(sub, &a->common);
}

// run and worker: the data path's flags and the fleet's.
void AddRunOptions(CLI::App* sub, Args* a) {
  AddIndexOptions(sub, a, /*single=*/false);
  sub->add_option("--redis", a->run.redis,
                  "Coordination Redis URL (maxmemory-policy must be noeviction); a primary "
                  "and its replicas as redis://h1:6379,h2:6379 to follow a manual failover "
                  "(every reconnect takes the server whose ROLE is master); TLS: "
                  "rediss://host:port?cacertfile=PATH")
      ->required();
  sub->add_option("--workers", a->run.workers,
                  "Worker threads in this process (run: 0 = only the seeder/janitor/frontier "
                  "role, for a fleet whose workers all run elsewhere)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  sub->add_option("--lease-ttl", a->run.lease_ttl_ms,
                  "Lease of a claimed range, ms; --rpc-timeout must be below it")
      ->capture_default_str();
  sub->add_option("--prefetch", a->run.prefetch,
                  "on: each worker fetches and decodes its next range while the last one is "
                  "written (two leases and two decoded parts held; pays where workers leave cores "
                  "idle); off: fetch, write and claim in series")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--rate-limit", a->run.rate_limit,
                  "Fleet-wide JSON-RPC requests per second to this endpoint (0: unlimited)")
      ->capture_default_str();
}

// The lock nodes of the HA leader (run, leader, worker, status).
void AddElectionOptions(CLI::App* sub, Args* a, bool with_lease) {
  sub->add_option("--lock-nodes", a->election.lock_nodes,
                  "Comma-separated redis:// URLs of the leader's lock nodes, 1, 3 or 5 "
                  "independent servers (a quorum of them elects the leader and holds the head "
                  "log; a node may be a primary with its replicas, redis://h1,h2; rediss:// for "
                  "TLS); default: the coordination Redis alone");
  sub->add_option("--lock-node-timeout", a->election.lock_node_timeout_ms,
                  "Per lock node and operation, ms")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{60'000}));
  sub->add_option("--head-log-window", a->election.head_log_window,
                  "Head-log heights kept on each lock node")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{16}, uint64_t{10'000'000}));
  if (!with_lease) return;
  sub->add_option("--leader-ttl", a->election.leader_ttl_ms,
                  "The leader's lease, ms: a dead leader is replaced about this long after its "
                  "last head-log write; it renews every third of it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{300}, int64_t{600'000}));
}

// The event relay of a leader (index, run, leader).
void AddEventsOptions(CLI::App* sub, Args* a) {
  sub->add_option("--events", a->events.events,
                  "Publish what is indexed as events to these buses, comma-separated: "
                  "kafka://host:port[,host:port], amqp[s]://user:pass@host:port/vhost, "
                  "redis[s]://host:port (enables the outbox in the database)");
  sub->add_option("--events-timeout", a->events.confirm_timeout_ms,
                  "How long a bus may take to confirm a batch of events, ms")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{600'000}));
  sub->add_flag("--mempool", a->events.mempool,
                "With --events: also publish transaction.pending for the transactions the node "
                "reports as pending (its pending-transaction filter), while leading");
}

// status and dlq.
void AddFleetOptions(CLI::App* sub, Args* a) {
  AddCommon(sub, &a->common);
  sub->add_option("--redis", a->fleet.redis,
                  "Coordination Redis URL, e.g. redis://127.0.0.1:6379; a primary and its "
                  "replicas as redis://h1:6379,h2:6379 (the primary is found by ROLE); TLS: "
                  "rediss://host:port?cacertfile=PATH")
      ->required();
  sub->add_option("--chain-id", a->fleet.chain_id,
                  "Chain whose coordination state to use (0: the one recorded in the database)")
      ->capture_default_str();
}

// Every subcommand with its flags, bound to *a, in the order --help lists them.
Subcommands DefineSubcommands(CLI::App* app, Args* a) {
  Subcommands s{};
  s.index = app->add_subcommand(
      "index", "Index blocks FROM..TO (TO may be latest, safe or finalized) into PostgreSQL");
  AddIndexOptions(s.index, a, /*single=*/true);
  AddEventsOptions(s.index, a);
  DocumentEnv(s.index);

  s.run = app->add_subcommand(
      "run",
      "Index FROM..TO with N workers plus a candidate for the HA leader (head log, seeder, "
      "janitor, frontier, and with --events the event relay) in one process, coordinated through "
      "Redis (the single-machine default)");
  s.leader = app->add_subcommand(
      "leader",
      "Be a candidate for the HA leader, with no workers: while elected, track the chain head "
      "into the head log, seed, janitor and advance the frontier for the fleet's workers, and "
      "with --events publish the events");
  for (CLI::App* sub : {s.run, s.leader}) {
    AddRunOptions(sub, a);
    AddElectionOptions(sub, a, /*with_lease=*/true);
    AddEventsOptions(sub, a);
    sub->add_flag("--follow", a->run.follow,
                  "Keep following the chain: TO is a tag (latest|safe|finalized) that moves");
    sub->add_option("--confirmations", a->run.confirmations,
                    "With --follow --to latest: stay this many blocks behind the head")
        ->capture_default_str();
    sub->add_option("--max-reorg-depth", a->run.max_reorg_depth,
                    "Roll back a chain re-org at most this many blocks deep; a deeper one stops "
                    "the run with an error naming the fork point, changing nothing (README: "
                    "re-orgs)")
        ->capture_default_str()
        ->check(CLI::Range(uint64_t{1}, uint64_t{4'000}));
    sub->add_option("--max-lease-expiries", a->run.max_lease_expiries,
                    "Dead-letter a range whose lease expired this many times (its workers died or "
                    "stalled on it)")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{1}, int64_t{1000}));
    sub->add_option("--dlq-wait", a->run.dlq_wait_ms,
                    "A run with a numbered --to whose range is dead-lettered waits this long, ms, "
                    "for `gapless dlq retry` before it exits with the range's error (0: wait "
                    "forever)")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}));
  }
  AddSourceOptions(s.run, &a->run, /*with_leader=*/true);
  AddSourceOptions(s.leader, &a->run, /*with_leader=*/true);
  s.leader->get_option("--workers")
      ->default_str("0")
      ->description("Must be 0 (a leader candidate has no workers; use run for both)");
  DocumentEnv(s.run);
  DocumentEnv(s.leader);
  s.worker = app->add_subcommand(
      "worker",
      "Run N workers that claim ranges from the Redis queue and check every block against the "
      "head log, or with --source kafka consume a Kafka block stream (docs/kafka-blocks.md), "
      "until stopped (SIGTERM); workers never lead");
  AddRunOptions(s.worker, a);
  AddElectionOptions(s.worker, a, /*with_lease=*/false);
  AddSourceOptions(s.worker, &a->run, /*with_leader=*/false);
  s.worker->get_option("--rpc")->required(false)->description(
      "JSON-RPC URL of an EVM node (http or https); required unless --source kafka");
  DocumentEnv(s.worker);

  s.reconcile = app->add_subcommand(
      "reconcile",
      "Rebuild the Redis queue, fencing counter and frontier of FROM..TO from "
      "PostgreSQL (after Redis lost its data; also done automatically at start)");
  AddCommon(s.reconcile, &a->common);
  s.reconcile->add_option("--redis", a->reconcile.redis, "Coordination Redis URL")->required();
  s.reconcile->add_option("--from", a->reconcile.from, "First block")->capture_default_str();
  s.reconcile->add_option("--to", a->reconcile.to, "Last block")->required();
  s.reconcile->add_option("--range-size", a->reconcile.range_size, "Blocks per range task")
      ->capture_default_str();
  DocumentEnv(s.reconcile);

  s.verify = app->add_subcommand(
      "verify",
      "Check blocks FROM..TO in PostgreSQL: each present once, parent hashes chain, "
      "counts consistent; with --deep also prove each block against its own header. Exits 1 "
      "and lists the problems otherwise");
  AddCommon(s.verify, &a->common);
  s.verify->add_option("--from", a->verify.from, "First block")->capture_default_str();
  s.verify->add_option("--to", a->verify.to, "Last block (max: the highest indexed block)")
      ->capture_default_str();
  s.verify->add_flag("--deep", a->verify.deep,
                     "Also rebuild every stored block's transactions, receipts and withdrawals "
                     "roots, logs blooms, transaction and block hashes from its rows and compare "
                     "them with its stored header, plus gas used, effective gas price and token "
                     "transfers (docs/verify.md); reads every row of the interval");
  s.verify->add_flag("--verify-senders", a->verify.verify_senders,
                     "With --deep (implies it): also recover each transaction's sender from its "
                     "signature and compare it with the stored from_address (costly)");
  s.verify->add_flag("--anvil-blob-roots", a->verify.anvil_blob_roots,
                     "With --deep: the database holds an anvil devnet, whose blocks with blob "
                     "transactions have a non-standard transactionsRoot; skip that one "
                     "comparison for them (docs/verify.md)");
  DocumentEnv(s.verify);

  s.exp = app->add_subcommand("export",
                              "Write a table as CSV with ethereum-etl's columns and formatting");
  AddCommon(s.exp, &a->common);
  s.exp
      ->add_option("--table", a->exp.table,
                   "blocks|transactions|logs|token_transfers|receipts|traces|contracts|tokens")
      ->required()
      ->check(CLI::IsMember({"blocks", "transactions", "logs", "token_transfers", "receipts",
                             "traces", "contracts", "tokens"}));
  s.exp->add_option("--from", a->exp.from, "First block")->capture_default_str();
  s.exp->add_option("--to", a->exp.to, "Last block (max: the highest indexed block)")
      ->capture_default_str();
  s.exp->add_option("--format", a->exp.format, "Output format (csv)")->capture_default_str();
  s.exp->add_option("--output", a->exp.output, "Output file (- for stdout)")->capture_default_str();
  s.exp
      ->add_option("--token-standards", a->exp.token_standards,
                   "For token_transfers: comma-separated subset of erc20,erc721,erc1155 "
                   "(ethereum-etl knows only erc20 and erc721)")
      ->capture_default_str();
  DocumentEnv(s.exp);

  s.status = app->add_subcommand(
      "status",
      "Show the fleet at a glance: the leader and each lock node's view, the head log, the "
      "coordination Redis (keys, memory, each replica's lag, a warning when the key count keeps "
      "growing), "
      "frontier, queue depths, leases, dead letters, live workers with their ranges and rates, "
      "lag to the chain head, and the events: outbox backlog, each bus's cursor, group lag");
  AddFleetOptions(s.status, a);
  AddElectionOptions(s.status, a, /*with_lease=*/false);
  s.status
      ->add_option("--rpc", a->fleet.rpc, "JSON-RPC URL (or pool), to show the head and the lag")
      ->check(RpcListCheck());
  s.status->add_flag("--json", a->fleet.json,
                     "Print one JSON object (the /status.json of --metrics-addr) instead of text");
  s.status->add_option(
      "--redis-replica", a->fleet.redis_replica,
      "A replica of the coordination Redis, e.g. redis://replica:6379: the display data (keys, "
      "memory, Redis frontier, queue, leases, workers) is read there, with a line giving its lag; "
      "status only (coordination reads and writes always go to the --redis primary)");
  s.status->add_option("--bus", a->events.bus,
                       "Event bus URLs, comma-separated: show the lag of --group's groups there");
  s.status->add_option("--group", a->events.groups,
                       "Consumer groups (comma-separated) whose lag to show on each --bus");
  DocumentEnv(s.status);
  s.dlq = app->add_subcommand(
      "dlq", "Dead-lettered ranges: `dlq list`, or `dlq retry FROM-TO|all` to re-queue them");
  AddFleetOptions(s.dlq, a);
  s.dlq->add_option("action", a->fleet.dlq_action, "list or retry")
      ->required()
      ->check(CLI::IsMember({"list", "retry"}));
  s.dlq->add_option("task", a->fleet.dlq_task, "with retry: the range FROM-TO, or all");
  DocumentEnv(s.dlq);

  s.events = app->add_subcommand("events",
                                 "Event buses: `events tail`, `events replay`, `events publish`");
  s.events->require_subcommand(1);
  s.events_tail = s.events->add_subcommand(
      "tail", "Print the envelopes arriving on a bus as JSON lines (a throw-away subscription)");
  {
    CLI::App* t = s.events_tail;
    AddConfigAndLogging(t, &a->common);
    t->add_option("--bus", a->events.bus, "Bus URL: kafka://..., amqp[s]://..., redis[s]://...")
        ->required();
    t->add_option("--chain-id", a->events.chain_id, "Chain of the topics ({type}.{chain_id})")
        ->required();
    t->add_option("--type", a->events.types,
                  "Event type, repeatable (block.new, transaction.confirmed, token.transfer, "
                  "transaction.pending, contract.verified); default: every type")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    t->add_flag("--from-beginning", a->events.from_beginning,
                "Also print what the bus still holds (Kafka, Redis); default: new events only");
    t->add_option("--count", a->events.count, "Exit after this many events (0: until Ctrl-C)")
        ->capture_default_str();
    DocumentEnv(t);
  }
  s.events_replay = s.events->add_subcommand(
      "replay",
      "Publish the events of committed blocks FROM..TO again, built from the database's rows "
      "(the same event ids as the first time)");
  {
    CLI::App* r = s.events_replay;
    AddCommon(r, &a->common);
    r->add_option("--bus", a->events.bus, "Bus URLs, comma-separated")->required();
    r->add_option("--from", a->events.from, "First block")->required();
    r->add_option("--to", a->events.to, "Last block")->required();
    r->add_option("--events-timeout", a->events.confirm_timeout_ms,
                  "How long a bus may take to confirm a batch, ms")
        ->capture_default_str();
    DocumentEnv(r);
  }

  s.events_publish = s.events->add_subcommand(
      "publish",
      "Publish one event of another producer (e.g. contract.verified) in gapless's envelope; "
      "prints its event id");
  {
    CLI::App* p = s.events_publish;
    AddConfigAndLogging(p, &a->common);
    p->add_option("--bus", a->events.bus, "Bus URLs, comma-separated")->required();
    p->add_option("--chain-id", a->events.chain_id, "Chain of the event")->required();
    p->add_option("--type", a->events.type, "Event type, e.g. contract.verified")->required();
    p->add_option("--identity", a->events.identity,
                  "The object's key (e.g. the contract address): the event id is derived from "
                  "chain, type and identity, so publishing the same object again gives one id")
        ->required();
    p->add_option("--payload", a->events.payload, "The payload, a JSON object")->required();
    DocumentEnv(p);
  }

  s.produce = app->add_subcommand(
      "produce",
      "Publish blocks FROM..TO of an RPC node to a Kafka topic in the block-stream format "
      "(docs/kafka-blocks.md: one message per block with its receipts, key = block number)");
  {
    CLI::App* p = s.produce;
    AddConfigAndLogging(p, &a->common);
    p->add_option("--rpc", a->index.rpc, kRpcHelp)->required()->check(RpcListCheck());
    p->add_option("--brokers", a->events.brokers, "Kafka bootstrap servers, host:port[,host:port]")
        ->required();
    p->add_option("--topic", a->events.topic, "Kafka topic")->required();
    p->add_option("--from", a->index.from, "First block")->capture_default_str();
    p->add_option("--to", a->index.to, "Last block: a number, latest, safe or finalized")
        ->capture_default_str();
    p->add_option("--batch", a->index.batch, "Blocks per JSON-RPC batch and Kafka batch")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    p->add_option("--window", a->events.window,
                  "Blocks n with the same n / WINDOW go to one partition, (n / WINDOW) mod "
                  "partitions, so a Kafka worker with --range-size WINDOW gets each range whole; "
                  "0: the partitioner hashes the key")
        ->capture_default_str();
    p->add_option("--rpc-timeout", a->index.rpc_timeout_ms, "JSON-RPC request timeout, ms")
        ->capture_default_str();
    DocumentEnv(p);
  }

  s.consume = app->add_subcommand("consume", "Consumers built on gapless's consumer framework");
  s.consume->require_subcommand(1);
  s.consume_balances = s.consume->add_subcommand(
      "balances",
      "Keep token_balances (holder, token, token id, balance) in --db from the token.transfer "
      "events on --bus, each event applied once however often it is delivered");
  {
    CLI::App* c = s.consume_balances;
    AddCommon(c, &a->common);
    c->add_option("--bus", a->events.bus, "Bus URL: kafka://..., amqp[s]://..., redis[s]://...")
        ->required();
    c->add_option("--redis", a->events.redis,
                  "Redis URL for the processing keys (dedup while an event is being applied)")
        ->required();
    c->add_option("--chain-id", a->events.chain_id, "Chain of the token.transfer topic")
        ->required();
    c->add_option("--group", a->events.group,
                  "Consumer group (Kafka group, AMQP queue, stream group)")
        ->capture_default_str();
    c->add_option("--concurrency", a->events.concurrency, "Events applied at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    c->add_option("--status-interval", a->events.status_interval_s,
                  "Seconds between status reports in the log")
        ->capture_default_str()
        ->check(CLI::Range(1, 86'400));
    c->add_option("--ordered", a->events.ordered,
                  "Event types applied strictly in order within each partition (Kafka partition, "
                  "Redis stream, AMQP routing key), retries included: a later event waits while "
                  "an earlier one is retried, until it is applied or dead-lettered. "
                  "Comma-separated; all or none. Order holds per consumer: on Redis Streams and "
                  "RabbitMQ run one consumer per group where it matters")
        ->delimiter(',')
        ->capture_default_str()
        ->check(CLI::IsMember({"block.new", "transaction.confirmed", "token.transfer",
                               "transaction.pending", "contract.verified", "block.reverted", "all",
                               "none"}));
    AddMetricsAddr(c, &a->common);
    DocumentEnv(c);
  }
  return s;
}

// The command line with the config file and the environment layered under the real arguments of
// the chosen subcommand, in the reverse order CLI11 takes. An error (unreadable config file, an
// unknown key in it) names the file, line and key.
Result<std::vector<std::string>> LayeredCommandLine(int argc, char** argv,
                                                    const Subcommands& subcommands) {
  std::vector<std::string> raw(argv + 1, argv + argc);
  CLI::App* chosen = nullptr;
  size_t sub_pos = 0;
  for (size_t i = 0; i < raw.size() && chosen == nullptr; ++i) {
    for (CLI::App* sub : subcommands.all()) {
      if (raw[i] == sub->get_name()) {
        chosen = sub;
        sub_pos = i;
        break;
      }
    }
  }
  std::vector<std::string> layered(raw.begin(), raw.end());
  if (chosen != nullptr) {
    std::set<std::string> known, all;
    for (CLI::App* sub : subcommands.all()) {
      for (CLI::Option* opt : sub->get_options()) {
        if (opt->get_lnames().empty()) continue;
        const std::string& key = opt->get_lnames()[0];
        // A secret's value may come from a file (--db-file PATH): a key of its own for the
        // config file and the environment, resolved by ReadSecretFiles below.
        const bool secret = SecretKeys().count(key) > 0;
        all.insert(key);
        if (secret) all.insert(key + "-file");
        if (sub == chosen) {
          known.insert(key);
          if (secret) known.insert(key + "-file");
        }
      }
    }
    std::vector<std::string> rest(raw.begin() + static_cast<long>(sub_pos) + 1, raw.end());
    std::string config_path;
    if (const char* env_config = std::getenv("GAPLESS_CONFIG")) config_path = env_config;
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == "--config" && i + 1 < rest.size()) config_path = rest[i + 1];
      if (rest[i].rfind("--config=", 0) == 0) config_path = rest[i].substr(9);
    }
    std::vector<ConfigEntry> config;
    if (!config_path.empty()) {
      GAPLESS_ASSIGN_OR_RETURN(config, ReadConfigFile(config_path));
    }
    GAPLESS_ASSIGN_OR_RETURN(auto layered_args,
                             LayerArguments(rest, known, all, config, config_path, std::getenv));
    GAPLESS_ASSIGN_OR_RETURN(auto args, ReadSecretFiles(layered_args, SecretKeys(), ReadWholeFile));
    layered.assign(raw.begin(), raw.begin() + static_cast<long>(sub_pos) + 1);
    layered.insert(layered.end(), args.begin(), args.end());
  }
  std::reverse(layered.begin(), layered.end());  // CLI11 takes the vector in reverse order
  return layered;
}

void SetUpLogging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_color_mt("gapless");
  spdlog::set_default_logger(logger);
  if (format == "json") {
    spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
  } else {
    spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  }
  spdlog::set_level(spdlog::level::from_str(level));
}

// 0 done; 1 an error (logged) or problems found; 2 an error a human must fix (FailedPrecondition:
// a bad flag, the wrong chain, a dead-lettered range); 130 stopped by SIGINT/SIGTERM.
int ExitCode(const Result<Outcome>& result) {
  if (!result.ok()) {
    spdlog::error("{}", result.status().ToString());
    return result.status().code() == Code::kFailedPrecondition ? kExitUsage : kExitError;
  }
  switch (*result) {
    case Outcome::kDone:
      return kExitOk;
    case Outcome::kStopped:
      return kExitInterrupted;
    case Outcome::kProblemsFound:
      return kExitError;
  }
  return kExitError;
}

Result<IndexingOptions> IndexingOptionsFromFlags(const CommonArgs& common, const IndexArgs& args) {
  IndexingOptions out;
  out.db = common.db;
  out.rpc.url = args.rpc;
  out.rpc.max_attempts = args.max_attempts;
  out.rpc.request_timeout_ms = args.rpc_timeout_ms;
  out.rpc.connect_timeout_ms = args.connect_timeout_ms;
  out.rpc.traces = args.traces;
  out.rpc.hedge = args.rpc_hedge == "on";
  out.token_metadata = args.token_metadata == "on";
  GAPLESS_ASSIGN_OR_RETURN(out.from, ParseBlockBound(args.from, "--from"));
  GAPLESS_ASSIGN_OR_RETURN(out.to, ParseBlockBound(args.to, "--to"));
  out.chain_id = args.chain_id;
  out.range_size = args.range_size;
  out.batch = args.batch;
  out.db_connections = args.db_connections;
  // CLI11 has checked both values.
  out.write_mode =
      args.write_mode == "replace" ? WriteMode::kReplaceRange : WriteMode::kStagingUpsert;
  out.copy_format = *ParseCopyFormat(args.copy_format);
  out.memory_budget_mib = args.memory_budget_mib;
  out.partition_blocks = args.partition_blocks;
  if (args.index_near_head == "always") {
    out.index_near_head = UINT64_MAX;
  } else {
    uint64_t blocks = 0;
    const std::string& v = args.index_near_head;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), blocks);
    if (ec != std::errc() || end != v.data() + v.size()) {
      return FailedPrecondition("--index-near-head " + v +
                                ": expected a number of blocks or 'always'");
    }
    out.index_near_head = blocks;
  }
  out.verify = args.verify;
  out.verify_senders = args.verify_senders;
  out.metrics_addr = common.metrics_addr;
  out.progress = args.progress == "tty"     ? ProgressDisplay::kTty
                 : args.progress == "plain" ? ProgressDisplay::kPlain
                 : args.progress == "off"   ? ProgressDisplay::kOff
                                            : ProgressDisplay::kAuto;
  return out;
}

EventsOptions EventsFromFlags(const Args& a) {
  EventsOptions out;
  out.buses = SplitUrlList(a.events.events);
  out.publisher.confirm_timeout_ms = a.events.confirm_timeout_ms;
  out.mempool = a.events.mempool;
  return out;
}

Result<Outcome> IndexFromFlags(const Args& a) {
  IndexCommand command;
  command.events = EventsFromFlags(a);
  GAPLESS_ASSIGN_OR_RETURN(command.indexing, IndexingOptionsFromFlags(a.common, a.index));
  command.concurrency = a.index.concurrency;
  return RunIndex(command);
}

LeaderElectionOptions ElectionFromFlags(const Args& a) {
  LeaderElectionOptions out;
  out.lock_nodes = SplitUrlList(a.election.lock_nodes);
  out.ttl_ms = a.election.leader_ttl_ms;
  out.node_timeout_ms = a.election.lock_node_timeout_ms;
  out.head_log_window = a.election.head_log_window;
  return out;
}

// run and leader (with_leader) and worker.
Result<Outcome> FleetFromFlags(const Args& a, bool with_leader) {
  FleetCommand command;
  command.election = ElectionFromFlags(a);
  GAPLESS_ASSIGN_OR_RETURN(command.indexing, IndexingOptionsFromFlags(a.common, a.index));
  command.with_leader = with_leader;
  command.redis = a.run.redis;
  command.workers = a.run.workers;
  command.lease_ttl_ms = a.run.lease_ttl_ms;
  command.prefetch = a.run.prefetch == "on";
  command.rate_limit = a.run.rate_limit;
  command.follow = a.run.follow;
  command.confirmations = a.run.confirmations;
  command.max_reorg_depth = a.run.max_reorg_depth;
  command.max_lease_expiries = a.run.max_lease_expiries;
  command.dlq_wait_ms = a.run.dlq_wait_ms;
  command.source = a.run.source == "kafka" ? BlockSourceKind::kKafka : BlockSourceKind::kRpc;
  if (command.source == BlockSourceKind::kKafka && a.index.traces) {
    // The stream's messages carry blocks and receipts, not traces: its blocks would be stored
    // without them.
    return FailedPrecondition(
        "--traces: not with --source kafka yet (the block stream has no "
        "traces); index with --source rpc");
  }
  command.kafka.brokers = a.run.brokers;
  command.kafka.topic = a.run.topic;
  command.kafka.group = a.run.group;
  command.kafka.flush_after_ms = a.run.kafka_flush_ms;
  command.kafka.lock_ttl_ms = a.run.range_lock_ttl_ms;
  command.heal_gaps_after_ms = a.run.heal_gaps_after_ms;
  if (with_leader) command.events = EventsFromFlags(a);
  return RunFleet(command);
}

Result<Outcome> ReconcileFromFlags(const Args& a) {
  return RunReconcile(ReconcileCommand{a.common.db, a.reconcile.redis, a.reconcile.from,
                                       a.reconcile.to, a.reconcile.range_size});
}

Result<Outcome> VerifyFromFlags(const Args& a) {
  VerifyCommand command;
  command.db = a.common.db;
  command.from = a.verify.from;
  GAPLESS_ASSIGN_OR_RETURN(command.to, ParseUpperBound(a.verify.to));
  // --verify-senders asks for a deep check, so it implies --deep (one config file may set
  // verify-senders for index and verify alike). --anvil-blob-roots only relaxes the deep check.
  command.deep = a.verify.deep || a.verify.verify_senders;
  command.verify.recover_senders = a.verify.verify_senders;
  command.verify.anvil_blob_sidecar_quirk = a.verify.anvil_blob_roots;
  return RunVerify(command, std::cout);
}

Result<Outcome> ExportFromFlags(const Args& a) {
  ExportCommand command;
  command.db = a.common.db;
  GAPLESS_ASSIGN_OR_RETURN(command.table, ParseExportTable(a.exp.table));
  if (a.exp.format != "csv") {
    return FailedPrecondition("--format " + a.exp.format + ": only csv is supported");
  }
  GAPLESS_ASSIGN_OR_RETURN(command.options.token_standards,
                           ParseTokenStandards(a.exp.token_standards));
  command.from = a.exp.from;
  GAPLESS_ASSIGN_OR_RETURN(command.to, ParseUpperBound(a.exp.to));
  command.output = a.exp.output;
  return RunExport(command, std::cout);
}

FleetStateOptions FleetStateFromFlags(const Args& a) {
  return FleetStateOptions{a.common.db, a.fleet.redis, a.fleet.chain_id, ElectionFromFlags(a)};
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) {
  using namespace gapless;
  CLI::App app{
      "gapless: a crash-safe EVM blockchain indexer. Pulls blocks, transactions, receipts and "
      "logs from a JSON-RPC node into PostgreSQL with no gap and no duplicate.\n"
      "Every option can also be set with a GAPLESS_<OPTION> environment variable or in a "
      "--config file (`key = value`); flags beat the environment, which beats the file."};
  app.name("gapless");
  app.set_version_flag("--version", "gapless " GAPLESS_VERSION);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  Args a;
  const Subcommands sub = DefineSubcommands(&app, &a);

  auto layered = LayeredCommandLine(argc, argv, sub);
  if (!layered.ok()) {
    std::fprintf(stderr, "gapless: %s\n", layered.status().message().c_str());
    return kExitUsage;
  }
  try {
    app.parse(*layered);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  SetUpLogging(a.common.log_level, a.common.log_format);
  if (sub.index->parsed()) return ExitCode(IndexFromFlags(a));
  if (sub.run->parsed()) return ExitCode(FleetFromFlags(a, /*with_leader=*/true));
  if (sub.leader->parsed()) {
    if (a.run.workers != 0 && sub.leader->count("--workers") > 0) {
      spdlog::error("leader: --workers must be 0 (use run for a candidate with workers)");
      return kExitUsage;
    }
    Args leader_args = a;
    leader_args.run.workers = 0;
    return ExitCode(FleetFromFlags(leader_args, /*with_leader=*/true));
  }
  if (sub.worker->parsed()) return ExitCode(FleetFromFlags(a, /*with_leader=*/false));
  if (sub.reconcile->parsed()) return ExitCode(ReconcileFromFlags(a));
  if (sub.verify->parsed()) return ExitCode(VerifyFromFlags(a));
  if (sub.exp->parsed()) return ExitCode(ExportFromFlags(a));
  if (sub.status->parsed()) {
    return ExitCode(RunStatus({FleetStateFromFlags(a), a.fleet.rpc, SplitUrlList(a.events.bus),
                               SplitUrlList(a.events.groups), a.fleet.redis_replica, a.fleet.json},
                              std::cout));
  }
  if (sub.events_tail->parsed()) {
    return ExitCode(RunEventsTail(
        {a.events.bus, a.events.chain_id, a.events.types, a.events.from_beginning, a.events.count},
        std::cout));
  }
  if (sub.events_replay->parsed()) {
    EventsReplayCommand command;
    command.db = a.common.db;
    command.buses = SplitUrlList(a.events.bus);
    command.from = a.events.from;
    command.to = a.events.to;
    command.publisher.confirm_timeout_ms = a.events.confirm_timeout_ms;
    return ExitCode(RunEventsReplay(command));
  }
  if (sub.events_publish->parsed()) {
    EventsPublishCommand command;
    command.buses = SplitUrlList(a.events.bus);
    command.chain_id = a.events.chain_id;
    command.type = a.events.type;
    command.identity = a.events.identity;
    command.payload = a.events.payload;
    return ExitCode(RunEventsPublish(command, std::cout));
  }
  if (sub.produce->parsed()) {
    ProduceCommand command;
    command.rpc.url = a.index.rpc;
    command.rpc.request_timeout_ms = a.index.rpc_timeout_ms;
    command.brokers = a.events.brokers;
    command.topic = a.events.topic;
    command.batch = a.index.batch;
    command.window = a.events.window;
    auto from = ParseBlockBound(a.index.from, "--from");
    auto to = ParseBlockBound(a.index.to, "--to");
    if (!from.ok() || !to.ok()) {
      spdlog::error("{}", (!from.ok() ? from.status() : to.status()).message());
      return kExitUsage;
    }
    command.from = *from;
    command.to = *to;
    return ExitCode(RunProduce(command));
  }
  if (sub.consume_balances->parsed()) {
    ConsumeBalancesCommand command;
    command.bus = a.events.bus;
    command.db = a.common.db;
    command.redis = a.events.redis;
    command.chain_id = a.events.chain_id;
    command.group = a.events.group;
    command.concurrency = a.events.concurrency;
    command.status_interval_ms = a.events.status_interval_s * 1000;
    command.ordered_types = a.events.ordered;
    command.metrics_addr = a.common.metrics_addr;
    return ExitCode(RunConsumeBalances(command));
  }
  if (sub.dlq->parsed()) {
    if (a.fleet.dlq_action == "retry" && a.fleet.dlq_task.empty()) {
      spdlog::error("dlq retry: name a range FROM-TO, or all");
      return kExitUsage;
    }
    return ExitCode(RunDlq(
        {FleetStateFromFlags(a), a.fleet.dlq_action == "retry", a.fleet.dlq_task}, std::cout));
  }
  return kExitUsage;
}

// flags_node.cc: the flags of index, run, leader and worker (cli/flags.h): the data path (--rpc,
// the block interval, batching, writing, verifying, traces, tokens, progress), the fleet process
// (--redis, workers, leases, following the chain, re-orgs, dead letters, start-up), the HA
// election's lock nodes (status takes them too) and the block source (--source, Kafka's stream).
#include <cstdint>

#include "cli/flags.h"

namespace gapless::cli {
namespace {

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
      ->capture_default_str()
      ->check(CLI::Range(1, 3'600'000));
  sub->add_option("--connect-timeout", index.connect_timeout_ms, "TCP/TLS connect timeout, ms")
      ->capture_default_str()
      ->check(CLI::Range(1, 600'000));
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
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20));
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
  sub->add_flag("--verify-complete", index.verify_complete,
                "With --data events: also prove that eth_getLogs left no matching log out. The "
                "header of every block of each range is fetched and its logsBloom tested against "
                "the filter; each block it admits has its receipts fetched, proven against its "
                "receiptsRoot and their matching logs compared with eth_getLogs's; a difference "
                "fails the range naming the block (retried, never committed). Implies --verify "
                "(not with --no-verify). Costs a header per block and the receipts of the "
                "admitted blocks, counted at the end (docs/contracts.md)");
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
  sub->add_option("--contracts", index.contracts,
                  "A contracts config (YAML, docs/contracts.md): the events of these contracts "
                  "decoded from their ABIs into typed tables in the config's schema, in the same "
                  "write as their blocks. Ranges committed before a table existed (or before its "
                  "contract's addresses, factories or blocks changed) lack it: index decodes them "
                  "from their stored logs (--data full; events mode fetches them again); run and "
                  "worker refuse to start over them and name the index command")
      ->check(CLI::ExistingFile);
  sub->add_option("--data", index.data,
                  "full: every block, transaction, receipt and log (and with --contracts their "
                  "decoded tables, from the logs already fetched); events: with --contracts, only "
                  "the contracts' logs (eth_getLogs, sized per endpoint by the provider's limits) "
                  "and the headers of the blocks holding them, a block without a matching log not "
                  "stored (docs/contracts.md). A database holds one mode")
      ->check(CLI::IsMember({"full", "events"}))
      ->capture_default_str();
  sub->add_option("--rebuild", index.rebuild,
                  "index with --contracts: a table (schema.table or table) whose event the config "
                  "now defines otherwise (its ABI changed) is dropped and made again, and every "
                  "range is written again to refill it; without it such a change is refused")
      ->take_all();
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
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{86'400'000}));
  sub->add_option("--prefetch", a->run.prefetch,
                  "on: each worker fetches and decodes its next range while the last one is "
                  "written (two leases and two decoded parts held; pays where workers leave cores "
                  "idle); off: fetch, write and claim in series")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--rate-limit", a->run.rate_limit,
                  "Fleet-wide JSON-RPC requests per second to this endpoint (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
}

}  // namespace

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

void DefineNodeSubcommands(CLI::App* app, Args* a, Subcommands* out) {
  Subcommands& s = *out;
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
    sub->add_option("--compact-after", a->run.compact_after_seconds,
                    "Merge the bookkeeping rows of committed ranges below the frontier this many "
                    "seconds after their commit, so the table stays small (-1: never; docs/"
                    "schema.md, indexed_ranges)")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{-1}, int64_t{31'536'000}));
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
    sub->add_option("--startup-timeout", a->run.startup_timeout_ms,
                    "Without --follow: give up, naming it, when the node, PostgreSQL or the "
                    "coordination Redis cannot be reached for this long at the start, ms (0: "
                    "wait forever; with --follow the start always waits)")
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
}

}  // namespace gapless::cli

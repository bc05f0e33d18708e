// commands: the gapless subcommands, wired. This is the composition root: each entry function
// takes one options struct (the flags, already parsed by cli/, which owns flag names, help text,
// layered configuration, logging set-up and exit codes), builds what the command needs from the
// parts in node/app.h, runs it, and says how it ended.
//
//   index      RunIndex       the single-process Indexer
//   run        RunFleet       a leader candidate (Elector + Leader duties) + N Workers
//   leader     RunFleet       a leader candidate alone (workers = 0)
//   worker     RunFleet       N Workers (!with_leader): never leads
//   reconcile  RunReconcile   rebuild the coordination Redis from PostgreSQL
//   verify     RunVerify      gaps, duplicates, parent hashes in PostgreSQL; --deep: roots, hashes
//   export     RunExport      CSV in ethereum-etl's format
//   status     RunStatus      the fleet at a glance
//   dlq        RunDlq         list or re-queue dead-lettered ranges
//
// Where new things plug in: a new subcommand (`gapless leader`) gets an options struct and an entry
// function here, built from the parts in node/app.h; a new role of the fleet process (the HA leader
// candidate in place of the single-Redis Leader, the event relay) is built in RunFleet
// (fleet_command.cc) and started there as one more RoleThreads role; a shared option (the lock
// nodes) is a field of FleetCommand or IndexingOptions; another block source (Kafka) is made in
// node/app.h beside MakeRpcClientFactory and handed to the workers RunFleet builds.
//
// Errors: a non-ok Status, already carrying the message the operator sees (naming the flag to
// fix where a flag is at fault); FailedPrecondition means a human must fix something. Progress and
// outcomes are logged (spdlog); a command's own output (status, dlq, verify, export to stdout) goes
// to `out`. Each entry function is called once per process: the long-running ones install the
// SIGINT/SIGTERM handlers (SignalStop).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "node/app.h"
#include "node/range_job.h"
#include "node/relay.h"
#include "store/decoded.h"
#include "store/export.h"
#include "store/state.h"
#include "store/writer.h"

namespace gapless {

// How a command that did not fail ended.
enum class Outcome {
  kDone,           // the work asked for is done
  kStopped,        // SIGINT/SIGTERM stopped it first (the normal end of worker and run --follow)
  kProblemsFound,  // verify: the range has problems, listed on the output
};

// The data path's options, shared by index, run and worker.
struct IndexingOptions {
  std::string db;  // PostgreSQL URL
  RpcOptions rpc;
  BlockBound from{"0", 0};
  BlockBound to{"finalized", std::nullopt};
  uint64_t chain_id = 0;  // expected; 0: the node's
  uint64_t range_size = 50;
  uint32_t batch = 10;  // blocks per JSON-RPC batch request
  uint32_t db_connections = 2;
  WriteMode write_mode = WriteMode::kStagingUpsert;
  CopyFormat copy_format = CopyFormat::kBinary;  // --copy-format (store/copy_rows.h)
  // --memory-budget, MiB for the process; 0: none (node/memory_budget.h).
  uint64_t memory_budget_mib = 256;
  // --partition-blocks: the data tables' partition size for a database without partitions yet;
  // 0: the database's (store/partitions.h).
  uint64_t partition_blocks = 0;
  // --index-near-head: blocks from the run's end within which the leader indexes partitions at
  // once, not when finished (node/index_builder.h); UINT64_MAX: always.
  uint64_t index_near_head = 10'000;
  ProgressDisplay progress = ProgressDisplay::kAuto;
  // --metrics-addr HOST:PORT: /metrics, /healthz, /readyz (node/ops.h); empty: none.
  std::string metrics_addr;
  // --verify / --verify-senders: every block proven against its header before it is written
  // (source/block_source.h BlockChecks, verify/verify.h).
  bool verify = false;
  bool verify_senders = false;
  // --token-metadata: each token's name, symbol, decimals and supply read when it first appears
  // (node/enrich.h).
  bool token_metadata = true;
  // --contracts FILE: the contracts mode's decoded tables (store/decoded.h); null: none. --rebuild
  // TABLE: tables whose changed event definition is accepted by making them again.
  std::shared_ptr<const ContractTables> contracts;
  std::vector<std::string> rebuild;
  // --data events: only the contracts' matching logs and their blocks (docs/contracts.md).
  bool events_only = false;
  // --verify-complete (with --data events): each range's eth_getLogs answer proven complete from
  // the receipts of the blocks whose logsBloom admits the filter (node/events_complete.h).
  bool verify_complete = false;
  // What a run asks for besides the blocks (store/datasets.h): traces with --traces,
  // token_metadata with --token-metadata, one dataset per decoded table with --contracts.
  Datasets AskedDatasets() const {
    Datasets asked;
    if (rpc.traces) asked.Add(kTracesDataset);
    if (token_metadata) asked.Add(kTokenMetadataDataset);
    if (contracts != nullptr) {
      for (const std::string& d : contracts->datasets().names()) asked.Add(d);
    }
    return asked;
  }
  // What --data events fetches (the eth_getLogs filter, --verify-complete); nullopt in full mode.
  std::optional<EventsFetch> EventsFilter() const {
    if (!events_only || contracts == nullptr) return std::nullopt;
    EventsFetch fetch;
    fetch.verify_complete = verify_complete;
    if (contracts->has_factories()) {
      // Every address, by topic 0 (store/decoded.h FactoryFilterTopic0s, KeepMatching).
      fetch.filter.topic0s = contracts->FactoryFilterTopic0s();
      return fetch;
    }
    fetch.filter.addresses = contracts->FilterAddresses();
    fetch.filter.topic0s = contracts->FilterTopic0s();
    return fetch;
  }
  ChainRequest Chain() const {
    ChainRequest request;
    request.from = from;
    request.to = to;
    request.expected_chain_id = chain_id;
    request.partition_blocks = partition_blocks;
    request.contracts = contracts.get();
    request.rebuild = rebuild;
    request.data_mode = events_only ? "events" : "full";
    return request;
  }
  std::optional<VerifyOptions> Verification() const {
    if (!verify && !verify_senders) return std::nullopt;
    VerifyOptions options;
    options.recover_senders = verify_senders;
    return options;
  }
};

struct IndexCommand {
  IndexingOptions indexing;
  uint32_t concurrency = 4;  // fetch threads
  EventsOptions events;      // the relay, in process (node/relay.h)
};

// Indexes from..to, then (with events) waits until every bus confirmed the range's events.
// kStopped after a signal (committed ranges are kept; the same command continues). Errors: the
// node's, the database's, and the first range that failed for good.
Result<Outcome> RunIndex(const IndexCommand& command);

// Where a fleet's workers take their blocks from.
enum class BlockSourceKind {
  kRpc,    // ranges from the Redis work queue, fetched over --rpc
  kKafka,  // a Kafka block stream (docs/kafka-blocks.md), node/kafka_worker.h
};

struct KafkaSourceOptions {
  std::string brokers;  // host:port[,host:port...]
  std::string topic;
  std::string group = "gapless-blocks";
  int64_t flush_after_ms = 2'000;  // KafkaWorkerOptions
  int64_t lock_ttl_ms = 60'000;
};

struct FleetCommand {
  IndexingOptions indexing;
  // worker: kKafka runs `workers` Kafka consumers (and, with --rpc, one queue worker fetching the
  // gaps the leader queues); run: the same beside the leader; run and leader: kKafka makes the
  // leader seed only gaps open longer than heal_gaps_after_ms (LeaderOptions).
  BlockSourceKind source = BlockSourceKind::kRpc;
  KafkaSourceOptions kafka;
  int64_t heal_gaps_after_ms = 30'000;
  // run and leader: a candidate for the HA leader (elected on the lock nodes; while leading it
  // writes the head log and runs the seeder/janitor/frontier duties) beside the workers (none for
  // leader); worker: only workers, which never lead.
  bool with_leader = true;
  LeaderElectionOptions election;
  std::string redis;     // coordination Redis URL
  uint32_t workers = 4;  // worker threads; 0 only with_leader
  int64_t lease_ttl_ms = 30'000;
  bool prefetch = false;  // WorkerOptions::prefetch (--prefetch)
  double rate_limit = 0;  // fleet-wide requests per second to the endpoint; 0: none
  // with_leader: keep seeding as `to` (a tag) moves, staying `confirmations` blocks behind it.
  bool follow = false;
  uint64_t confirmations = 0;
  // with_leader: the deepest chain re-org rolled back (node/leader.h "Re-orgs").
  uint64_t max_reorg_depth = 64;
  // with_leader: indexed_ranges rows below the frontier are merged this long after their commit
  // (LeaderOptions::compact_after_seconds; negative: never).
  int64_t compact_after_seconds = kCompactAfterSeconds;
  int64_t max_lease_expiries = 10;
  // with_leader, a bounded run: how long a dead-lettered range may block it before it exits
  // (LeaderOptions::give_up_when_stuck_ms; 0: wait for `gapless dlq retry` forever).
  int64_t dlq_wait_ms = 30'000;
  // with_leader, not following: how long the start waits for the node, PostgreSQL and the
  // coordination Redis before it gives up naming the one away (node/startup.h; 0: forever).
  int64_t startup_timeout_ms = 60'000;
  // with_leader: the event relay, a leader duty (node/relay.h).
  EventsOptions events;
};

// Runs the fleet process until the fixed range is done (kDone; with_leader only), a signal
// (kStopped), or the first fatal error of any role, which stops the others.
Result<Outcome> RunFleet(const FleetCommand& command);

struct ReconcileCommand {
  std::string db;
  std::string redis;
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t range_size = 50;
};

// node/reconcile.h Reconcile for the chain recorded in the database.
Result<Outcome> RunReconcile(const ReconcileCommand& command);

struct VerifyCommand {
  std::string db;
  uint64_t from = 0;
  std::optional<uint64_t> to;  // nullopt: the highest indexed block
  // --deep: also prove every stored block against its own header from its rows
  // (node/deep_verify.h); `verify` holds --verify-senders and --anvil-blob-roots.
  bool deep = false;
  VerifyOptions verify;
};

// Writes the report to `out` (store/queries.h VerifyReport::Render); kProblemsFound when it lists
// problems (a deep-check failure included; a block that is not verifiable is not a problem).
Result<Outcome> RunVerify(const VerifyCommand& command, std::ostream& out);

struct ExportCommand {
  std::string db;
  ExportTable table = ExportTable::kBlocks;
  // "schema.table": this decoded table (store/export.h "Decoded tables") in place of `table`.
  std::string decoded_table;
  uint64_t from = 0;
  std::optional<uint64_t> to;  // nullopt: the highest indexed block
  ExportOptions options;
  std::string output = "-";  // a file, or "-" for `out`
};

Result<Outcome> RunExport(const ExportCommand& command, std::ostream& out);

// The coordination state of the chain recorded in the database, or of chain_id.
struct FleetStateOptions {
  std::string db;
  std::string redis;
  uint64_t chain_id = 0;           // 0: the chain recorded in the database
  LeaderElectionOptions election;  // status: the lock nodes to show
};

struct StatusCommand {
  FleetStateOptions fleet;
  std::string rpc;  // optional: the chain head, for the lag
  // optional: consumer groups whose lag to show, on each of these buses
  std::vector<std::string> buses;
  std::vector<std::string> groups;
  // optional: a replica of the coordination Redis (--redis-replica) that serves the display data
  // (key count and memory, Redis frontier, queue depths, leases, workers) instead of the primary.
  // Display only: no coordination path reads it.
  std::string redis_replica;
  bool json = false;  // --json: one JSON object (node/status.h StatusJson) instead of the text
};

// The leader (host, pid, epoch, since), each lock node's view (holder, epoch, log length,
// reachable), the head log's committed height, the coordination Redis's keys, memory and each
// replica's lag (warned above 5 s), the key-count history with a warning when it keeps growing
// (coord/key_watch.h; each run adds a sample, at most one a minute), frontier (Redis and
// PostgreSQL), queue depths, leases, dead letters, live workers, lag; events: the outbox backlog,
// each bus's cursor (last published block, events sent, when), and the lag of the named consumer
// groups. With redis_replica the display data comes from that replica (a line says so, with its
// lag; an unreachable replica falls back to the primary); the primary still serves the replicas'
// lag and the key-count samples, which are writes.
Result<Outcome> RunStatus(const StatusCommand& command, std::ostream& out);

// `gapless events tail`: envelopes from a bus as JSON lines, like kcat.
struct EventsTailCommand {
  std::string bus;                 // URL
  uint64_t chain_id = 0;           // the topics' chain
  std::vector<std::string> types;  // event types; empty: every type
  bool from_beginning = false;     // also what the bus still holds from before
  uint64_t count = 0;              // stop after this many (0: until a signal)
};
// Writes one envelope per line to `out` (flushed per line).
Result<Outcome> RunEventsTail(const EventsTailCommand& command, std::ostream& out);

// `gapless events replay`: publishes the events of committed blocks from..to again, built from
// the database's rows exactly as the relay builds them (the same ids and bytes). The relay's
// cursors are not touched.
struct EventsReplayCommand {
  std::string db;
  std::vector<std::string> buses;
  uint64_t from = 0;
  uint64_t to = 0;
  PublisherOptions publisher;
  size_t batch_blocks = 100;
  // --contracts: the decoded events too (node/relay.h CommittedBlockEvents); null: none.
  std::shared_ptr<const ContractTables> contracts;
};
Result<Outcome> RunEventsReplay(const EventsReplayCommand& command);

// `gapless events publish`: one event of another producer (contract.verified from a verification
// service, ...) in the standard envelope (events/event.h ProducerEvent), confirmed by each bus.
struct EventsPublishCommand {
  std::vector<std::string> buses;
  uint64_t chain_id = 0;
  std::string type;
  std::string identity;  // the object's key: the event id is derived from it
  std::string payload;   // a JSON object
  PublisherOptions publisher;
};
// Writes the event id to `out`.
Result<Outcome> RunEventsPublish(const EventsPublishCommand& command, std::ostream& out);

// `gapless produce`: publishes blocks from..to of an RPC node to a Kafka topic in the block-stream
// format (docs/kafka-blocks.md): one message per block, the eth_getBlockByNumber(n, true) object
// with an added "receipts" array, key = the block number in decimal.
struct ProduceCommand {
  RpcOptions rpc;
  std::string brokers;  // host:port[,host:port...]
  std::string topic;
  BlockBound from{"0", 0};
  BlockBound to{"latest", std::nullopt};
  uint32_t batch = 10;  // blocks per JSON-RPC batch and per Kafka batch
  // Blocks n with the same n / window go to partition (n / window) mod partitions, so a Kafka
  // worker receives each range of `window` blocks whole; 0: the partitioner hashes the key.
  uint64_t window = 50;
  PublisherOptions publisher;
};
Result<Outcome> RunProduce(const ProduceCommand& command);

// `gapless consume balances`: the balances consumer (events/balances.h) on a bus: keeps
// token_balances in `db` from the chain's token.transfer events, each applied once.
struct ConsumeBalancesCommand {
  std::string bus;    // URL
  std::string db;     // the balances database (may be the indexer's)
  std::string redis;  // processing keys
  uint64_t chain_id = 0;
  std::string group = "balances";
  size_t concurrency = 4;
  int64_t status_interval_ms = 30'000;
  // Event types consumed in order per partition (ConsumerOptions::ordered_topics); "all" for
  // every type, "none" (or empty) for none.
  std::vector<std::string> ordered_types = {"block.new", "block.reverted"};
  std::string metrics_addr;  // --metrics-addr (node/ops.h); empty: none
};
// Runs until a signal (kStopped) or a fatal error.
Result<Outcome> RunConsumeBalances(const ConsumeBalancesCommand& command);

struct DlqCommand {
  FleetStateOptions fleet;
  bool retry = false;  // false: list
  std::string task;    // retry: "from-to" or "all"
};

Result<Outcome> RunDlq(const DlqCommand& command, std::ostream& out);

}  // namespace gapless

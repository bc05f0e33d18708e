// status: what `gapless status` shows, gathered once into a StatusReport and rendered as the text
// report or as JSON (`gapless status --json`, and /status.json of a long-running process's ops
// endpoint, which the live status page reads: node/ops_server.h).
//
// Gathering never fails on a server that does not answer where the report can say so instead
// (status is for bad days too): an unreachable lock node, replica or bus is a line in the report.
// It fails when PostgreSQL or the coordination Redis cannot be read at all.
//
// Nothing in a report carries a secret: servers are named by host:port or by redacted URLs
// (core/redact.h).
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "node/app.h"
#include "node/commands.h"
#include "rpc/endpoint_pool.h"
#include "store/datasets.h"

namespace gapless {

// The database and the coordination state of a fleet, opened for reading (status, dlq).
struct FleetState {
  std::unique_ptr<PgPool> pool;
  uint64_t chain_id = 0;
  // A pointer, not an optional: GCC 12 at -O3 reported the optional's payload "may be used
  // uninitialized" in RunDlq (a false positive, but noise in every build).
  std::unique_ptr<Coordination> coord;
};
Result<FleetState> OpenFleetState(const FleetStateOptions& options);

struct StatusReport {
  uint64_t chain_id = 0;
  std::string key_prefix;
  int64_t now_ms = 0;  // Redis TIME of the report

  struct LockNode {
    std::string name;  // host:port
    bool reachable = false;
    std::string error;
    std::string holder;  // "" when free
    uint64_t epoch = 0;
    uint64_t log_length = 0;
    std::optional<uint64_t> top_height;
  };
  struct Leader {
    bool known = false;     // a holder is on a quorum of lock nodes
    std::string text;       // the text report's words after "leader"
    std::string host, pid;  // when known
    uint64_t epoch = 0;
    uint64_t since_ms = 0;  // 0: unknown
    size_t on_nodes = 0;
  } leader;
  std::vector<LockNode> lock_nodes;
  size_t quorum = 0;
  std::string head_log;  // the text report's words after "head log"
  std::optional<uint64_t> head_log_committed;

  // The coordination Redis (memory, replicas, key-count history, the display source), as the
  // text report's lines.
  std::vector<std::string> redis_lines;

  std::optional<uint64_t> frontier_pg;     // the next block not known to be committed
  std::optional<uint64_t> frontier_redis;  // the same, as the fleet's Redis has it
  std::optional<uint64_t> head;            // the chain head (with an RPC node)
  std::string head_text;                   // "17000000", "unknown (no --rpc)", "unavailable: ..."
  // Block partitions without (all) their secondary indexes yet: the backfill index strategy
  // (store/partition_indexes.h) builds them when each is due; until then a lookup by hash or
  // address reads them whole. The lowest one's first block.
  uint64_t partitions_unindexed = 0;
  std::optional<uint64_t> unindexed_lowest;
  // Committed blocks that lack a dataset a run asked for over them (store/datasets.h
  // MissingRequestedDatasets, what `verify` reports): an `index` run with that option writes it.
  std::vector<DatasetGap> missing_datasets;
  // The contracts mode: per decoded table ("schema.table"), the latest dataset a run asked for
  // it (store/decoded.h DecodedTableDataset) from `from` on, and the cursor: every committed block
  // from `from` through `through` holds it (nullopt: not one yet). Blocks above the frontier are
  // not committed, so the cursor stops below it.
  struct TableCursor {
    std::string table;
    uint64_t from = 0;
    std::optional<uint64_t> through;
  };
  std::vector<TableCursor> decoded_tables;
  uint64_t reorgs = 0;
  uint64_t last_reorg_depth = 0, last_reorg_fork_point = 0;
  std::string last_reorg_at;
  struct Gap {
    uint64_t from = 0, to = 0;
    double open_s = 0;
    bool healing = false;
  };
  std::optional<Gap> gap;

  int64_t pending = 0, processing = 0, dead_lettered = 0;
  struct Lease {
    std::string task, worker;
    int64_t token = 0;
    int64_t expires_in_ms = 0;  // negative: expired
  };
  std::vector<Lease> leases;

  bool events_on = false;
  uint64_t events_from = 0;
  uint64_t outbox_blocks = 0, outbox_events = 0;
  std::optional<uint64_t> outbox_lowest, outbox_highest;
  struct Bus {
    std::string bus;  // the bus's name (its cursor key), no password
    std::optional<uint64_t> published_through;
    uint64_t events_sent = 0;
    std::string published_at;
    uint64_t epoch = 0;
  };
  std::vector<Bus> buses;
  struct Group {
    std::string group, bus;  // bus: BusName, redacted
    std::optional<int64_t> lag;
    std::string error;
  };
  std::vector<Group> groups;

  struct Worker {
    std::string worker, host;
    int64_t pid = 0;
    std::string range;  // "" when idle
    double blocks_per_s = 0;
    int64_t beat_ms_ago = 0;
  };
  std::vector<Worker> workers;

  // The RPC endpoint pools of the live fleet processes (rpc/endpoint_pool.h), summed per endpoint
  // over the processes that publish one (Keys::rpc_pool).
  struct RpcEndpoint {
    EndpointStats totals;  // counts summed; latency the mean; in/cooling: in every process
    size_t processes = 0;  // that use it
    size_t out_in = 0;     // of which have it taken out
  };
  std::vector<RpcEndpoint> rpc_endpoints;

  // Every line of the report that says WARNING, without the word.
  std::vector<std::string> warnings;
};

// Gathers the report of the fleet that `fleet` opened (see StatusCommand for what it reads).
Result<StatusReport> GatherStatus(FleetState& fleet, const StatusCommand& command);

// The text report (the format `gapless status` has always printed).
void WriteStatusText(const StatusReport& report, std::ostream& out);

// One JSON object (docs/operations.md "/status.json"), for --json and /status.json.
std::string StatusJson(const StatusReport& report);

}  // namespace gapless

// args: what the gapless flags say, as CLI11 binds them: one struct per family of flags (common,
// the data path, the HA election, the fleet process, the database tools, the fleet's state, the
// events), gathered in Args, and Subcommands, the CLI::App of each subcommand. The initial values
// are the documented defaults (--help shows them). The flags themselves, with their help, are
// defined in cli/flags*.cc; cli/from_flags.cc turns them into node/'s options. Plain data, filled
// once by CLI11's parse; not thread-safe.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/state.h"

namespace gapless::cli {

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
  bool verify_complete = false;  // --verify-complete, with --data events
  bool traces = false;
  std::string rpc_hedge = "on";
  std::string token_metadata = "on";
  std::string contracts;             // --contracts FILE (docs/contracts.md); "": none
  std::vector<std::string> rebuild;  // --rebuild TABLE
  std::string data = "full";         // --data full|events
};

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
  int64_t compact_after_seconds = kCompactAfterSeconds;  // --compact-after
  int64_t max_lease_expiries = 10;
  int64_t dlq_wait_ms = 30'000;
  std::string source = "rpc";  // rpc | kafka
  std::string brokers;
  std::string topic;
  std::string group = "gapless-blocks";
  int64_t kafka_flush_ms = 2'000;
  int64_t range_lock_ttl_ms = 60'000;
  int64_t heal_gaps_after_ms = 30'000;
  int64_t startup_timeout_ms = 60'000;
};

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

}  // namespace gapless::cli

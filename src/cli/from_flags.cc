// from_flags.cc: the flags of each subcommand turned into its node/commands.h options and run
// (cli/from_flags.h): one XFromFlags per subcommand, in --help's order, then the dispatch.
#include "cli/from_flags.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdint>
#include <iostream>
#include <string>

#include "abi/config.h"
#include "cli/block_bounds.h"
#include "cli/exit_code.h"
#include "coord/lock_nodes.h"
#include "core/status.h"
#include "node/commands.h"
#include "store/copy_rows.h"
#include "store/decoded.h"
#include "store/export.h"

namespace gapless::cli {
namespace {

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
  if (!args.contracts.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(abi::ContractsConfig config, abi::LoadContractsConfig(args.contracts));
    GAPLESS_ASSIGN_OR_RETURN(ContractTables tables, ContractTables::Make(config));
    out.contracts = std::make_shared<const ContractTables>(std::move(tables));
  } else if (!args.rebuild.empty()) {
    return FailedPrecondition(
        "--rebuild needs --contracts: it names a table of a contracts config");
  }
  out.rebuild = args.rebuild;
  out.events_only = args.data == "events";
  if (out.events_only && out.contracts == nullptr) {
    return FailedPrecondition("--data events needs --contracts: it fetches only their logs");
  }
  if (out.events_only && args.traces) {
    return FailedPrecondition("--data events keeps no transactions: --traces needs --data full");
  }
  if (out.events_only) out.token_metadata = false;  // no token transfers in events mode
  if (out.events_only && out.contracts->has_factories() &&
      out.contracts->FactoryFilterTopic0s().empty()) {
    return FailedPrecondition(
        "--data events: the contracts config names a factory and selects an anonymous event: "
        "with a factory, events mode asks every address for the selected events' topic 0s, and "
        "an anonymous event has none; select named events (events: [...]) or use --data full "
        "(docs/contracts.md)");
  }
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
  if (args.verify_complete) {
    // In full mode every receipt is fetched and, with --verify, proven already.
    if (!out.events_only) {
      return FailedPrecondition(
          "--verify-complete needs --data events: in full mode every block's receipts are "
          "fetched and proven (--verify) already");
    }
    if (!args.verify) {
      return FailedPrecondition(
          "--verify-complete proves more than --verify and implies it: not with --no-verify");
    }
    out.verify_complete = true;
  }
  out.metrics_addr = common.metrics_addr;
  out.progress = args.progress == "tty"     ? ProgressDisplay::kTty
                 : args.progress == "plain" ? ProgressDisplay::kPlain
                 : args.progress == "off"   ? ProgressDisplay::kOff
                                            : ProgressDisplay::kAuto;
  return out;
}

// The event relay publishes whole blocks (their transactions, transfers, traces) from the outbox;
// an events-mode database stores only the blocks with matching logs, without transactions.
Status CheckEventsWithData(const Args& a) {
  if (a.index.data == "events" && !a.events.events.empty()) {
    return FailedPrecondition(
        "--events: not with --data events yet (the events are built from "
        "whole blocks; docs/contracts.md)");
  }
  return Status::Ok();
}

// `indexing`: the run's data path, whose --contracts the relay publishes the decoded events of.
EventsOptions EventsFromFlags(const Args& a, const IndexingOptions& indexing) {
  EventsOptions out;
  out.contracts = indexing.contracts;
  out.buses = SplitUrlList(a.events.events);
  out.publisher.confirm_timeout_ms = a.events.confirm_timeout_ms;
  out.mempool = a.events.mempool;
  return out;
}

Result<Outcome> IndexFromFlags(const Args& a) {
  IndexCommand command;
  GAPLESS_RETURN_IF_ERROR(CheckEventsWithData(a));
  GAPLESS_ASSIGN_OR_RETURN(command.indexing, IndexingOptionsFromFlags(a.common, a.index));
  command.events = EventsFromFlags(a, command.indexing);
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
  command.compact_after_seconds = a.run.compact_after_seconds;
  command.max_lease_expiries = a.run.max_lease_expiries;
  command.dlq_wait_ms = a.run.dlq_wait_ms;
  command.startup_timeout_ms = a.run.startup_timeout_ms;
  command.source = a.run.source == "kafka" ? BlockSourceKind::kKafka : BlockSourceKind::kRpc;
  if (command.source == BlockSourceKind::kKafka && a.index.traces) {
    // The stream's messages carry blocks and receipts, not traces: its blocks would be stored
    // without them.
    return FailedPrecondition(
        "--traces: not with --source kafka yet (the block stream has no "
        "traces); index with --source rpc");
  }
  if (!a.index.rebuild.empty()) {
    // The table would be dropped, and the fleet refuses ranges lacking it: only `index` refills.
    return FailedPrecondition(
        "--rebuild: with `gapless index`, which refills the table; run and "
        "worker refuse to start over ranges that lack it");
  }
  if (command.source == BlockSourceKind::kKafka && a.index.data == "events") {
    // The stream carries whole blocks; events mode asks the node for logs.
    return FailedPrecondition("--data events: not with --source kafka (use --source rpc)");
  }
  command.kafka.brokers = a.run.brokers;
  command.kafka.topic = a.run.topic;
  command.kafka.group = a.run.group;
  command.kafka.flush_after_ms = a.run.kafka_flush_ms;
  command.kafka.lock_ttl_ms = a.run.range_lock_ttl_ms;
  command.heal_gaps_after_ms = a.run.heal_gaps_after_ms;
  if (with_leader) {
    GAPLESS_RETURN_IF_ERROR(CheckEventsWithData(a));
    command.events = EventsFromFlags(a, command.indexing);
  }
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
  if (IsDecodedTableName(a.exp.table)) {
    command.decoded_table = a.exp.table;
  } else {
    GAPLESS_ASSIGN_OR_RETURN(command.table, ParseExportTable(a.exp.table));
  }
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

Result<Outcome> StatusFromFlags(const Args& a) {
  return RunStatus({FleetStateFromFlags(a), a.fleet.rpc, SplitUrlList(a.events.bus),
                    SplitUrlList(a.events.groups), a.fleet.redis_replica, a.fleet.json},
                   std::cout);
}

Result<Outcome> DlqFromFlags(const Args& a) {
  return RunDlq({FleetStateFromFlags(a), a.fleet.dlq_action == "retry", a.fleet.dlq_task},
                std::cout);
}

Result<Outcome> EventsTailFromFlags(const Args& a) {
  return RunEventsTail(
      {a.events.bus, a.events.chain_id, a.events.types, a.events.from_beginning, a.events.count},
      std::cout);
}

Result<Outcome> EventsReplayFromFlags(const Args& a) {
  EventsReplayCommand command;
  command.db = a.common.db;
  command.buses = SplitUrlList(a.events.bus);
  command.from = a.events.from;
  command.to = a.events.to;
  command.publisher.confirm_timeout_ms = a.events.confirm_timeout_ms;
  if (!a.index.contracts.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(abi::ContractsConfig config,
                             abi::LoadContractsConfig(a.index.contracts));
    GAPLESS_ASSIGN_OR_RETURN(ContractTables tables, ContractTables::Make(config));
    command.contracts = std::make_shared<const ContractTables>(std::move(tables));
  }
  return RunEventsReplay(command);
}

Result<Outcome> EventsPublishFromFlags(const Args& a) {
  EventsPublishCommand command;
  command.buses = SplitUrlList(a.events.bus);
  command.chain_id = a.events.chain_id;
  command.type = a.events.type;
  command.identity = a.events.identity;
  command.payload = a.events.payload;
  return RunEventsPublish(command, std::cout);
}

// from and to: --from and --to, already parsed (RunParsedSubcommand).
Result<Outcome> ProduceFromFlags(const Args& a, const BlockBound& from, const BlockBound& to) {
  ProduceCommand command;
  command.rpc.url = a.index.rpc;
  command.rpc.request_timeout_ms = a.index.rpc_timeout_ms;
  command.brokers = a.events.brokers;
  command.topic = a.events.topic;
  command.batch = a.index.batch;
  command.window = a.events.window;
  command.from = from;
  command.to = to;
  return RunProduce(command);
}

Result<Outcome> ConsumeBalancesFromFlags(const Args& a) {
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
  return RunConsumeBalances(command);
}

}  // namespace

// The checks here that end with kExitUsage log the bare message (no "FAILED_PRECONDITION: "), as
// the command line's own checks print theirs.
int RunParsedSubcommand(const Subcommands& sub, const Args& a) {
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
  if (sub.status->parsed()) return ExitCode(StatusFromFlags(a));
  if (sub.events_tail->parsed()) return ExitCode(EventsTailFromFlags(a));
  if (sub.events_replay->parsed()) return ExitCode(EventsReplayFromFlags(a));
  if (sub.events_publish->parsed()) return ExitCode(EventsPublishFromFlags(a));
  if (sub.produce->parsed()) {
    auto from = ParseBlockBound(a.index.from, "--from");
    auto to = ParseBlockBound(a.index.to, "--to");
    if (!from.ok() || !to.ok()) {
      spdlog::error("{}", (!from.ok() ? from.status() : to.status()).message());
      return kExitUsage;
    }
    return ExitCode(ProduceFromFlags(a, *from, *to));
  }
  if (sub.consume_balances->parsed()) return ExitCode(ConsumeBalancesFromFlags(a));
  if (sub.dlq->parsed()) {
    if (a.fleet.dlq_action == "retry" && a.fleet.dlq_task.empty()) {
      spdlog::error("dlq retry: name a range FROM-TO, or all");
      return kExitUsage;
    }
    return ExitCode(DlqFromFlags(a));
  }
  return kExitUsage;
}

}  // namespace gapless::cli

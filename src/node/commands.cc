// The subcommands that run to completion in one thread: index, reconcile, verify, export, status
// and dlq. run and worker are in fleet_command.cc.
#include "node/commands.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <thread>

#include "coord/key_watch.h"
#include "coord/queue.h"
#include "coord/registry.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/deep_verify.h"
#include "node/duties.h"
#include "node/index_builder.h"
#include "node/indexer.h"
#include "node/node_metrics.h"
#include "node/ops.h"
#include "node/progress.h"
#include "node/reconcile.h"
#include "node/status.h"
#include "store/export.h"
#include "store/migrate.h"
#include "store/outbox.h"
#include "store/queries.h"
#include "store/rollback.h"
#include "store/state.h"

namespace gapless {

namespace {

// Waits until every relay has published the fixed range, one stopped with an error, or a signal.
// Bounded (issue 35): a bus that confirms nothing for 3 x --events-timeout ends the wait with
// Unavailable naming it, rather than a run that never exits; its relay continues where it left
// off at the next run (the outbox keeps the events).
Status WaitForRelays(const EventRelays& relays, int64_t confirm_timeout_ms) {
  const auto stall_limit = std::chrono::milliseconds(3 * std::max<int64_t>(confirm_timeout_ms, 1));
  SignalStop drain;
  uint64_t published = relays.events_published();
  auto progressed = std::chrono::steady_clock::now();
  while (!relays.done() && !drain.flag().load() && relays.FirstError().ok()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = std::chrono::steady_clock::now();
    if (relays.events_published() != published) {
      published = relays.events_published();
      progressed = now;
    } else if (now - progressed > stall_limit && !relays.done()) {
      return Unavailable(fmt::format(
          "the event bus {} confirmed no event for {:.1f} s (3 x --events-timeout): the blocks "
          "are committed, their events wait in the outbox; the next run publishes them",
          relays.Unfinished(), static_cast<double>(stall_limit.count()) / 1e3));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Outcome> RunIndex(const IndexCommand& command) {
  const IndexingOptions& args = command.indexing;
  GAPLESS_ASSIGN_OR_RETURN(Ops ops, StartOps(args.metrics_addr));
  ops.SetStarting("checking the node and opening the database");
  ops.Add("postgresql", PostgresProbe(args.db));
  std::shared_ptr<EndpointPool> rpc_pool;  // with several --rpc endpoints
  RpcClientFactory make_client = MakeRpcClientFactory(args.rpc, &rpc_pool);
  ops.Add("rpc node", RpcProbe(args.rpc, rpc_pool), kRpcProbeInterval);
  auto rpc = make_client();
  GAPLESS_ASSIGN_OR_RETURN(
      CheckedChain chain,
      CheckChain(*rpc, args.Chain(), args.db, args.db_connections + command.events.buses.size()));

  IndexerOptions options;
  options.from = chain.from;
  options.to = chain.to;
  options.range_size = args.range_size;
  options.blocks_per_request = args.batch;
  options.fetch_workers = command.concurrency;
  options.max_attempts = args.rpc.max_attempts;
  options.chain_id = chain.chain_id;
  options.verify = VerificationFor(chain, args.Verification());
  options.token_metadata = args.token_metadata;
  options.contracts = args.contracts.get();
  options.events_filter = args.EventsFilter();
  options.datasets = args.AskedDatasets();
  options.write_mode = args.write_mode;
  options.copy_format = args.copy_format;
  options.memory_budget_bytes = args.memory_budget_mib * MemoryBudget::kMiB;
  Indexer indexer(options, make_client, chain.pool.get());
  {
    // Recorded first, so a run stopped before its backfill is done leaves verify something to
    // report (store/datasets.h).
    auto conn = chain.pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(RecordDatasetRequest(*conn, options.datasets, chain.from, chain.to));
    // `index` does not follow the tip: what it writes is history (store/outbox.h "Phase").
    GAPLESS_RETURN_IF_ERROR(RecordLiveFrom(*conn, std::nullopt));
  }
  GAPLESS_ASSIGN_OR_RETURN(uint64_t planned, indexer.Plan());
  uint64_t requested = chain.to - chain.from + 1;
  if (indexer.planned_backfill() > 0) {
    spdlog::info(
        "indexing blocks {}..{} of chain {}: {} to do, {} already committed; {} of those to do "
        "are committed without all of ({}) and are written again with them",
        chain.from, chain.to, chain.chain_id, planned, requested - planned,
        indexer.planned_backfill(), options.datasets.ToString());
  } else {
    spdlog::info("indexing blocks {}..{} of chain {}: {} to do, {} already committed", chain.from,
                 chain.to, chain.chain_id, planned, requested - planned);
  }

  Progress progress(&indexer.counters(), planned, ShowsLiveBar(args.progress), Env::Default());
  if (args.progress != ProgressDisplay::kOff) progress.Start();
  // The leader's duties, in process under a local lease (node/duties.h): the frontier.
  LocalLease lease;
  FrontierDuty frontier(chain.pool.get(), chain.from, chain.to);
  DutyHost duties(&lease, /*tick_ms=*/500, "index");
  duties.Add(&frontier);
  // The frontier moves as soon as a range commits (NOTIFY), not at the next tick.
  Result<std::unique_ptr<PgWaker>> waker = PgWaker::Open(
      chain.pool->url(), {std::string(kRangeCommittedChannel)}, chain.pool->options());
  if (waker.ok()) duties.set_waker(waker->get());
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<EventRelays> relays,
                           EventRelays::Open(command.events, chain.pool.get(), chain.chain_id,
                                             chain.from, chain.to, &lease, make_client));
  std::atomic<bool> relays_stop{false};
  relays->Start(relays_stop);
  // The partitions' secondary indexes, built as they finish (node/index_builder.h).
  IndexBuilderOptions builder_options;
  builder_options.near_head = args.index_near_head;
  builder_options.to = chain.to;
  IndexBuilder builder(chain.pool->url(), chain.pool->options(), builder_options, &lease,
                       [&frontier] { return frontier.frontier(); });
  std::atomic<bool> builder_stop{false};
  Status builder_status;
  std::atomic<bool> builder_over{false};
  std::thread builder_thread([&] {
    builder_status = builder.Run(builder_stop);
    builder_over = true;
  });
  std::atomic<bool> indexing_over{false};
  Status duties_status;
  std::thread duties_thread([&] { duties_status = duties.Run(indexing_over); });
  Status st;
  ops.SetStarted();
  {
    SignalStop signals(&indexer);
    st = indexer.Run();
  }
  indexing_over = true;
  duties_thread.join();
  // A last step: the frontier over everything committed.
  if (duties_status.ok()) duties_status = duties.Tick();
  Status relays_stalled;
  if (st.ok() && duties_status.ok() && relays->size() > 0 && !relays->done()) {
    spdlog::info("waiting for the event buses to confirm the range's events");
    relays_stalled = WaitForRelays(*relays, command.events.publisher.confirm_timeout_ms);
  }
  if (st.ok() && duties_status.ok() && !builder_over.load()) {
    spdlog::info(
        "building the secondary indexes of the partitions written (^C stops; the next "
        "run builds the rest)");
    SignalStop drain;
    while (!builder_over.load() && !drain.flag().load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  builder_stop = true;
  builder_thread.join();
  relays_stop = true;
  Status relays_status = relays->Join();
  progress.Stop();
  spdlog::info("{}", progress.Summary());
  if (const uint64_t stored = indexer.counters().decoded_from_store.load(); stored > 0) {
    spdlog::info(
        "{} committed blocks lacked only the contracts config's tables: decoded from their stored "
        "logs, nothing fetched or written again",
        stored);
  }
  if (args.verify_complete) {
    const CompletenessTotals checked = CompletenessChecked();
    spdlog::info(
        "--verify-complete: fetched the receipts of {} of {} blocks checked (the others' "
        "logsBloom excludes the filter)",
        checked.with_receipts, checked.blocks);
  }
  if (IsInterrupted(st)) {
    spdlog::warn("interrupted: committed ranges are kept; rerun the same command to continue");
    return Outcome::kStopped;
  }
  GAPLESS_RETURN_IF_ERROR(st);
  GAPLESS_RETURN_IF_ERROR(duties_status);
  GAPLESS_RETURN_IF_ERROR(relays_status);
  GAPLESS_RETURN_IF_ERROR(builder_status);
  GAPLESS_RETURN_IF_ERROR(relays_stalled);
  if (!builder.done()) {
    spdlog::warn("stopped before every partition written was indexed: the next run builds them");
    return Outcome::kStopped;
  }
  if (relays->size() > 0 && !relays->done()) {
    spdlog::warn("stopped before every event was published: the relay continues where it left off");
    return Outcome::kStopped;
  }
  spdlog::info(
      "done: blocks {}..{} are committed (frontier {}){}", chain.from, chain.to,
      frontier.frontier(),
      relays->size() > 0 ? fmt::format(", {} events published", relays->events_published()) : "");
  return Outcome::kDone;
}

Result<Outcome> RunReconcile(const ReconcileCommand& command) {
  GAPLESS_ASSIGN_OR_RETURN(auto pool, OpenDatabase(command.db, 1));
  auto conn = pool->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t chain_id,
                           RecordedChainId(*conn, "the database holds no chain yet"));
  GAPLESS_ASSIGN_OR_RETURN(Coordination coord, OpenCoordination(command.redis, *conn, chain_id,
                                                                EvictionCheck::kRequireNoEviction));
  GAPLESS_RETURN_IF_ERROR(
      Reconcile(*coord.redis, coord.keys, *conn, command.from, command.to, command.range_size));
  spdlog::info("reconciled blocks {}..{} of chain {}", command.from, command.to, chain_id);
  return Outcome::kDone;
}

namespace {

// `to`, or the highest indexed block.
Result<uint64_t> UpperBound(PgConn& conn, const std::optional<uint64_t>& to) {
  if (to.has_value()) return *to;
  GAPLESS_ASSIGN_OR_RETURN(auto max, MaxBlock(conn));
  if (!max.has_value()) return FailedPrecondition("the database holds no blocks yet");
  return *max;
}

// verify and export only read: the database is not migrated (an empty or wrong one must not get
// gapless's tables), its schema must be this binary's, and every session of the pool is read-only
// (PgConnectOptions::read_only: a session after a reconnect too, which a SET SESSION would miss).
Result<std::unique_ptr<PgPool>> OpenToRead(const std::string& db) {
  PgConnectOptions options;
  options.read_only = true;
  GAPLESS_ASSIGN_OR_RETURN(auto pool, PgPool::Open(db, 1, options));
  auto conn = pool->Acquire();
  GAPLESS_RETURN_IF_ERROR(CheckSchemaCurrent(*conn));
  return pool;
}

// "0..9, 20..29" for the export's warning.
std::string Intervals(const std::vector<std::pair<uint64_t, uint64_t>>& intervals) {
  std::string out;
  for (const auto& [lo, hi] : intervals) {
    out +=
        (out.empty() ? "" : ", ") + (lo == hi ? std::to_string(lo) : fmt::format("{}..{}", lo, hi));
  }
  return out;
}

}  // namespace

Result<Outcome> RunVerify(const VerifyCommand& command, std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(auto pool, OpenToRead(command.db));
  auto conn = pool->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t to, UpperBound(*conn, command.to));
  GAPLESS_ASSIGN_OR_RETURN(VerifyReport report, Verify(*conn, command.from, to));
  if (command.deep) {
    DeepVerifyOptions options;
    options.verify = command.verify;
    GAPLESS_RETURN_IF_ERROR(DeepVerify(*conn, command.from, to, options, &report));
  }
  out << report.Render();
  return report.ok() ? Outcome::kDone : Outcome::kProblemsFound;
}

Result<Outcome> RunExport(const ExportCommand& command, std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(auto pool, OpenToRead(command.db));
  auto conn = pool->Acquire();
  // A decoded table is checked against the registry first, before --output is opened (and
  // truncated).
  std::optional<DecodedExportTable> decoded;
  if (!command.decoded_table.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(decoded, FindDecodedTable(*conn, command.decoded_table));
  }
  GAPLESS_ASSIGN_OR_RETURN(uint64_t to, UpperBound(*conn, command.to));
  auto write = [&](std::ostream& o) {
    return decoded.has_value()
               ? ExportDecodedCsv(*conn, *decoded, command.from, to, o)
               : ExportCsv(*conn, command.table, command.from, to, o, command.options);
  };
  if (command.output == "-") {
    Status st = write(out);
    out.flush();
    GAPLESS_RETURN_IF_ERROR(st);
  } else {
    std::ofstream file(command.output, std::ios::binary | std::ios::trunc);
    if (!file) return FailedPrecondition("--output " + command.output + ": cannot open");
    GAPLESS_RETURN_IF_ERROR(write(file));
  }
  // Blocks not indexed have no rows, like blocks without activity: say which (exit 1).
  constexpr size_t kShown = 10;
  GAPLESS_ASSIGN_OR_RETURN(auto missing, MissingBlocks(*conn, command.from, to, kShown + 1));
  if (missing.empty()) return Outcome::kDone;
  spdlog::warn("blocks {}{} of {}..{} are not indexed: the export has no rows of them",
               Intervals({missing.begin(), missing.begin() + std::min(missing.size(), kShown)}),
               missing.size() > kShown ? " and more" : "", command.from, to);
  return Outcome::kProblemsFound;
}

Result<Outcome> RunDlq(const DlqCommand& command, std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(FleetState fleet, OpenFleetState(command.fleet));
  Queue queue(fleet.coord->redis.get(), fleet.coord->keys);
  if (!command.retry) {
    GAPLESS_ASSIGN_OR_RETURN(auto dead, queue.DlqList());
    out << fmt::format("{} dead-lettered ranges\n", dead.size());
    for (const auto& d : dead) {
      out << fmt::format("{:<24} attempts {:<3} worker {:<28} error: {}\n", d.task.id(), d.attempts,
                         d.worker, d.error);
    }
    return Outcome::kDone;
  }
  if (command.task == "all") {
    GAPLESS_ASSIGN_OR_RETURN(int64_t n, queue.DlqRetryAll());
    out << fmt::format("re-queued {} ranges\n", n);
    return Outcome::kDone;
  }
  auto range = ParseTask(command.task);
  if (!range.ok()) {
    return FailedPrecondition("dlq retry " + command.task + ": expected a range FROM-TO or all");
  }
  GAPLESS_ASSIGN_OR_RETURN(bool moved, queue.DlqRetry(*range));
  if (!moved) return FailedPrecondition("dlq retry " + command.task + ": not in the dead letters");
  out << fmt::format("re-queued {}\n", command.task);
  return Outcome::kDone;
}

}  // namespace gapless

// The subcommands that run to completion in one thread: index, reconcile, verify, export, status
// and dlq. run and worker are in fleet_command.cc.
#include "node/commands.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <thread>

#include "coord/queue.h"
#include "coord/registry.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/duties.h"
#include "node/indexer.h"
#include "node/progress.h"
#include "node/reconcile.h"
#include "store/outbox.h"
#include "store/queries.h"
#include "store/state.h"

namespace gapless {

Result<Outcome> RunIndex(const IndexCommand& command) {
  const IndexingOptions& args = command.indexing;
  RpcClientFactory make_client = MakeRpcClientFactory(args.rpc);
  auto rpc = make_client();
  GAPLESS_ASSIGN_OR_RETURN(
      CheckedChain chain, CheckChain(*rpc, ChainRequest{args.from, args.to, args.chain_id}, args.db,
                                     args.db_connections + command.events.buses.size()));

  IndexerOptions options;
  options.from = chain.from;
  options.to = chain.to;
  options.range_size = args.range_size;
  options.blocks_per_request = args.batch;
  options.fetch_workers = command.concurrency;
  options.max_attempts = args.rpc.max_attempts;
  options.chain_id = chain.chain_id;
  options.write_mode = args.write_mode;
  Indexer indexer(options, make_client, chain.pool.get());
  GAPLESS_ASSIGN_OR_RETURN(uint64_t planned, indexer.Plan());
  uint64_t requested = chain.to - chain.from + 1;
  spdlog::info("indexing blocks {}..{} of chain {}: {} to do, {} already committed", chain.from,
               chain.to, chain.chain_id, planned, requested - planned);

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
  std::atomic<bool> indexing_over{false};
  Status duties_status;
  std::thread duties_thread([&] { duties_status = duties.Run(indexing_over); });
  Status st;
  {
    SignalStop signals(&indexer);
    st = indexer.Run();
  }
  indexing_over = true;
  duties_thread.join();
  // A last step: the frontier over everything committed.
  if (duties_status.ok()) duties_status = duties.Tick();
  if (st.ok() && duties_status.ok() && relays->size() > 0 && !relays->done()) {
    spdlog::info("waiting for the event buses to confirm the range's events");
    SignalStop drain;
    while (!relays->done() && !drain.flag().load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  relays_stop = true;
  Status relays_status = relays->Join();
  progress.Stop();
  spdlog::info("{}", progress.Summary());
  if (IsInterrupted(st)) {
    spdlog::warn("interrupted: committed ranges are kept; rerun the same command to continue");
    return Outcome::kStopped;
  }
  GAPLESS_RETURN_IF_ERROR(st);
  GAPLESS_RETURN_IF_ERROR(duties_status);
  GAPLESS_RETURN_IF_ERROR(relays_status);
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

}  // namespace

Result<Outcome> RunVerify(const VerifyCommand& command, std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(auto pool, OpenDatabase(command.db, 1));
  auto conn = pool->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t to, UpperBound(*conn, command.to));
  GAPLESS_ASSIGN_OR_RETURN(VerifyReport report, Verify(*conn, command.from, to));
  out << report.Render();
  return report.ok() ? Outcome::kDone : Outcome::kProblemsFound;
}

Result<Outcome> RunExport(const ExportCommand& command, std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(auto pool, OpenDatabase(command.db, 1));
  auto conn = pool->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t to, UpperBound(*conn, command.to));
  if (command.output == "-") {
    Status st = ExportCsv(*conn, command.table, command.from, to, out, command.options);
    out.flush();
    GAPLESS_RETURN_IF_ERROR(st);
    return Outcome::kDone;
  }
  std::ofstream file(command.output, std::ios::binary | std::ios::trunc);
  if (!file) return FailedPrecondition("--output " + command.output + ": cannot open");
  GAPLESS_RETURN_IF_ERROR(ExportCsv(*conn, command.table, command.from, to, file, command.options));
  return Outcome::kDone;
}

namespace {

// What status and dlq work on: one PostgreSQL connection and the coordination Redis of a chain.
struct FleetState {
  std::unique_ptr<PgPool> pool;
  uint64_t chain_id = 0;
  std::optional<Coordination> coord;
};

Result<FleetState> OpenFleetState(const FleetStateOptions& options) {
  FleetState out;
  GAPLESS_ASSIGN_OR_RETURN(out.pool, OpenDatabase(options.db, 1));
  auto conn = out.pool->Acquire();
  out.chain_id = options.chain_id;
  if (out.chain_id == 0) {
    GAPLESS_ASSIGN_OR_RETURN(
        out.chain_id, RecordedChainId(*conn, "the database has no chain yet: pass --chain-id"));
  }
  GAPLESS_ASSIGN_OR_RETURN(Coordination coord, OpenCoordination(options.redis, *conn, out.chain_id,
                                                                EvictionCheck::kSkip));
  out.coord.emplace(std::move(coord));
  return out;
}

std::string Seconds(int64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000); }

// The frontier is the next block not known to be committed: the last contiguous block is one
// below it.
std::string FrontierText(const std::optional<uint64_t>& next) {
  if (!next.has_value()) return "none";
  if (*next == 0) return "nothing committed yet";
  return fmt::format("block {} (every block up to it is committed)", *next - 1);
}

}  // namespace

namespace {

// Time as "2026-11-23 03:10:01 UTC" from Unix milliseconds.
std::string UtcTime(uint64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// The leader as a quorum of lock nodes sees it, each node's view, and the head log's committed
// height. Problems reaching the nodes are shown, never fatal: status is for bad days too.
void WriteLeaderStatus(const FleetStateOptions& options, const Keys& keys, std::ostream& out) {
  auto nodes = OpenLockNodes(options.election, options.redis, EvictionCheck::kSkip);
  if (!nodes.ok()) {
    out << fmt::format("leader                 unknown: {}\n", nodes.status().message());
    return;
  }
  std::unique_ptr<Election> election = MakeElection(nodes->get(), keys, options.election);
  std::vector<Election::NodeView> views = election->Views();
  std::map<std::string, size_t> holders;
  for (const auto& v : views) {
    if (v.reachable && !v.holder.empty()) ++holders[v.holder];
  }
  std::string leader = "none (no holder on a quorum of lock nodes)";
  for (const auto& [holder, count] : holders) {
    if (count < (*nodes)->quorum()) continue;
    uint64_t epoch = 0, since = 0;
    for (const auto& v : views) {
      if (v.holder != holder) continue;
      epoch = std::max(epoch, v.epoch);
      if (v.since_ms != 0) since = since == 0 ? v.since_ms : std::min(since, v.since_ms);
    }
    // Owner ids are host:pid:suffix (node/app.h MakeElection).
    size_t last = holder.rfind(':');
    size_t mid = last == std::string::npos ? last : holder.rfind(':', last - 1);
    std::string host = mid == std::string::npos ? holder : holder.substr(0, mid);
    std::string pid = mid == std::string::npos ? "?" : holder.substr(mid + 1, last - mid - 1);
    leader = fmt::format("{} pid {} (epoch {}, since {}, on {}/{} lock nodes)", host, pid, epoch,
                         since != 0 ? UtcTime(since) : std::string("unknown"), count, views.size());
  }
  out << fmt::format("leader                 {}\n", leader);
  out << fmt::format("lock nodes ({}, quorum {})\n", views.size(), (*nodes)->quorum());
  for (size_t i = 0; i < views.size(); ++i) {
    const auto& v = views[i];
    if (!v.reachable) {
      out << fmt::format("  {:<22} unreachable: {}\n", (*nodes)->describe(i), v.error);
      continue;
    }
    out << fmt::format("  {:<22} holder {:<36} epoch {:<6} log {} heights{}\n",
                       (*nodes)->describe(i), v.holder.empty() ? "(free)" : v.holder, v.epoch,
                       v.log_length,
                       v.top_height.has_value() ? fmt::format(" (top {})", *v.top_height) : "");
  }
  HeadLogReader reader(election.get());
  auto synced = reader.Sync();
  if (!synced.ok()) {
    out << fmt::format("head log               unknown: {}\n", synced.status().message());
    return;
  }
  auto tip = reader.CommittedTip();
  size_t below = reader.SubQuorum().size();
  out << fmt::format(
      "head log               {}{}\n",
      tip.has_value() ? fmt::format("committed up to {}", tip->height) : std::string("empty"),
      below > 0 ? fmt::format(" ({} heights below a quorum)", below) : "");
}

}  // namespace

namespace {

// INFO <section> as field -> value.
std::map<std::string, std::string> InfoFields(RedisConn& redis, const std::string& section) {
  std::map<std::string, std::string> out;
  Result<RedisReply> r = redis.Command({"INFO", section});
  if (!r.ok()) return out;
  size_t start = 0;
  const std::string& text = r->str;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (colon != std::string::npos && !line.starts_with("#")) {
      out[line.substr(0, colon)] = line.substr(colon + 1);
    }
    start = end + 1;
  }
  return out;
}

// The coordination Redis itself: keys and memory (seed 000: TTL everything, watch the count), and
// each replica's replication lag as the primary sees it (INFO replication: slaveN offset and
// seconds since its last ack), with a warning above 5 s.
void WriteRedisStatus(RedisConn& redis, std::ostream& out) {
  Result<RedisReply> keys = redis.Command({"DBSIZE"});
  std::map<std::string, std::string> memory = InfoFields(redis, "memory");
  out << fmt::format(
      "redis                  {} keys, {} used (peak {})\n",
      keys.ok() ? std::to_string(keys->integer) : std::string("?"),
      memory.count("used_memory_human") ? memory["used_memory_human"] : "?",
      memory.count("used_memory_peak_human") ? memory["used_memory_peak_human"] : "?");
  std::map<std::string, std::string> replication = InfoFields(redis, "replication");
  const int64_t primary_offset = replication.count("master_repl_offset")
                                     ? std::atoll(replication["master_repl_offset"].c_str())
                                     : 0;
  for (const auto& [name, value] : replication) {
    if (!name.starts_with("slave") ||
        name.find_first_not_of("0123456789", 5) != std::string::npos) {
      continue;
    }
    // "ip=127.0.0.1,port=6380,state=online,offset=1234,lag=0"
    std::map<std::string, std::string> f;
    size_t start = 0;
    while (start < value.size()) {
      size_t comma = value.find(',', start);
      if (comma == std::string::npos) comma = value.size();
      std::string kv = value.substr(start, comma - start);
      size_t eq = kv.find('=');
      if (eq != std::string::npos) f[kv.substr(0, eq)] = kv.substr(eq + 1);
      start = comma + 1;
    }
    const int64_t lag_s = std::atoll(f["lag"].c_str());
    const int64_t behind = primary_offset - std::atoll(f["offset"].c_str());
    out << fmt::format("  replica {}:{}  {}, {} bytes behind, last ack {} s ago{}\n", f["ip"],
                       f["port"], f["state"], std::max<int64_t>(behind, 0), lag_s,
                       lag_s > 5 ? "  WARNING: lagging more than 5 s (coordination uses the "
                                   "primary only; never point --redis at it)"
                                 : "");
  }
}

// The events section of status: whether events are on, the outbox backlog, each bus's cursor and
// the lag of the consumer groups asked for.
Status WriteEventsStatus(PgConn& conn, uint64_t chain_id, const StatusCommand& command,
                         std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> events_from, EventsFrom(conn));
  if (!events_from.has_value()) {
    out << "events                 off (no process has run with --events on this database)\n";
    return Status::Ok();
  }
  GAPLESS_ASSIGN_OR_RETURN(OutboxStats outbox, LoadOutboxStats(conn));
  out << fmt::format(
      "events                 on from block {}; outbox {} blocks, {} events{}\n", *events_from,
      outbox.rows, outbox.events,
      outbox.lowest ? fmt::format(" (blocks {}..{})", *outbox.lowest, *outbox.highest) : "");
  GAPLESS_ASSIGN_OR_RETURN(std::vector<EventCursor> cursors, LoadCursors(conn));
  for (const EventCursor& c : cursors) {
    out << fmt::format("  {:<36} published up to block {}, {} events, last at {} (epoch {})\n",
                       c.bus,
                       c.next_block > 0 ? std::to_string(c.next_block - 1) : std::string("-"),
                       c.events_sent, c.published_at, c.leader_epoch);
  }
  for (const std::string& bus : command.buses) {
    for (const std::string& group : command.groups) {
      SubscribeOptions options;
      options.group = group;
      for (std::string_view type : EventTypes())
        options.topics.push_back(EventTopic(type, chain_id));
      Result<int64_t> lag = GroupLag(bus, options);
      out << fmt::format(
          "  group {:<20} on {:<28} {}\n", group, BusName(bus),
          lag.ok() ? fmt::format("lag {} events", *lag) : "unknown: " + lag.status().message());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Outcome> RunStatus(const StatusCommand& command, std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(FleetState fleet, OpenFleetState(command.fleet));
  RedisConn& redis = *fleet.coord->redis;
  const Keys& keys = fleet.coord->keys;
  Queue queue(&redis, keys);

  std::optional<uint64_t> pg_frontier;
  {
    auto conn = fleet.pool->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(pg_frontier, LoadFrontier(*conn));
  }
  GAPLESS_ASSIGN_OR_RETURN(RedisReply redis_frontier, redis.Command({"GET", keys.frontier()}));
  std::string head_text = "unknown (no --rpc)";
  std::optional<uint64_t> head;
  if (!command.rpc.empty()) {
    auto n = MakeRpcClientFactory(RpcOptions{command.rpc})()->BlockNumber();
    if (n.ok()) {
      head = *n;
      head_text = std::to_string(*n);
    } else {
      head_text = "unavailable: " + n.status().message();
    }
  }
  out << fmt::format("chain {}   (redis keys {}*)\n", fleet.chain_id, keys.prefix());
  WriteLeaderStatus(command.fleet, keys, out);
  WriteRedisStatus(redis, out);
  std::optional<uint64_t> redis_next;
  if (!redis_frontier.is_nil()) redis_next = std::stoull(redis_frontier.str);
  out << fmt::format("frontier (PostgreSQL)  {}\n", FrontierText(pg_frontier));
  out << fmt::format("frontier (Redis)       {}\n", FrontierText(redis_next));
  out << fmt::format("chain head             {}", head_text);
  if (head.has_value() && pg_frontier.has_value()) {
    uint64_t done = *pg_frontier;
    out << fmt::format(" (lag {} blocks)", *head + 1 > done ? *head + 1 - done : 0);
  }
  out << "\n";

  GAPLESS_ASSIGN_OR_RETURN(auto depths, queue.Depths());
  out << fmt::format("queue                  {} pending, {} processing, {} dead-lettered\n",
                     depths.pending, depths.processing, depths.dlq);

  int64_t now_ms = 0;
  GAPLESS_ASSIGN_OR_RETURN(auto leases, queue.Leases(&now_ms, 50));
  out << fmt::format("leases ({})\n", leases.size());
  for (const auto& l : leases) {
    int64_t left = l.expires_ms - now_ms;
    out << fmt::format(
        "  {:<24} {:<32} token {:<8} {}\n", l.task.id(), l.worker, l.token,
        left >= 0 ? "expires in " + Seconds(left) : "expired " + Seconds(-left) + " ago");
  }

  {
    auto conn = fleet.pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(WriteEventsStatus(*conn, fleet.chain_id, command, out));
  }

  Registry registry(&redis, &keys);
  GAPLESS_ASSIGN_OR_RETURN(auto workers, registry.List());
  out << fmt::format("live workers ({})\n", workers.size());
  for (const auto& w : workers) {
    out << fmt::format("  {:<32} {}:{:<8} {:<24} {:.1f} blocks/s, beat {} ago\n", w.worker, w.host,
                       w.pid, w.range.empty() ? "idle" : w.range, w.blocks_per_s,
                       Seconds(std::max<int64_t>(0, now_ms - w.updated_ms)));
  }
  return Outcome::kDone;
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

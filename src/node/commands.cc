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
#include "node/indexer.h"
#include "node/ops.h"
#include "node/progress.h"
#include "node/reconcile.h"
#include "store/outbox.h"
#include "store/queries.h"
#include "store/rollback.h"
#include "store/state.h"

namespace gapless {

Result<Outcome> RunIndex(const IndexCommand& command) {
  const IndexingOptions& args = command.indexing;
  GAPLESS_ASSIGN_OR_RETURN(Ops ops, StartOps(args.metrics_addr));
  ops.SetStarting("checking the node and opening the database");
  ops.Add("postgresql", PostgresProbe(args.db));
  ops.Add("rpc node", RpcProbe(args.rpc), kRpcProbeInterval);
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
  options.verify = VerificationFor(chain, args.Verification());
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
  ops.SetStarted();
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
    while (!relays->done() && !drain.flag().load() && relays->FirstError().ok()) {
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
  if (command.deep) {
    DeepVerifyOptions options;
    options.verify = command.verify;
    GAPLESS_RETURN_IF_ERROR(DeepVerify(*conn, command.from, to, options, &report));
  }
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
  // Set by OpenFleetState. A pointer, not an optional: GCC 12 at -O3 reported the optional's
  // payload "may be used uninitialized" in RunDlq (a false positive, but noise in every build).
  std::unique_ptr<Coordination> coord;
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
  out.coord = std::make_unique<Coordination>(std::move(coord));
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

// One replica as the primary sees it (INFO replication "slaveN:ip=...,port=...,state=...,
// offset=...,lag=...").
struct ReplicaView {
  std::string ip;
  std::string port;
  std::string state;
  int64_t behind_bytes = 0;  // the primary's master_repl_offset minus the replica's offset
  int64_t lag_s = 0;         // seconds since the replica's last acknowledgement
};

std::vector<ReplicaView> ReplicasOf(RedisConn& primary, int64_t* primary_offset) {
  std::map<std::string, std::string> replication = InfoFields(primary, "replication");
  *primary_offset = replication.count("master_repl_offset")
                        ? std::atoll(replication["master_repl_offset"].c_str())
                        : 0;
  std::vector<ReplicaView> out;
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
    out.push_back(
        ReplicaView{f["ip"], f["port"], f["state"],
                    std::max<int64_t>(*primary_offset - std::atoll(f["offset"].c_str()), 0),
                    std::atoll(f["lag"].c_str())});
  }
  return out;
}

constexpr int64_t kReplicaLagWarningS = 5;

// The coordination Redis itself: keys and memory (seed 000: TTL everything, watch the count) as
// `display` (the primary, or the --redis-replica) reports them, and each replica's replication
// lag as the primary sees it (INFO replication: slaveN offset and seconds since its last ack),
// with a warning above 5 s.
void WriteRedisStatus(RedisConn& primary, RedisConn& display, bool display_is_replica,
                      std::ostream& out) {
  if (primary.url().hosts.size() > 1) {
    out << fmt::format("redis primary          {} (of {})\n", primary.DescribeCurrent(),
                       primary.Describe());
  }
  Result<RedisReply> keys = display.Command({"DBSIZE"});
  std::map<std::string, std::string> memory = InfoFields(display, "memory");
  out << fmt::format(
      "redis                  {} keys, {} used (peak {}){}\n",
      keys.ok() ? std::to_string(keys->integer) : std::string("?"),
      memory.count("used_memory_human") ? memory["used_memory_human"] : "?",
      memory.count("used_memory_peak_human") ? memory["used_memory_peak_human"] : "?",
      display_is_replica ? " on the replica " + display.DescribeCurrent() : "");
  int64_t primary_offset = 0;
  for (const ReplicaView& r : ReplicasOf(primary, &primary_offset)) {
    out << fmt::format("  replica {}:{}  {}, {} bytes behind, last ack {} s ago{}\n", r.ip, r.port,
                       r.state, r.behind_bytes, r.lag_s,
                       r.lag_s > kReplicaLagWarningS
                           ? "  WARNING: lagging more than 5 s (coordination uses the "
                             "primary only; never point --redis at it)"
                           : "");
  }
}

// The --redis-replica: which server serves the display data, and how far behind the primary it
// is. Its own INFO gives its offset and link; the primary's INFO gives the seconds since its last
// acknowledgement (matched by port, and by address when the URL names an IP).
void WriteDisplaySource(RedisConn& primary, RedisConn& replica, std::ostream& out) {
  std::map<std::string, std::string> info = InfoFields(replica, "replication");
  const std::string where = replica.DescribeCurrent();
  if (info["role"] != "slave") {
    out << fmt::format(
        "display data           from {} (--redis-replica), which is a {}, not a replica: "
        "WARNING: check --redis-replica\n",
        where, info["role"].empty() ? "server of unknown role" : info["role"]);
    return;
  }
  int64_t primary_offset = 0;
  std::vector<ReplicaView> replicas = ReplicasOf(primary, &primary_offset);
  const RedisUrl::Host& host = replica.url().hosts.front();
  const ReplicaView* seen = nullptr;
  for (const ReplicaView& r : replicas) {
    if (r.port == std::to_string(host.port) && (seen == nullptr || r.ip == host.host)) {
      seen = &r;
    }
  }
  const bool link_up = info["master_link_status"] == "up";
  if (seen == nullptr) {
    out << fmt::format(
        "display data           from replica {} (--redis-replica): link {} to {}:{}  WARNING: the "
        "primary {} lists no replica at this port (this one follows {}:{})\n",
        where, link_up ? "up" : "down", info["master_host"], info["master_port"],
        primary.DescribeCurrent(), info["master_host"], info["master_port"]);
    return;
  }
  const int64_t behind =
      std::max<int64_t>(primary_offset - std::atoll(info["slave_repl_offset"].c_str()), 0);
  out << fmt::format(
      "display data           from replica {} (--redis-replica): link {}, {} bytes behind the "
      "primary, last ack {} s ago{}\n",
      where, link_up ? "up" : "down", behind, seen->lag_s,
      !link_up || seen->lag_s > kReplicaLagWarningS ? "  WARNING: the display data may be stale"
                                                    : "");
}

// The key-count history (coord/key_watch.h): this run's sample on the primary (a write), the
// growth rule over the samples, and when it holds, the prefixes that hold the most keys in a SCAN
// sample of `display`, with how many of the sampled keys have no TTL.
void WriteKeyWatch(RedisConn& primary, RedisConn& display, const Keys& keys, std::ostream& out) {
  Result<KeyCountHistory> history = RecordKeyCountSample(primary, keys);
  if (!history.ok()) {
    out << fmt::format("  key count history    unknown: {}\n", history.status().message());
    return;
  }
  const std::vector<KeyCountSample>& samples = history->samples;
  const double span_min =
      samples.empty()
          ? 0.0
          : static_cast<double>(samples.back().time_ms - samples.front().time_ms) / 60'000;
  KeyGrowth growth = DetectKeyGrowth(samples);
  if (!growth.growing) {
    out << fmt::format("  key count history    {} sample{} over {:.1f} min: no steady growth\n",
                       samples.size(), samples.size() == 1 ? "" : "s", span_min);
    return;
  }
  out << fmt::format(
      "  key count history    {} samples over {:.1f} min  WARNING: the key count rose at each of "
      "the last {} samples over {:.1f} min, {} -> {} keys: some keys may lack a TTL or a bound\n",
      samples.size(), span_min, growth.rising_samples, static_cast<double>(growth.span_ms) / 60'000,
      growth.from_keys, growth.to_keys);
  Result<PrefixSample> prefixes = SampleKeyPrefixes(display);
  if (!prefixes.ok()) {
    out << fmt::format("    largest prefixes unknown: {}\n", prefixes.status().message());
    return;
  }
  Result<RedisReply> dbsize = display.Command({"DBSIZE"});
  const int64_t total = dbsize.ok() ? dbsize->integer : prefixes->keys_scanned;
  for (const PrefixCount& p : prefixes->top) {
    const int64_t estimate =
        prefixes->keys_scanned > 0
            ? p.keys_seen * std::max(total, prefixes->keys_scanned) / prefixes->keys_scanned
            : p.keys_seen;
    out << fmt::format("    {:<40} ~{} keys, {} of {} sampled without a TTL\n", p.prefix, estimate,
                       p.without_ttl, p.ttl_checked);
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
  RedisConn& primary = *fleet.coord->redis;
  const Keys& keys = fleet.coord->keys;

  // Display data from the --redis-replica when it answers; the primary otherwise. A replica that
  // does not answer (paused, down) must not hang status: a short timeout, one attempt, and a probe
  // (its INFO, needed for the lag line anyway) before it is used.
  std::unique_ptr<RedisConn> replica;
  std::string replica_problem;
  if (!command.redis_replica.empty()) {
    RedisOptions options;
    options.require_primary = false;  // display only: reading a replica is the point
    options.connect_timeout_ms = 1'000;
    options.command_timeout_ms = 2'000;
    options.max_attempts = 1;
    auto conn = RedisConn::Connect(command.redis_replica, options);
    Status probe = conn.ok() ? (*conn)->Command({"INFO", "replication"}).status() : conn.status();
    if (probe.ok()) {
      replica = std::move(conn).value();
    } else if (probe.code() == Code::kFailedPrecondition) {
      return probe.WithContext("--redis-replica");
    } else {
      replica_problem = probe.message();
    }
  }
  RedisConn& display = replica != nullptr ? *replica : primary;
  Queue queue(&display, keys);

  std::optional<uint64_t> pg_frontier;
  ReorgSummary reorgs;
  {
    auto conn = fleet.pool->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(pg_frontier, LoadFrontier(*conn));
    GAPLESS_ASSIGN_OR_RETURN(reorgs, LoadReorgSummary(*conn));
  }
  GAPLESS_ASSIGN_OR_RETURN(RedisReply redis_frontier, display.Command({"GET", keys.frontier()}));
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
  WriteRedisStatus(primary, display, replica != nullptr, out);
  WriteKeyWatch(primary, display, keys, out);
  if (replica != nullptr) {
    WriteDisplaySource(primary, *replica, out);
  } else if (!command.redis_replica.empty()) {
    out << fmt::format(
        "display data           from the primary: --redis-replica unavailable ({})  WARNING\n",
        replica_problem);
  }
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
  if (reorgs.count == 0) {
    out << "re-orgs rolled back    none\n";
  } else {
    out << fmt::format("re-orgs rolled back    {} (last: {} blocks above block {}, at {} UTC)\n",
                       reorgs.count, reorgs.depth, reorgs.fork_point, reorgs.detected_at);
  }
  // A Kafka fleet's leader reports the gap at the frontier (LeaderOptions::blocks_from_stream).
  GAPLESS_ASSIGN_OR_RETURN(RedisReply gap, display.Command({"GET", keys.gap()}));
  if (!gap.is_nil()) {
    simdjson::dom::parser parser;
    simdjson::dom::element g;
    uint64_t from = 0, to = 0;
    int64_t open_ms = 0;
    bool healing = false;
    if (parser.parse(gap.str).get(g) == simdjson::SUCCESS &&
        g["from"].get_uint64().get(from) == simdjson::SUCCESS &&
        g["to"].get_uint64().get(to) == simdjson::SUCCESS &&
        g["open_ms"].get_int64().get(open_ms) == simdjson::SUCCESS &&
        g["healing"].get_bool().get(healing) == simdjson::SUCCESS) {
      out << fmt::format(
          "gap                    blocks {}..{} missing from the stream for {:.0f} s, "
          "{}  WARNING\n",
          from, to, static_cast<double>(open_ms) / 1e3,
          healing ? "queued for RPC workers" : "not healed yet");
    }
  }

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

  Registry registry(&display, &keys);
  // A replica refuses writes: list without pruning there (the fleet's beats prune anyway).
  GAPLESS_ASSIGN_OR_RETURN(auto workers, registry.List(/*prune_dead=*/replica == nullptr));
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

// status: gathering a StatusReport (node/status.h) from PostgreSQL, the coordination Redis and its
// replica, the lock nodes, the buses and the RPC pools' published stats, and `gapless status`
// itself. The report's two renderings, text and JSON, are in status_render.cc.
#include "node/status.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <ctime>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "coord/election.h"
#include "coord/key_watch.h"
#include "coord/lock_nodes.h"
#include "coord/queue.h"
#include "coord/registry.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "store/outbox.h"
#include "store/partition_indexes.h"
#include "store/rollback.h"
#include "store/state.h"

namespace gapless {

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

namespace {

// StatusReport::decoded_tables: per table the dataset asked last (dataset_requests), its first
// asked block, and the committed blocks holding it from there up to its first gap (or below the
// frontier).
Result<std::vector<StatusReport::TableCursor>> DecodedTableCursors(
    PgConn& conn, const std::vector<DatasetGap>& missing, std::optional<uint64_t> frontier) {
  GAPLESS_ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query("SELECT DISTINCT ON (t) t, dataset, first FROM (SELECT dataset, asked_at,"
                 " substr(dataset, 9, length(dataset) - 8 - position('.' IN reverse(dataset))) AS"
                 " t, min(from_block) OVER (PARTITION BY dataset) AS first FROM dataset_requests"
                 " WHERE dataset LIKE 'decoded:%') x ORDER BY t, asked_at DESC"));
  std::vector<StatusReport::TableCursor> out;
  for (int i = 0; i < r.rows(); ++i) {
    StatusReport::TableCursor c;
    c.table = std::string(r.Get(i, 0));
    const std::string dataset(r.Get(i, 1));
    GAPLESS_ASSIGN_OR_RETURN(int64_t first, r.GetInt64(i, 2));
    c.from = static_cast<uint64_t>(first);
    // Committed up to below the frontier, less the dataset's first gap at or above `from`.
    std::optional<uint64_t> end;
    if (frontier.has_value() && *frontier > c.from) end = *frontier - 1;
    for (const DatasetGap& gap : missing) {
      if (gap.dataset != dataset || gap.to < c.from) continue;
      if (!end.has_value() || gap.from <= *end) {
        end = gap.from > c.from ? std::optional<uint64_t>(gap.from - 1) : std::nullopt;
      }
      break;
    }
    c.through = end;
    out.push_back(std::move(c));
  }
  return out;
}

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
// height. Problems reaching the nodes are reported, never fatal.
void GatherLeader(const FleetStateOptions& options, const Keys& keys, StatusReport* r) {
  auto nodes = OpenLockNodes(options.election, options.redis, EvictionCheck::kSkip);
  if (!nodes.ok()) {
    r->leader.text = "unknown: " + nodes.status().message();
    return;
  }
  std::unique_ptr<Election> election = MakeElection(nodes->get(), keys, options.election);
  std::vector<Election::NodeView> views = election->Views();
  r->quorum = (*nodes)->quorum();
  std::map<std::string, size_t> holders;
  for (size_t i = 0; i < views.size(); ++i) {
    const auto& v = views[i];
    if (v.reachable && !v.holder.empty()) ++holders[v.holder];
    r->lock_nodes.push_back(StatusReport::LockNode{(*nodes)->describe(i), v.reachable, v.error,
                                                   v.holder, v.epoch, v.log_length, v.top_height});
  }
  r->leader.text = "none (no holder on a quorum of lock nodes)";
  for (const auto& [holder, count] : holders) {
    if (count < r->quorum) continue;
    uint64_t epoch = 0, since = 0;
    for (const auto& v : views) {
      if (v.holder != holder) continue;
      epoch = std::max(epoch, v.epoch);
      if (v.since_ms != 0) since = since == 0 ? v.since_ms : std::min(since, v.since_ms);
    }
    // Owner ids are host:pid:suffix (node/app.h MakeElection).
    size_t last = holder.rfind(':');
    size_t mid = last == std::string::npos ? last : holder.rfind(':', last - 1);
    StatusReport::Leader& l = r->leader;
    l.known = true;
    l.host = mid == std::string::npos ? holder : holder.substr(0, mid);
    l.pid = mid == std::string::npos ? "?" : holder.substr(mid + 1, last - mid - 1);
    l.epoch = epoch;
    l.since_ms = since;
    l.on_nodes = count;
    l.text =
        fmt::format("{} pid {} (epoch {}, since {}, on {}/{} lock nodes)", l.host, l.pid, epoch,
                    since != 0 ? UtcTime(since) : std::string("unknown"), count, views.size());
  }
  HeadLogReader reader(election.get());
  auto synced = reader.Sync();
  if (!synced.ok()) {
    r->head_log = "unknown: " + synced.status().message();
    return;
  }
  auto tip = reader.CommittedTip();
  size_t below = reader.SubQuorum().size();
  if (tip.has_value()) r->head_log_committed = tip->height;
  r->head_log =
      (tip.has_value() ? fmt::format("committed up to {}", tip->height) : std::string("empty")) +
      (below > 0 ? fmt::format(" ({} heights below a quorum)", below) : "");
}

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

// The events section: whether events are on, the outbox backlog, each bus's cursor and the lag of
// the consumer groups asked for.
Status GatherEvents(PgConn& conn, uint64_t chain_id, const StatusCommand& command,
                    StatusReport* r) {
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> events_from, EventsFrom(conn));
  if (!events_from.has_value()) return Status::Ok();
  r->events_on = true;
  r->events_from = *events_from;
  GAPLESS_ASSIGN_OR_RETURN(OutboxStats outbox, LoadOutboxStats(conn));
  r->outbox_blocks = outbox.rows;
  r->outbox_events = outbox.events;
  r->outbox_lowest = outbox.lowest;
  r->outbox_highest = outbox.highest;
  GAPLESS_ASSIGN_OR_RETURN(std::vector<EventCursor> cursors, LoadCursors(conn));
  for (const EventCursor& c : cursors) {
    r->buses.push_back(StatusReport::Bus{
        c.bus, c.next_block > 0 ? std::optional<uint64_t>(c.next_block - 1) : std::nullopt,
        c.events_sent, c.published_at, c.leader_epoch});
  }
  for (const std::string& bus : command.buses) {
    for (const std::string& group : command.groups) {
      SubscribeOptions options;
      options.group = group;
      for (std::string_view type : EventTypes())
        options.topics.push_back(EventTopic(type, chain_id));
      Result<int64_t> lag = GroupLag(bus, options);
      StatusReport::Group g{group, BusName(bus), std::nullopt, ""};
      if (lag.ok()) {
        g.lag = *lag;
      } else {
        g.error = lag.status().message();
      }
      r->groups.push_back(std::move(g));
    }
  }
  return Status::Ok();
}

// "  replica ...  WARNING: text" -> "text"
void CollectWarnings(const std::string& line, std::vector<std::string>* out) {
  size_t at = line.find("WARNING");
  if (at == std::string::npos) return;
  std::string w = line.substr(at + 7);
  while (!w.empty() && (w.front() == ':' || w.front() == ' ')) w.erase(0, 1);
  std::string before = line.substr(0, at);
  while (!before.empty() && before.back() == ' ') before.pop_back();
  size_t first = before.find_first_not_of(' ');
  before = first == std::string::npos ? "" : before.substr(first);
  out->push_back(w.empty() ? before : before + ": " + w);
}

}  // namespace

Result<StatusReport> GatherStatus(FleetState& fleet, const StatusCommand& command) {
  RedisConn& primary = *fleet.coord->redis;
  const Keys& keys = fleet.coord->keys;
  StatusReport r;
  r.chain_id = fleet.chain_id;
  r.key_prefix = keys.prefix();

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
    GAPLESS_ASSIGN_OR_RETURN(std::vector<PartitionIndexState> unindexed,
                             PartitionsMissingIndexes(*conn));
    r.partitions_unindexed = unindexed.size();
    GAPLESS_ASSIGN_OR_RETURN(
        r.missing_datasets,
        MissingRequestedDatasets(*conn, 0, std::numeric_limits<uint64_t>::max()));
    GAPLESS_ASSIGN_OR_RETURN(r.decoded_tables,
                             DecodedTableCursors(*conn, r.missing_datasets, pg_frontier));
    for (const PartitionIndexState& p : unindexed) {
      if (!r.unindexed_lowest.has_value() || p.start < *r.unindexed_lowest) {
        r.unindexed_lowest = p.start;
      }
    }
  }
  r.frontier_pg = pg_frontier;
  r.reorgs = reorgs.count;
  r.last_reorg_depth = reorgs.depth;
  r.last_reorg_fork_point = reorgs.fork_point;
  r.last_reorg_at = reorgs.detected_at;
  GAPLESS_ASSIGN_OR_RETURN(RedisReply redis_frontier, display.Command({"GET", keys.frontier()}));
  if (!redis_frontier.is_nil()) r.frontier_redis = std::stoull(redis_frontier.str);
  r.head_text = "unknown (no --rpc)";
  if (!command.rpc.empty()) {
    // One short try: status is for bad days too, and a node that does not answer must not hold
    // it (or a /status.json request) for the client's minute of retries.
    RpcOptions rpc{command.rpc};
    rpc.max_attempts = 1;
    rpc.request_timeout_ms = 5'000;
    rpc.connect_timeout_ms = 2'000;
    auto n = MakeRpcClientFactory(rpc)()->BlockNumber();
    if (n.ok()) {
      r.head = *n;
      r.head_text = std::to_string(*n);
    } else {
      r.head_text = "unavailable: " + n.status().message();
    }
  }
  GatherLeader(command.fleet, keys, &r);
  {
    std::ostringstream redis_text;
    WriteRedisStatus(primary, display, replica != nullptr, redis_text);
    WriteKeyWatch(primary, display, keys, redis_text);
    if (replica != nullptr) {
      WriteDisplaySource(primary, *replica, redis_text);
    } else if (!command.redis_replica.empty()) {
      redis_text << fmt::format(
          "display data           from the primary: --redis-replica unavailable ({})  WARNING\n",
          replica_problem);
    }
    std::istringstream lines(redis_text.str());
    for (std::string line; std::getline(lines, line);) r.redis_lines.push_back(line);
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
      r.gap = StatusReport::Gap{from, to, static_cast<double>(open_ms) / 1e3, healing};
    }
  }
  GAPLESS_ASSIGN_OR_RETURN(auto depths, queue.Depths());
  r.pending = depths.pending;
  r.processing = depths.processing;
  r.dead_lettered = depths.dlq;
  GAPLESS_ASSIGN_OR_RETURN(auto leases, queue.Leases(&r.now_ms, 50));
  for (const auto& l : leases) {
    r.leases.push_back({l.task.id(), l.worker, l.token, l.expires_ms - r.now_ms});
  }
  {
    auto conn = fleet.pool->Acquire();
    GAPLESS_RETURN_IF_ERROR(GatherEvents(*conn, fleet.chain_id, command, &r));
  }
  Registry registry(&display, &keys);
  // A replica refuses writes: list without pruning there (the fleet's beats prune anyway).
  GAPLESS_ASSIGN_OR_RETURN(auto workers, registry.List(/*prune_dead=*/replica == nullptr));
  for (const auto& w : workers) {
    r.workers.push_back({w.worker, w.host, w.pid, w.range, w.blocks_per_s,
                         std::max<int64_t>(0, r.now_ms - w.updated_ms)});
  }
  // The RPC pools the fleet's processes published (each key lives 15 s past its process's last
  // write, so a run that just ended still shows), summed per endpoint. A SCAN of this chain's
  // prefix: the coordination keys are few (coord/keys.h bounds them).
  std::set<std::string> pool_keys;
  const std::string pattern = keys.rpc_pool("*");
  std::string cursor = "0";
  do {
    auto page = display.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!page.ok() || page->elements.size() != 2) break;
    cursor = page->elements[0].str;
    for (const auto& k : page->elements[1].elements) pool_keys.insert(k.str);
  } while (cursor != "0");
  for (const std::string& key : pool_keys) {
    auto published = display.Command({"GET", key});
    if (!published.ok() || published->is_nil()) continue;
    auto stats = ParseStatsJson(published->str);
    if (!stats.ok()) continue;
    for (const EndpointStats& e : *stats) {
      auto it = std::find_if(r.rpc_endpoints.begin(), r.rpc_endpoints.end(),
                             [&](const auto& x) { return x.totals.endpoint == e.endpoint; });
      if (it == r.rpc_endpoints.end()) {
        r.rpc_endpoints.push_back({});
        it = r.rpc_endpoints.end() - 1;
        it->totals.endpoint = e.endpoint;
        it->totals.weight = e.weight;
        it->totals.latency_ewma_ms = 0;
      }
      StatusReport::RpcEndpoint& t = *it;
      t.processes += 1;
      t.out_in += e.in ? 0 : 1;
      t.totals.in = t.out_in == 0;
      t.totals.cooling = t.totals.cooling || e.cooling;
      t.totals.latency_ewma_ms +=
          (e.latency_ewma_ms - t.totals.latency_ewma_ms) / static_cast<double>(t.processes);
      t.totals.batch_limit = e.batch_limit == 0 ? t.totals.batch_limit
                             : t.totals.batch_limit == 0
                                 ? e.batch_limit
                                 : std::min(t.totals.batch_limit, e.batch_limit);
      for (const auto& m : e.missing_methods) {
        if (std::find(t.totals.missing_methods.begin(), t.totals.missing_methods.end(), m) ==
            t.totals.missing_methods.end()) {
          t.totals.missing_methods.push_back(m);
        }
      }
      if (!e.other_chain.empty()) t.totals.other_chain = e.other_chain;
      t.totals.requests += e.requests;
      t.totals.good += e.good;
      t.totals.failures += e.failures;
      t.totals.rate_limited += e.rate_limited;
      t.totals.distrusted += e.distrusted;
      t.totals.hedges += e.hedges;
      t.totals.hedge_wins += e.hedge_wins;
      t.totals.calls_served += e.calls_served;
    }
  }
  // The warnings, from the text report's lines (one rule for both).
  std::ostringstream text;
  WriteStatusText(r, text);
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line);) CollectWarnings(line, &r.warnings);
  return r;
}

Result<Outcome> RunStatus(const StatusCommand& command, std::ostream& out) {
  GAPLESS_ASSIGN_OR_RETURN(FleetState fleet, OpenFleetState(command.fleet));
  GAPLESS_ASSIGN_OR_RETURN(StatusReport report, GatherStatus(fleet, command));
  if (command.json) {
    out << StatusJson(report) << "\n";
  } else {
    WriteStatusText(report, out);
  }
  return Outcome::kDone;
}

}  // namespace gapless

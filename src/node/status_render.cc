// status_render: a StatusReport (node/status.h) as the text report `gapless status` prints and as
// the JSON object of `gapless status --json` and /status.json. Pure functions of the report.
#include <fmt/format.h>

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "events/event.h"
#include "events/open_bus.h"
#include "node/status.h"
#include "rpc/endpoint_pool.h"

namespace gapless {
namespace {

std::string Seconds(int64_t ms) { return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000); }

// The frontier is the next block not known to be committed: the last contiguous block is one
// below it.
std::string FrontierText(const std::optional<uint64_t>& next) {
  if (!next.has_value()) return "none";
  if (*next == 0) return "nothing committed yet";
  return fmt::format("block {} (every block up to it is committed)", *next - 1);
}

}  // namespace

void WriteStatusText(const StatusReport& r, std::ostream& out) {
  out << fmt::format("chain {}   (redis keys {}*)\n", r.chain_id, r.key_prefix);
  out << fmt::format("leader                 {}\n", r.leader.text);
  if (r.quorum > 0) {
    out << fmt::format("lock nodes ({}, quorum {})\n", r.lock_nodes.size(), r.quorum);
    for (const auto& v : r.lock_nodes) {
      if (!v.reachable) {
        out << fmt::format("  {:<22} unreachable: {}\n", v.name, v.error);
        continue;
      }
      out << fmt::format("  {:<22} holder {:<36} epoch {:<6} log {} heights{}\n", v.name,
                         v.holder.empty() ? "(free)" : v.holder, v.epoch, v.log_length,
                         v.top_height.has_value() ? fmt::format(" (top {})", *v.top_height) : "");
    }
    out << fmt::format("head log               {}\n", r.head_log);
  }
  for (const std::string& line : r.redis_lines) out << line << "\n";
  out << fmt::format("frontier (PostgreSQL)  {}\n", FrontierText(r.frontier_pg));
  out << fmt::format("frontier (Redis)       {}\n", FrontierText(r.frontier_redis));
  out << fmt::format("chain head             {}", r.head_text);
  if (r.head.has_value() && r.frontier_pg.has_value()) {
    uint64_t done = *r.frontier_pg;
    out << fmt::format(" (lag {} blocks)", *r.head + 1 > done ? *r.head + 1 - done : 0);
  }
  out << "\n";
  if (r.partitions_unindexed == 0) {
    out << "indexes                every partition indexed\n";
  } else {
    out << fmt::format(
        "indexes                {} partition{} without their lookup indexes yet (the lowest at "
        "block {}): built by the leader when due; a lookup by hash or address reads them whole\n",
        r.partitions_unindexed, r.partitions_unindexed == 1 ? "" : "s",
        r.unindexed_lowest.value_or(0));
  }
  if (r.missing_datasets.empty()) {
    out << "datasets               every dataset a run asked for is written\n";
  } else {
    const DatasetGap& first = r.missing_datasets.front();
    out << fmt::format(
        "datasets               {}: runs asked for them; `gapless index --from {} --to {} {}` "
        "writes them (for each range listed)\n",
        DescribeGaps(r.missing_datasets), first.from, first.to, HowToAskFor(first.dataset));
  }
  for (size_t i = 0; i < r.decoded_tables.size(); ++i) {
    const StatusReport::TableCursor& c = r.decoded_tables[i];
    out << fmt::format("{:<23}{}: {}\n", i == 0 ? "decoded tables" : "", c.table,
                       c.through.has_value()
                           ? fmt::format("blocks {}..{} decoded", c.from, *c.through)
                           : fmt::format("from block {}, none decoded yet", c.from));
  }
  if (r.reorgs == 0) {
    out << "re-orgs rolled back    none\n";
  } else {
    out << fmt::format("re-orgs rolled back    {} (last: {} blocks above block {}, at {} UTC)\n",
                       r.reorgs, r.last_reorg_depth, r.last_reorg_fork_point, r.last_reorg_at);
  }
  if (r.gap.has_value()) {
    out << fmt::format(
        "gap                    blocks {}..{} missing from the stream for {:.0f} s, "
        "{}  WARNING\n",
        r.gap->from, r.gap->to, r.gap->open_s,
        r.gap->healing ? "queued for RPC workers" : "not healed yet");
  }
  out << fmt::format("queue                  {} pending, {} processing, {} dead-lettered\n",
                     r.pending, r.processing, r.dead_lettered);
  out << fmt::format("leases ({})\n", r.leases.size());
  for (const auto& l : r.leases) {
    out << fmt::format("  {:<24} {:<32} token {:<8} {}\n", l.task, l.worker, l.token,
                       l.expires_in_ms >= 0 ? "expires in " + Seconds(l.expires_in_ms)
                                            : "expired " + Seconds(-l.expires_in_ms) + " ago");
  }
  if (!r.events_on) {
    out << "events                 off (no process has run with --events on this database)\n";
  } else {
    out << fmt::format("events                 on from block {}; outbox {} blocks, {} events{}\n",
                       r.events_from, r.outbox_blocks, r.outbox_events,
                       r.outbox_lowest
                           ? fmt::format(" (blocks {}..{})", *r.outbox_lowest, *r.outbox_highest)
                           : "");
    for (const auto& b : r.buses) {
      out << fmt::format("  {:<36} published up to block {}, {} events, last at {} (epoch {})\n",
                         b.bus, b.published_through ? std::to_string(*b.published_through) : "-",
                         b.events_sent, b.published_at, b.epoch);
    }
    for (const auto& g : r.groups) {
      out << fmt::format("  group {:<20} on {:<28} {}\n", g.group, g.bus,
                         g.lag ? fmt::format("lag {} events", *g.lag) : "unknown: " + g.error);
    }
  }
  if (!r.rpc_endpoints.empty()) {
    out << fmt::format("rpc endpoints ({})\n", r.rpc_endpoints.size());
    for (const auto& e : r.rpc_endpoints) {
      out << fmt::format("  {:<40} {}{}\n", e.totals.endpoint, DescribeStats(e.totals),
                         e.out_in > 0 ? fmt::format("   WARNING: taken out in {} of {} processes",
                                                    e.out_in, e.processes)
                                      : "");
    }
  }
  out << fmt::format("live workers ({})\n", r.workers.size());
  for (const auto& w : r.workers) {
    out << fmt::format("  {:<32} {}:{:<8} {:<24} {:.1f} blocks/s, beat {} ago\n", w.worker, w.host,
                       w.pid, w.range.empty() ? "idle" : w.range, w.blocks_per_s,
                       Seconds(w.beat_ms_ago));
  }
}

namespace {

// A tiny JSON writer: objects and arrays by hand, strings escaped by AppendJsonString.
std::string Str(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

template <class T>
std::string OptNum(const std::optional<T>& v) {
  return v.has_value() ? std::to_string(*v) : "null";
}

}  // namespace

std::string StatusJson(const StatusReport& r) {
  std::string o = "{";
  o += fmt::format("\"chain_id\":{},\"now_ms\":{},", r.chain_id, r.now_ms);
  o += "\"leader\":{\"known\":" + std::string(r.leader.known ? "true" : "false") +
       ",\"text\":" + Str(r.leader.text);
  if (r.leader.known) {
    o += ",\"host\":" + Str(r.leader.host) + ",\"pid\":" + Str(r.leader.pid) +
         fmt::format(",\"epoch\":{},\"since_ms\":{},\"on_nodes\":{}", r.leader.epoch,
                     r.leader.since_ms, r.leader.on_nodes);
  }
  o += "},\"lock_nodes\":[";
  for (size_t i = 0; i < r.lock_nodes.size(); ++i) {
    const auto& n = r.lock_nodes[i];
    o += (i > 0 ? "," : "") + std::string("{\"node\":") + Str(n.name) +
         ",\"reachable\":" + (n.reachable ? "true" : "false") + ",\"error\":" + Str(n.error) +
         ",\"holder\":" + Str(n.holder) +
         fmt::format(",\"epoch\":{},\"log_length\":{},\"top_height\":{}}}", n.epoch, n.log_length,
                     OptNum(n.top_height));
  }
  o += fmt::format("],\"quorum\":{},\"head_log\":{},\"head_log_committed\":{},", r.quorum,
                   Str(r.head_log), OptNum(r.head_log_committed));
  o += "\"redis\":[";
  for (size_t i = 0; i < r.redis_lines.size(); ++i) {
    o += (i > 0 ? "," : "") + Str(r.redis_lines[i]);
  }
  o += fmt::format("],\"frontier\":{},\"frontier_redis\":{},\"head\":{},\"head_text\":{},",
                   OptNum(r.frontier_pg), OptNum(r.frontier_redis), OptNum(r.head),
                   Str(r.head_text));
  std::optional<uint64_t> lag;
  if (r.head.has_value() && r.frontier_pg.has_value()) {
    lag = *r.head + 1 > *r.frontier_pg ? *r.head + 1 - *r.frontier_pg : 0;
  }
  o += fmt::format(
      "\"lag\":{},\"reorgs\":{{\"count\":{},\"last_depth\":{},"
      "\"last_fork_point\":{},\"last_at\":{}}},",
      OptNum(lag), r.reorgs, r.last_reorg_depth, r.last_reorg_fork_point, Str(r.last_reorg_at));
  o += fmt::format("\"indexes\":{{\"partitions_unindexed\":{},\"lowest_unindexed\":{}}},",
                   r.partitions_unindexed, OptNum(r.unindexed_lowest));
  o += "\"decoded_tables\":[";
  for (size_t i = 0; i < r.decoded_tables.size(); ++i) {
    const StatusReport::TableCursor& c = r.decoded_tables[i];
    o += fmt::format("{}{{\"table\":{},\"from\":{},\"through\":{}}}", i == 0 ? "" : ",",
                     Str(c.table), c.from,
                     c.through.has_value() ? std::to_string(*c.through) : "null");
  }
  o += "],";
  o += "\"missing_datasets\":[";
  for (size_t i = 0; i < r.missing_datasets.size(); ++i) {
    const DatasetGap& g = r.missing_datasets[i];
    o += fmt::format("{}{{\"dataset\":{},\"from\":{},\"to\":{}}}", i == 0 ? "" : ",",
                     Str(g.dataset), g.from, g.to);
  }
  o += "],";
  if (r.gap.has_value()) {
    o += fmt::format("\"gap\":{{\"from\":{},\"to\":{},\"open_s\":{:.1f},\"healing\":{}}},",
                     r.gap->from, r.gap->to, r.gap->open_s, r.gap->healing ? "true" : "false");
  } else {
    o += "\"gap\":null,";
  }
  o += fmt::format("\"queue\":{{\"pending\":{},\"processing\":{},\"dead_lettered\":{}}},",
                   r.pending, r.processing, r.dead_lettered);
  o += "\"leases\":[";
  for (size_t i = 0; i < r.leases.size(); ++i) {
    const auto& l = r.leases[i];
    o += (i > 0 ? "," : "") + std::string("{\"task\":") + Str(l.task) +
         ",\"worker\":" + Str(l.worker) +
         fmt::format(",\"token\":{},\"expires_in_ms\":{}}}", l.token, l.expires_in_ms);
  }
  o += "],\"events\":{\"on\":" + std::string(r.events_on ? "true" : "false");
  if (r.events_on) {
    o += fmt::format(",\"from\":{},\"outbox_blocks\":{},\"outbox_events\":{}", r.events_from,
                     r.outbox_blocks, r.outbox_events);
  }
  o += ",\"buses\":[";
  for (size_t i = 0; i < r.buses.size(); ++i) {
    const auto& b = r.buses[i];
    std::optional<uint64_t> backlog;
    if (b.published_through.has_value() && r.frontier_pg.has_value()) {
      backlog =
          *r.frontier_pg > *b.published_through + 1 ? *r.frontier_pg - *b.published_through - 1 : 0;
    }
    o += (i > 0 ? "," : "") + std::string("{\"bus\":") + Str(BusName(b.bus)) +
         fmt::format(",\"published_through\":{},\"backlog_blocks\":{},\"events_sent\":{},",
                     OptNum(b.published_through), OptNum(backlog), b.events_sent) +
         "\"published_at\":" + Str(b.published_at) + fmt::format(",\"epoch\":{}}}", b.epoch);
  }
  o += "],\"groups\":[";
  for (size_t i = 0; i < r.groups.size(); ++i) {
    const auto& g = r.groups[i];
    o += (i > 0 ? "," : "") + std::string("{\"group\":") + Str(g.group) + ",\"bus\":" + Str(g.bus) +
         ",\"lag\":" + OptNum(g.lag) + ",\"error\":" + Str(g.error) + "}";
  }
  o += "]},\"workers\":[";
  for (size_t i = 0; i < r.workers.size(); ++i) {
    const auto& w = r.workers[i];
    o +=
        (i > 0 ? "," : "") + std::string("{\"worker\":") + Str(w.worker) +
        ",\"host\":" + Str(w.host) + fmt::format(",\"pid\":{},\"range\":", w.pid) + Str(w.range) +
        fmt::format(",\"blocks_per_s\":{:.2f},\"beat_ms_ago\":{}}}", w.blocks_per_s, w.beat_ms_ago);
  }
  o += "],\"rpc_endpoints\":[";
  for (size_t i = 0; i < r.rpc_endpoints.size(); ++i) {
    const auto& e = r.rpc_endpoints[i];
    o += (i > 0 ? "," : "") + StatsJsonFields(e.totals) +
         fmt::format(",\"processes\":{},\"out_in\":{}}}", e.processes, e.out_in);
  }
  o += "],\"warnings\":[";
  for (size_t i = 0; i < r.warnings.size(); ++i) o += (i > 0 ? "," : "") + Str(r.warnings[i]);
  o += "]}";
  return o;
}

}  // namespace gapless

// invariants/events: each bus's events against the final chain (invariants.h): events-order,
// events-complete, events-retracted, events-transfers, named per bus ("events-order (redis)").
// The events are read off the bus itself: the Redis streams whole, RabbitMQ's tap queue bound
// before anything was published, Kafka's topics from their beginning.
#include <fmt/format.h>
#include <simdjson.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "chaos/invariants/invariants.h"
#include "events/balances.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/head_tracker.h"

namespace gapless::chaos {

Result<std::map<std::string, std::vector<Envelope>>> ReadBus(const Bus& bus,
                                                             const std::vector<std::string>& types,
                                                             uint64_t tip) {
  std::map<std::string, std::vector<Envelope>> out;
  if (bus.name == "redis") {
    // The streams themselves, whole.
    GAPLESS_ASSIGN_OR_RETURN(auto redis, RedisConn::Connect(bus.url));
    for (const std::string& type : types) {
      GAPLESS_ASSIGN_OR_RETURN(RedisReply r,
                               redis->Command({"XRANGE", EventTopic(type, kChainId), "-", "+"}));
      for (const RedisReply& entry : r.elements) {
        if (entry.elements.size() < 2) continue;
        const auto& fields = entry.elements[1].elements;
        for (size_t i = 0; i + 1 < fields.size(); i += 2) {
          if (fields[i].str != "body") continue;
          auto env = ParseEnvelope(fields[i + 1].str);
          if (env.ok()) out[type].push_back(*env);
        }
      }
    }
    return out;
  }
  // RabbitMQ: the tap queue bound at the start; Kafka: every partition from its beginning
  // (a throw-away group). Read until nothing more comes for a while.
  SubscribeOptions sub;
  sub.group = bus.name == "amqp" ? "chaos-tap" : fmt::format("chaos-tap-{}", getpid());
  sub.transient = bus.name == "kafka";
  sub.from_beginning = true;
  for (const std::string& type : types) sub.topics.push_back(EventTopic(type, kChainId));
  GAPLESS_ASSIGN_OR_RETURN(auto subscriber, OpenSubscriber(bus.url, sub));
  const Clock::time_point begin = Clock::now();
  auto last = Clock::now();
  size_t total = 0;
  bool tip_seen = false;
  simdjson::dom::parser parser;
  while (Clock::now() - begin < std::chrono::seconds(180)) {
    GAPLESS_ASSIGN_OR_RETURN(auto batch, subscriber->Poll(1000, 500));
    for (const Delivery& d : batch) {
      auto env = ParseEnvelope(d.body);
      if (!env.ok()) continue;
      if (env->event_type == kBlockNew) {
        simdjson::dom::element doc;
        uint64_t n = 0;
        if (!parser.parse(env->payload_json).get(doc) && !doc["block_number"].get_uint64().get(n)) {
          tip_seen = tip_seen || n == tip;
        }
      }
      out[std::string(env->event_type)].push_back(*env);
    }
    if (!batch.empty()) {
      total += batch.size();
      last = Clock::now();
      if (bus.name == "amqp") GAPLESS_RETURN_IF_ERROR(subscriber->AckAll(batch));
    }
    // Kafka's group join takes a few seconds before the first delivery; before the tip's
    // block.new has come, a pause is a busy machine's, not the end.
    const auto quiet = total == 0 || !tip_seen ? std::chrono::seconds(20) : std::chrono::seconds(3);
    if (Clock::now() - last > quiet) break;
  }
  return out;
}

void CheckEvents(Deployment& d, uint64_t tip, const Bus& bus, SeedReport* report) {
  const std::string suffix = " (" + bus.name + ")";
  auto headers = FetchHeaders(*d.rpc_, 0, tip);
  auto events = ReadBus(bus, CheckedTypes(), tip);
  if (!events.ok() || !headers.ok()) {
    report->invariants.push_back(
        {"events-complete" + suffix, false,
         "cannot read the bus or the chain: " +
             (events.ok() ? headers.status().ToString() : events.status().ToString())});
    return;
  }
  auto read = [&](const std::string& type) { return (*events)[type]; };
  simdjson::dom::parser parser;
  struct BlockNew {
    BlockNewSeen seen;
    const Envelope* envelope;
  };
  std::vector<BlockNew> blocks;
  const std::vector<Envelope> block_news = read(std::string(kBlockNew));
  for (const Envelope& e : block_news) {
    simdjson::dom::element doc;
    uint64_t n = 0;
    std::string_view hash;
    std::string_view parent;
    if (parser.parse(e.payload_json).get(doc) || doc["block_number"].get_uint64().get(n) ||
        doc["hash"].get_string().get(hash) || doc["parent_hash"].get_string().get(parent)) {
      continue;
    }
    blocks.push_back({{n, std::string(hash), std::string(parent), e.event_id}, &e});
  }
  uint64_t events_from = 0;
  {
    auto conn = d.pool_->Acquire();
    auto r = conn->Query("SELECT value::bigint FROM indexer_state WHERE key = 'events_from'");
    if (r.ok() && r->rows() == 1) events_from = static_cast<uint64_t>(r->GetInt64(0, 0).value());
  }
  std::vector<BlockNewSeen> stream;
  stream.reserve(blocks.size());
  for (const BlockNew& b : blocks) stream.push_back(b.seen);
  std::string order = BlockNewOrderViolation(events_from, stream);
  if (!order.empty()) {
    // What the bus holds, in its order, for whoever looks into it.
    const std::string path = d.dir_ + "/block-new-" + bus.name + ".txt";
    std::ofstream out(path, std::ios::trunc);
    out << "# number hash parent_hash event_id producer timestamp\n";
    for (const BlockNew& b : blocks) {
      out << b.seen.number << ' ' << b.seen.hash << ' ' << b.seen.parent_hash << ' '
          << b.envelope->event_id << ' ' << b.envelope->producer << ' ' << b.envelope->timestamp
          << '\n';
    }
    order += " (the bus's block.new in order: " + path + ")";
  }
  report->invariants.push_back({"events-order" + suffix, order.empty(), order});
  std::set<std::string> published;
  for (const BlockNew& b : blocks) published.insert(b.seen.hash);
  std::set<std::string> canonical;
  std::string missing;
  for (const HeadEntry& h : *headers) {
    canonical.insert(h.hash);
    if (missing.empty() && h.height >= events_from && !published.count(h.hash)) {
      missing = fmt::format("block {} ({}) has no block.new", h.height, h.hash);
    }
  }
  report->invariants.push_back({"events-complete" + suffix, missing.empty(), missing});
  std::set<std::string> reverted;
  std::set<std::string> retracted_ids;  // every event id a block.reverted took back
  for (const Envelope& e : read(std::string(kBlockReverted))) {
    auto r = ParseBlockRevertedPayload(e.payload_json);
    if (!r.ok()) continue;
    reverted.insert(r->block_hash);
    retracted_ids.insert(r->reverted_event_ids.begin(), r->reverted_event_ids.end());
  }
  std::string unretracted;
  for (const BlockNew& b : blocks) {
    if (!canonical.count(b.seen.hash) && !reverted.count(b.seen.hash)) {
      unretracted =
          fmt::format("orphaned block {} ({}) has no block.reverted", b.seen.number, b.seen.hash);
      break;
    }
  }
  report->invariants.push_back({"events-retracted" + suffix, unretracted.empty(), unretracted});
  // token.transfer per canonical block = its rows, counting the ids in effect: a block that
  // came back after a retraction (a flip-flop) was published again under new ids, and its old
  // ones were taken back.
  std::map<std::string, std::set<std::string>> transfer_ids;
  for (const Envelope& e : read(std::string(kTokenTransfer))) {
    auto t = ParseTransferPayload(e.payload_json);
    if (t.ok() && !retracted_ids.count(e.event_id)) transfer_ids[t->block_hash].insert(e.event_id);
  }
  std::string transfers;
  auto conn = d.pool_->Acquire();
  auto rows = conn->Query(
      "SELECT '0x' || encode(b.hash, 'hex'), b.number, (SELECT count(*) FROM token_transfers t "
      "WHERE t.block_number = b.number) FROM blocks b WHERE b.number >= $1 ORDER BY b.number",
      {std::to_string(events_from)});
  if (!rows.ok()) {
    transfers = rows.status().ToString();
  } else {
    for (int i = 0; i < rows->rows() && transfers.empty(); ++i) {
      const std::string hash(rows->Get(i, 0));
      const int64_t want = rows->GetInt64(i, 2).value();
      const int64_t got = static_cast<int64_t>(transfer_ids[hash].size());
      if (want != got) {
        transfers =
            fmt::format("block {}: {} token.transfer events, {} rows", rows->Get(i, 1), got, want);
      }
    }
  }
  report->invariants.push_back({"events-transfers" + suffix, transfers.empty(), transfers});
}

std::string BlockNewOrderViolation(uint64_t events_from, const std::vector<BlockNewSeen>& stream) {
  std::set<std::string> delivered;                 // event ids
  std::map<uint64_t, const BlockNewSeen*> latest;  // height -> the latest first delivery there
  for (const BlockNewSeen& b : stream) {
    if (!delivered.insert(b.event_id).second) continue;  // a repeated delivery
    if (b.number > events_from) {
      auto below = latest.find(b.number - 1);
      if (below == latest.end()) {
        return fmt::format("block.new of block {} ({}) came before any of block {} (hole)",
                           b.number, b.hash, b.number - 1);
      }
      if (below->second->hash != b.parent_hash) {
        return fmt::format(
            "block.new of block {} ({}, parent {}) came when the latest block.new of block {} "
            "was {} (its parent not announced again)",
            b.number, b.hash, b.parent_hash, b.number - 1, below->second->hash);
      }
    }
    latest[b.number] = &b;
  }
  return "";
}

}  // namespace gapless::chaos

// Events end to end, with real processes and real brokers: the fleet indexes the devnet (with
// token transfers of every standard) while its workers are killed, and a consumer on each bus
// receives every block.new in chain order and every token.transfer, payloads equal to the rows
// in PostgreSQL; the relay killed between publish and mark re-publishes with the same ids; a
// broker that is down holds the events back in the outbox without costing the leader its lease.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <set>

#include "devnet_util.h"
#include "events/balances.h"
#include "events/consumer.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/mempool.h"
#include "store/outbox.h"
#include "store/reader.h"
#include "store/state.h"
#include "testing/free_port.h"
#include "testing/kafka_mock.h"
#include "testing/rabbitmq_server.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

using testing_util::NowMs;
using testing_util::WaitFor;

const Devnet& TheDevnet() {
  static const Devnet devnet = OpenDevnet(GAPLESS_TEST_ANVIL_URL, GAPLESS_TEST_DEVNET_MANIFEST);
  return devnet;
}

// A bus started for one test.
struct Bus {
  std::string url;      // what the relay publishes to
  std::string sub_url;  // what the test's consumer reads from
  std::unique_ptr<RedisServer> redis;
  std::unique_ptr<RabbitMqServer> rabbit;
  std::unique_ptr<KafkaMockCluster> kafka;

  // The broker stops taking events (RabbitMQ stopped; Kafka: the broker leading every topic down).
  void Down() {
    if (rabbit) rabbit->Stop();
    if (kafka) {
      EXPECT_TRUE(kafka->SetBrokerDown(1).ok());
    }
  }
  void Up() {
    if (rabbit) {
      EXPECT_TRUE(rabbit->Restart().ok());
    }
    if (kafka) {
      EXPECT_TRUE(kafka->SetBrokerUp(1).ok());
    }
  }
};

Bus StartBus(const std::string& kind, uint64_t chain_id) {
  Bus bus;
  if (kind == "kafka") {
    auto s = KafkaMockCluster::Start(3);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return bus;
    bus.kafka = std::move(s).value();
    // One partition per topic (the key, the chain id, would pick one anyway), led by broker 1.
    for (std::string_view type : EventTypes()) {
      std::string topic = EventTopic(type, chain_id);
      EXPECT_TRUE(bus.kafka->CreateTopic(topic, 1, 3).ok());
      EXPECT_TRUE(bus.kafka->SetLeader(topic, 0, 1).ok());
    }
    bus.url = bus.kafka->url();
    // The mock's group coordinator makes a new member wait out the session timeout.
    bus.sub_url = bus.url + "?session.timeout.ms=4500&heartbeat.interval.ms=1000";
    return bus;
  }
  if (kind == "redis") {
    auto s = RedisServer::Start();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) {
      bus.redis = std::move(s).value();
      bus.url = bus.redis->url();
    }
  } else if (kind == "amqp") {
    auto s = RabbitMqServer::Start();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) {
      bus.rabbit = std::move(s).value();
      bus.url = bus.rabbit->url();
    }
  }
  bus.sub_url = bus.url;
  return bus;
}

std::unique_ptr<Subscriber> SubscribeAll(const std::string& url, uint64_t chain_id,
                                         const std::string& group) {
  SubscribeOptions options;
  options.group = group;
  options.from_beginning = true;
  for (std::string_view type : EventTypes()) options.topics.push_back(EventTopic(type, chain_id));
  auto s = OpenSubscriber(url, options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  // Opened, the group exists (AMQP: the queue is declared; Redis and Kafka: a new group reads
  // from the beginning).
  return s.ok() ? std::move(s).value() : nullptr;
}

struct Received {
  std::vector<Envelope> in_order;                 // every delivery, as it came
  std::map<std::string, std::string> body_by_id;  // the last body seen for each id
  std::map<std::string, int> times_by_id;
};

// Polls until `done(received)` or timeout_ms; acks everything.
template <typename Done>
Received Consume(Subscriber& s, int64_t timeout_ms, Done done) {
  Received r;
  int64_t end = NowMs() + timeout_ms;
  while (NowMs() < end && !done(r)) {
    auto batch = s.Poll(500, 200);
    if (!batch.ok()) continue;
    for (const Delivery& d : *batch) {
      auto env = ParseEnvelope(d.body);
      EXPECT_TRUE(env.ok()) << env.status().ToString() << " in " << d.body;
      if (env.ok()) {
        r.body_by_id[env->event_id] = d.body;
        ++r.times_by_id[env->event_id];
        r.in_order.push_back(std::move(env).value());
      }
      EXPECT_TRUE(s.Ack(d).ok());
    }
  }
  return r;
}

// The events of blocks 0..to as built from the database: what every bus must have received.
std::vector<OutgoingEvent> ExpectedEvents(PgPool* pool, uint64_t chain_id, uint64_t to) {
  auto conn = pool->Acquire();
  auto blocks = ReadBlocks(*conn, 0, to);
  EXPECT_TRUE(blocks.ok());
  std::vector<OutgoingEvent> out;
  if (!blocks.ok()) return out;
  for (const BlockData& d : *blocks) {
    for (OutgoingEvent& e : BlockEvents(chain_id, d)) out.push_back(std::move(e));
  }
  return out;
}

// Every block.new's first delivery comes in chain order 0..to, each block once before the next.
void ExpectBlocksInChainOrder(const Received& r, uint64_t to) {
  std::set<std::string> seen;
  std::vector<uint64_t> firsts;
  for (const Envelope& e : r.in_order) {
    if (e.event_type != kBlockNew || !seen.insert(e.event_id).second) continue;
    auto pos = e.payload_json.find("\"block_number\":");
    ASSERT_NE(pos, std::string::npos);
    firsts.push_back(std::stoull(e.payload_json.substr(pos + 15)));
  }
  ASSERT_EQ(firsts.size(), to + 1);
  for (uint64_t i = 0; i <= to; ++i) ASSERT_EQ(firsts[i], i) << "block.new out of chain order";
}

// Independently of the event builder: each token.transfer payload equals its token_transfers row.
void ExpectTransfersEqualRows(PgPool* pool, const Received& r) {
  auto conn = pool->Acquire();
  auto rows = conn->Query(
      "SELECT x.block_number, log_index, batch_index, '0x' || encode(token_address, 'hex'),"
      " '0x' || encode(from_address, 'hex'), '0x' || encode(to_address, 'hex'), value::text,"
      " coalesce(token_id::text, ''), '0x' || encode(transaction_hash, 'hex'), token_standard,"
      " k.symbol, k.decimals::text"
      " FROM token_transfers x LEFT JOIN tokens k ON k.address = x.token_address"
      " ORDER BY 1, 2, 3");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, TransferEvent> got;
  for (const Envelope& e : r.in_order) {
    if (e.event_type != kTokenTransfer) continue;
    auto t = ParseTransferPayload(e.payload_json);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    got[{t->block_number, t->log_index, t->batch_index}] = *t;
  }
  ASSERT_EQ(got.size(), static_cast<size_t>(rows->rows()));
  ASSERT_GT(rows->rows(), 10);
  for (int i = 0; i < rows->rows(); ++i) {
    auto key = std::make_tuple(std::stoull(std::string(rows->Get(i, 0))),
                               std::stoull(std::string(rows->Get(i, 1))),
                               std::stoull(std::string(rows->Get(i, 2))));
    ASSERT_TRUE(got.contains(key)) << "no token.transfer for block " << std::get<0>(key);
    const TransferEvent& t = got[key];
    EXPECT_EQ(t.token_address, rows->Get(i, 3));
    EXPECT_EQ(t.from_address, rows->Get(i, 4));
    EXPECT_EQ(t.to_address, rows->Get(i, 5));
    EXPECT_EQ(t.amount, rows->Get(i, 6));
    EXPECT_EQ(t.token_id.value_or(""), rows->Get(i, 7));
    EXPECT_EQ(t.transaction_hash, rows->Get(i, 8));
    EXPECT_EQ(t.token_standard, "erc" + std::string(rows->Get(i, 9)));
    // The token's metadata as the tokens table holds it (null where the token lacks the method).
    EXPECT_EQ(t.token_symbol.value_or("NULL"),
              rows->IsNull(i, 10) ? "NULL" : std::string(rows->Get(i, 10)));
    EXPECT_EQ(t.token_decimals.has_value() ? std::to_string(*t.token_decimals) : "NULL",
              rows->IsNull(i, 11) ? "NULL" : std::string(rows->Get(i, 11)));
  }
  // The devnet's ERC-20 has both: the join above is not empty.
  auto known = conn->Query("SELECT count(*) FROM tokens WHERE symbol IS NOT NULL");
  ASSERT_TRUE(known.ok());
  EXPECT_GT(known->GetInt64(0, 0).value(), 0);
}

void ExpectEveryEvent(const Received& r, const std::vector<OutgoingEvent>& expected) {
  size_t missing = 0;
  for (const OutgoingEvent& e : expected) {
    auto it = r.body_by_id.find(e.event_id);
    if (it == r.body_by_id.end()) {
      ++missing;
      continue;
    }
    EXPECT_EQ(it->second, e.body);
  }
  EXPECT_EQ(missing, 0u) << "of " << expected.size() << " events";
}

int64_t CountOf(PgPool* pool, const std::string& sql) {
  auto conn = pool->Acquire();
  auto r = conn->Query(sql);
  if (!r.ok()) return -1;
  auto n = r->GetInt64(0, 0);
  return n.ok() ? *n : -1;
}

class EventsTest : public DbRedisTest, public ::testing::WithParamInterface<std::string> {};

// The fleet (a leader candidate publishing to the bus, two worker processes killed and restarted
// while they index) and a consumer group on the bus.
TEST_P(EventsTest, EveryCommittedEventArrivesAndBlocksComeInChainOrder) {
  const Devnet& devnet = TheDevnet();
  const uint64_t to = devnet.last_block();
  Bus bus = StartBus(GetParam(), TheDevnet().chain_id());
  ASSERT_FALSE(bus.url.empty());
  auto subscriber = SubscribeAll(bus.sub_url, devnet.chain_id(), "test-consumer");
  ASSERT_NE(subscriber, nullptr);

  const std::string log = ::testing::TempDir() + "events-fleet.log";
  FleetFlags leader_flags{.workers = "0", .extra = {"--events", bus.url}};
  // The workers index traces: their internal transfers are events too.
  FleetFlags worker_flags{.extra = {"--traces"}};
  pid_t leader = Spawn(FleetCommand("run", devnet, db_.url(), redis_url_, to, leader_flags), log);
  std::vector<pid_t> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(
        Spawn(FleetCommand("worker", devnet, db_.url(), redis_url_, to, worker_flags), log));
  }
  // Kill a worker every 700 ms and start a new one, until the leader is done.
  int kills = 0;
  for (int round = 0; round < 200 && ProcessState(leader) != 'Z' && ProcessState(leader) != 0;
       ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    pid_t victim = workers[round % workers.size()];
    kill(victim, SIGKILL);
    WaitForExit(victim, 10);
    ++kills;
    workers[round % workers.size()] =
        Spawn(FleetCommand("worker", devnet, db_.url(), redis_url_, to, worker_flags), log);
  }
  EXPECT_EQ(WaitForExit(leader, 120), 0) << "see " << log;
  for (pid_t w : workers) {
    kill(w, SIGTERM);
    WaitForExit(w, 20);
  }
  EXPECT_GT(kills, 0);

  std::vector<OutgoingEvent> expected = ExpectedEvents(pool_.get(), devnet.chain_id(), to);
  Received r = Consume(*subscriber, 60'000, [&](const Received& got) {
    return got.body_by_id.size() >= expected.size();
  });
  ExpectEveryEvent(r, expected);
  ExpectBlocksInChainOrder(r, to);
  ExpectTransfersEqualRows(pool_.get(), r);
  // One trace.internal_transfer per internal transfer in the traces table (the devnet's
  // forwarders, factory and self-destructs make them).
  std::set<std::string> internal_ids;  // deliveries may repeat: distinct ids
  for (const Envelope& e : r.in_order) {
    if (e.event_type == kInternalTransfer) internal_ids.insert(e.event_id);
  }
  const size_t internal = internal_ids.size();
  const int64_t stored = CountOf(
      pool_.get(), std::string("SELECT count(*) FROM traces WHERE ") + kInternalTransferSql);
  EXPECT_GT(stored, 0);
  EXPECT_EQ(static_cast<int64_t>(internal), stored);
  // The outbox is pruned once every block was confirmed.
  auto conn = pool_->Acquire();
  auto stats = LoadOutboxStats(*conn);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->rows, 0u);
  // `status` shows it all: events on, the empty outbox, the bus's cursor at the last block, and
  // the consumer group's lag.
  auto [code, status] =
      RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis", redis_url_, "--bus",
                    bus.sub_url, "--group", "test-consumer", "--log-level", "warn"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(status.find("events                 on from block 0; outbox 0 blocks"),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("published up to block " + std::to_string(to) + ", " +
                        std::to_string(expected.size()) + " events"),
            std::string::npos)
      << status;
  if (GetParam() != "kafka") {  // Kafka's offsets are committed asynchronously
    EXPECT_NE(status.find("group test-consumer"), std::string::npos) << status;
    EXPECT_NE(status.find("lag 0 events"), std::string::npos) << status;
  }
}

// The relay killed after the broker confirmed a batch and before it moved its cursor
// (failpoint relay-crash-after-publish): the next run publishes that batch again, same ids.
TEST_P(EventsTest, ARelayKilledBetweenPublishAndMarkRepublishesWithTheSameIds) {
  const Devnet& devnet = TheDevnet();
  const uint64_t to = devnet.last_block();
  Bus bus = StartBus(GetParam(), TheDevnet().chain_id());
  ASSERT_FALSE(bus.url.empty());
  auto subscriber = SubscribeAll(bus.sub_url, devnet.chain_id(), "crash-consumer");
  ASSERT_NE(subscriber, nullptr);
  // The balances consumer's group exists before anything is published (an AMQP queue only holds
  // what was routed to it after it was declared).
  {
    SubscribeOptions options;
    options.group = "balances-test";
    options.topics = {EventTopic(kTokenTransfer, devnet.chain_id())};
    auto declared = OpenSubscriber(bus.sub_url, options);
    ASSERT_TRUE(declared.ok()) << declared.status().ToString();
  }
  std::vector<std::string> index = {
      GaplessBinary(), "index",  "--rpc",      devnet.url, "--db",
      db_.url(),       "--from", "0",          "--to",     std::to_string(to),
      "--events",      bus.url,  "--progress", "off",      "--log-level",
      "warn"};
  const std::string log = ::testing::TempDir() + "events-crash.log";
  pid_t first = Spawn(index, log, {"GAPLESS_FAILPOINTS=relay-crash-after-publish"});
  EXPECT_EQ(WaitForExit(first, 120), -1) << "the failpoint should have killed it; see " << log;
  pid_t second = Spawn(index, log);
  ASSERT_EQ(WaitForExit(second, 120), 0) << "see " << log;

  std::vector<OutgoingEvent> expected = ExpectedEvents(pool_.get(), devnet.chain_id(), to);
  Received r = Consume(*subscriber, 60'000, [&](const Received& got) {
    return got.body_by_id.size() >= expected.size();
  });
  // Drain what else is there (the duplicates may come after the last new id).
  Received rest = Consume(*subscriber, 1'500, [](const Received&) { return false; });
  for (const Envelope& e : rest.in_order) ++r.times_by_id[e.event_id];
  ExpectEveryEvent(r, expected);
  size_t duplicated = 0;
  for (const auto& [id, times] : r.times_by_id) duplicated += times > 1 ? 1 : 0;
  EXPECT_GT(duplicated, 0u) << "the batch published before the crash should come again";
  // The duplicates are the first batch: block 0's events.
  EXPECT_EQ(r.times_by_id[expected.front().event_id], 2);

  // `gapless consume balances` on the same bus applies every transfer once although the first
  // batch's were delivered twice: token_balances equals the SQL aggregate of token_transfers.
  const int64_t transfers = CountOf(pool_.get(), "SELECT count(*) FROM token_transfers");
  ASSERT_GT(transfers, 0);
  pid_t consumer =
      Spawn({GaplessBinary(), "consume", "balances", "--bus", bus.sub_url, "--db", db_.url(),
             "--redis", redis_url_, "--chain-id", std::to_string(devnet.chain_id()), "--group",
             "balances-test", "--log-level", "warn"},
            log);
  bool applied = WaitFor(
      [&] { return CountOf(pool_.get(), "SELECT count(*) FROM applied_events") == transfers; },
      90'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // nothing more should apply
  kill(consumer, SIGTERM);
  EXPECT_NE(WaitForExit(consumer, 30), -1);
  ASSERT_TRUE(applied) << CountOf(pool_.get(), "SELECT count(*) FROM applied_events") << " of "
                       << transfers << " transfers applied; see " << log;
  EXPECT_EQ(CountOf(pool_.get(), "SELECT count(*) FROM applied_events"), transfers);
  auto conn = pool_->Acquire();
  auto check = CheckBalancesAgainstTransfers(*conn);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->differing, 0);
  EXPECT_GT(check->expected, 0);
}

INSTANTIATE_TEST_SUITE_P(Buses, EventsTest, ::testing::Values("redis", "amqp", "kafka"),
                         [](const auto& info) { return info.param; });

class BrokerDownTest : public EventsTest {};

// `events replay` publishes committed blocks again from the database with the ids and bytes the
// relay would give them: twice replayed, each event arrives twice, identical.
TEST_F(DbTest, ReplayRepublishesCommittedBlocksWithTheSameIds) {
  const Devnet& devnet = TheDevnet();
  constexpr uint64_t kTo = 30;
  ASSERT_TRUE(IndexDevnet(devnet, pool_.get(), kTo).ok());  // no events enabled
  Bus bus = StartBus("redis", devnet.chain_id());
  ASSERT_FALSE(bus.url.empty());
  auto subscriber = SubscribeAll(bus.sub_url, devnet.chain_id(), "replayed");
  ASSERT_NE(subscriber, nullptr);
  for (int i = 0; i < 2; ++i) {
    auto [code, out] =
        RunForOutput({GaplessBinary(), "events", "replay", "--db", db_.url(), "--bus", bus.url,
                      "--from", "0", "--to", std::to_string(kTo), "--log-level", "warn"});
    ASSERT_EQ(code, 0);
  }
  std::vector<OutgoingEvent> expected = ExpectedEvents(pool_.get(), devnet.chain_id(), kTo);
  ASSERT_GT(expected.size(), kTo + 1);
  Received r = Consume(*subscriber, 30'000, [&](const Received& got) {
    return got.in_order.size() >= 2 * expected.size();
  });
  ExpectEveryEvent(r, expected);
  for (const OutgoingEvent& e : expected) EXPECT_EQ(r.times_by_id[e.event_id], 2) << e.body;
  EXPECT_EQ(r.in_order.size(), 2 * expected.size());
}

// `gapless produce` puts blocks 0..20 of the devnet on a Kafka topic (librdkafka's mock cluster,
// 4 partitions) in the block-stream format: one message per block, its receipts added.
TEST(ProduceTest, EveryBlockArrivesAsAMessageWithItsReceipts) {
  const Devnet& devnet = TheDevnet();
  constexpr uint64_t kTo = 20;
  auto cluster = KafkaMockCluster::Start(3);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  ASSERT_TRUE((*cluster)->CreateTopic("blocks", 4).ok());
  auto [code, out] = RunForOutput({GaplessBinary(), "produce", "--rpc", devnet.url, "--brokers",
                                   (*cluster)->bootstrap(), "--topic", "blocks", "--from", "0",
                                   "--to", std::to_string(kTo), "--log-level", "warn"});
  ASSERT_EQ(code, 0);
  SubscribeOptions options;
  options.group = "check";
  options.topics = {"blocks"};
  auto subscriber = OpenSubscriber(
      (*cluster)->url() + "?session.timeout.ms=4500&heartbeat.interval.ms=1000", options);
  ASSERT_TRUE(subscriber.ok()) << subscriber.status().ToString();
  std::map<uint64_t, std::string> by_number;
  int64_t end = NowMs() + 30'000;
  while (NowMs() < end && by_number.size() < kTo + 1) {
    auto batch = (*subscriber)->Poll(100, 200);
    ASSERT_TRUE(batch.ok());
    for (const Delivery& d : *batch) {
      simdjson::dom::parser parser;
      simdjson::dom::element doc;
      ASSERT_EQ(parser.parse(d.body).get(doc), simdjson::SUCCESS) << d.body;
      std::string_view number;
      ASSERT_EQ(doc["number"].get_string().get(number), simdjson::SUCCESS);
      simdjson::dom::array txs, receipts;
      ASSERT_EQ(doc["transactions"].get_array().get(txs), simdjson::SUCCESS);
      ASSERT_EQ(doc["receipts"].get_array().get(receipts), simdjson::SUCCESS);
      EXPECT_EQ(txs.size(), receipts.size()) << "block " << number;
      by_number[std::stoull(std::string(number), nullptr, 16)] = d.body;
      ASSERT_TRUE((*subscriber)->Ack(d).ok());
    }
  }
  ASSERT_EQ(by_number.size(), kTo + 1);
  EXPECT_EQ(by_number.begin()->first, 0u);
  EXPECT_EQ(by_number.rbegin()->first, kTo);
}

// Two buses at once (`--events redis://...,amqp://...`): each gets every event, each has its own
// cursor, and the outbox is pruned once both confirmed.
TEST_F(DbRedisTest, TwoBusesAtOnceEachGetEveryEvent) {
  const Devnet& devnet = TheDevnet();
  const uint64_t to = devnet.last_block();
  Bus redis = StartBus("redis", devnet.chain_id());
  Bus amqp = StartBus("amqp", devnet.chain_id());
  ASSERT_FALSE(redis.url.empty());
  ASSERT_FALSE(amqp.url.empty());
  auto on_redis = SubscribeAll(redis.sub_url, devnet.chain_id(), "both");
  auto on_amqp = SubscribeAll(amqp.sub_url, devnet.chain_id(), "both");
  ASSERT_NE(on_redis, nullptr);
  ASSERT_NE(on_amqp, nullptr);
  const std::string log = ::testing::TempDir() + "events-two-buses.log";
  pid_t index = Spawn({GaplessBinary(), "index", "--rpc", devnet.url, "--db", db_.url(), "--from",
                       "0", "--to", std::to_string(to), "--events", redis.url + "," + amqp.url,
                       "--progress", "off", "--log-level", "warn"},
                      log);
  ASSERT_EQ(WaitForExit(index, 120), 0) << "see " << log;
  std::vector<OutgoingEvent> expected = ExpectedEvents(pool_.get(), devnet.chain_id(), to);
  for (Subscriber* s : {on_redis.get(), on_amqp.get()}) {
    Received r = Consume(
        *s, 60'000, [&](const Received& got) { return got.body_by_id.size() >= expected.size(); });
    ExpectEveryEvent(r, expected);
    ExpectBlocksInChainOrder(r, to);
  }
  auto conn = pool_->Acquire();
  auto cursors = LoadCursors(*conn);
  ASSERT_TRUE(cursors.ok());
  ASSERT_EQ(cursors->size(), 2u);
  for (const EventCursor& c : *cursors) {
    EXPECT_EQ(c.next_block, to + 1) << c.bus;
    EXPECT_EQ(c.events_sent, expected.size()) << c.bus;
  }
  auto stats = LoadOutboxStats(*conn);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->rows, 0u);
}

// The broker down while the fleet indexes (RabbitMQ stopped; the Kafka broker that leads every
// topic set down): nothing is published, the backlog waits in the outbox, the leader keeps its
// lease (one election epoch throughout); when the broker returns the backlog drains and every
// event arrives.
TEST_P(BrokerDownTest, ABrokerThatIsDownHoldsEventsBackWithoutCostingTheLease) {
  const Devnet& devnet = TheDevnet();
  const uint64_t to = devnet.last_block();
  Bus bus = StartBus(GetParam(), devnet.chain_id());
  ASSERT_FALSE(bus.url.empty());
  auto subscriber = SubscribeAll(bus.sub_url, devnet.chain_id(), "patient-consumer");
  ASSERT_NE(subscriber, nullptr);
  // A Kafka group's offsets and a durable queue keep what comes while the consumer is away.
  subscriber.reset();
  bus.Down();

  const std::string log = ::testing::TempDir() + "events-broker-down.log";
  FleetFlags flags{
      .workers = "2",
      .extra = {"--events", bus.url, "--events-timeout", "1000", "--leader-ttl", "1500"}};
  pid_t run = Spawn(FleetCommand("run", devnet, db_.url(), redis_url_, to, flags), log);
  // Indexing completes while the broker is down ...
  ASSERT_TRUE(WaitFor(
      [&] {
        auto conn = pool_->Acquire();
        auto frontier = LoadFrontier(*conn);
        return frontier.ok() && frontier->has_value() && **frontier > to;
      },
      120'000))
      << "see " << log;
  auto conn = pool_->Acquire();
  auto chain = LoadChainId(*conn);
  ASSERT_TRUE(chain.ok() && chain->has_value());
  Keys keys = FleetKeys(pool_.get(), **chain);
  auto redis = RedisConn::Connect(redis_url_);
  ASSERT_TRUE(redis.ok());
  auto epoch = [&] {
    auto r = (*redis)->Command({"GET", keys.election_epoch()});
    return r.ok() ? r->str : std::string("?");
  };
  const std::string epoch_before = epoch();
  // ... and the events wait: the whole range is in the outbox, and the run does not end.
  auto stats = LoadOutboxStats(*conn);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->rows, to + 1);
  std::this_thread::sleep_for(std::chrono::seconds(4));  // more than two leader TTLs
  EXPECT_NE(ProcessState(run), 'Z') << "the run ended with its events unpublished";
  EXPECT_EQ(epoch(), epoch_before) << "the leader lost its lease while the broker was down";

  bus.Up();
  EXPECT_EQ(WaitForExit(run, 120), 0) << "see " << log;
  EXPECT_EQ(epoch(), epoch_before);
  subscriber = SubscribeAll(bus.sub_url, devnet.chain_id(), "patient-consumer");
  ASSERT_NE(subscriber, nullptr);
  std::vector<OutgoingEvent> expected = ExpectedEvents(pool_.get(), devnet.chain_id(), to);
  Received r = Consume(*subscriber, 60'000, [&](const Received& got) {
    return got.body_by_id.size() >= expected.size();
  });
  ExpectEveryEvent(r, expected);
  ExpectBlocksInChainOrder(r, to);
  stats = LoadOutboxStats(*conn);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->rows, 0u);
}

// The mempool watcher against a private anvil that does not mine: each pending transaction is
// published once as transaction.pending with the node's transaction object, however often the
// watcher polls.
TEST(MempoolTest, EachPendingTransactionIsPublishedOnceWithItsData) {
  const char* anvil = std::getenv("GAPLESS_ANVIL");
  if (anvil == nullptr || *anvil == 0) GTEST_SKIP() << "GAPLESS_ANVIL not set";
  const int port = FreePort();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  pid_t node = Spawn({anvil, "--port", std::to_string(port), "--no-mining", "--silent"},
                     ::testing::TempDir() + "mempool-anvil.log");
  auto rpc = ClientsFor(url)();
  ASSERT_TRUE(WaitFor([&] { return rpc->ChainId().ok(); }, 30'000));
  auto accounts = rpc->Call("eth_accounts", "[]");
  ASSERT_TRUE(accounts.ok());
  // The first two dev accounts, lower case.
  std::vector<std::string> account;
  for (size_t at = accounts->find("0x"); at != std::string::npos && account.size() < 2;
       at = accounts->find("0x", at + 42)) {
    std::string a = accounts->substr(at, 42);
    for (char& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    account.push_back(a);
  }
  ASSERT_EQ(account.size(), 2u);
  auto send = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto sent = rpc->Call("eth_sendTransaction", R"([{"from":")" + account[0] + R"(","to":")" +
                                                       account[1] + R"(","value":"0x1"}])");
      ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    }
  };
  auto bus = RedisServer::Start();
  ASSERT_TRUE(bus.ok());
  auto publisher = OpenPublisher((*bus)->url());
  ASSERT_TRUE(publisher.ok());
  MempoolOptions watching;
  watching.chain_id = 31337;
  MempoolWatcher watcher(rpc.get(), {publisher->get()}, watching);
  ASSERT_TRUE(watcher.Step(1).ok());  // creates the filter
  send(5);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(watcher.Step(1).ok());
  send(2);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(watcher.Step(1).ok());
  kill(node, SIGKILL);
  WaitForExit(node, 10);

  SubscribeOptions options;
  options.group = "wallet";
  options.topics = {EventTopic(kTransactionPending, 31337)};
  auto subscriber = OpenSubscriber((*bus)->url(), options);
  ASSERT_TRUE(subscriber.ok());
  Received r = Consume(**subscriber, 3'000, [](const Received&) { return false; });
  EXPECT_EQ(r.in_order.size(), 7u);
  EXPECT_EQ(r.body_by_id.size(), 7u);
  EXPECT_EQ(watcher.published(), 7u);
  for (const Envelope& e : r.in_order) {
    EXPECT_EQ(e.event_type, kTransactionPending);
    EXPECT_NE(e.payload_json.find(R"("from":")" + account[0]), std::string::npos) << e.payload_json;
    auto hash = e.payload_json.find(R"("hash":")");
    ASSERT_NE(hash, std::string::npos);
    EXPECT_EQ(e.event_id, EventId(31337, kTransactionPending, e.payload_json.substr(hash + 8, 66)));
  }
}

// Another producer's event through the CLI (`events publish`), read back with `events tail`, which
// leaves no consumer group behind.
TEST(EventsCliTest, PublishAndTailAContractVerifiedEvent) {
  auto bus = RedisServer::Start();
  ASSERT_TRUE(bus.ok());
  auto [published, id] =
      RunForOutput({GaplessBinary(), "events", "publish", "--bus", (*bus)->url(), "--chain-id",
                    "138", "--type", "contract.verified", "--identity", "0xabc", "--payload",
                    R"({"address":"0xabc","verification_status":"verified"})"});
  ASSERT_EQ(published, 0);
  ASSERT_EQ(id, EventId(138, kContractVerified, "0xabc") + "\n");
  auto [tailed, lines] = RunForOutput({GaplessBinary(), "events", "tail", "--bus", (*bus)->url(),
                                       "--chain-id", "138", "--type", "contract.verified",
                                       "--from-beginning", "--count", "1", "--log-level", "warn"});
  ASSERT_EQ(tailed, 0);
  auto env = ParseEnvelope(lines.substr(0, lines.find('\n')));
  ASSERT_TRUE(env.ok()) << lines;
  EXPECT_EQ(env->event_id + "\n", id);
  EXPECT_EQ(env->payload_json,
            R"({"chain_id":138,"address":"0xabc","verification_status":"verified"})");
  auto conn = RedisConn::Connect((*bus)->url());
  ASSERT_TRUE(conn.ok());
  auto groups = (*conn)->Command({"XINFO", "GROUPS", "contract.verified.138"});
  ASSERT_TRUE(groups.ok());
  EXPECT_TRUE(groups->elements.empty()) << "events tail left its consumer group behind";
  // A type that does not exist is refused before anything is sent.
  auto [refused, _] =
      RunForOutput({GaplessBinary(), "events", "publish", "--bus", (*bus)->url(), "--chain-id",
                    "138", "--type", "contract.deployed", "--identity", "x", "--payload", "{}"});
  EXPECT_NE(refused, 0);
}

// The consumer framework on a real bus: a handler that always fails is tried 4 times (retries
// after 1, 2 and 4 units of backoff), then the event is in the dead-letter stream with its error,
// and acked (the group holds nothing pending).
class AlwaysFails : public EventHandler {
 public:
  Status Process(const ConsumedEvent& event) override {
    std::lock_guard<std::mutex> lock(mu_);
    attempts_.push_back(NowMs());
    return InvalidData("cannot use event " + event.envelope.event_id);
  }
  Result<bool> IsCompleted(const std::string&) override { return false; }
  std::vector<int64_t> attempts() {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_;
  }

 private:
  std::mutex mu_;
  std::vector<int64_t> attempts_;
};

TEST(ConsumerOnABusTest, AFailingEventIsRetriedWithBackoffThenDeadLettered) {
  auto bus = RedisServer::Start();
  ASSERT_TRUE(bus.ok());
  auto publisher = OpenPublisher((*bus)->url());
  ASSERT_TRUE(publisher.ok());
  OutgoingEvent event = ContractVerifiedEvent(7, "0xabc", "verified", 1);
  ASSERT_TRUE((*publisher)->Publish({event}).ok());
  SubscribeOptions options;
  options.group = "verifier";
  options.topics = {event.topic};
  auto subscriber = OpenSubscriber((*bus)->url(), options);
  ASSERT_TRUE(subscriber.ok());
  auto locks = RedisProcessingLocks::Open((*bus)->url(), "test:consumer");
  ASSERT_TRUE(locks.ok());
  ConsumerOptions consumer_options;
  consumer_options.retry_base_ms = 200;  // retries after 200, 400, 800 ms
  consumer_options.recovery.other_ms = 0;
  AlwaysFails handler;
  EventConsumer consumer(consumer_options, subscriber->get(), locks->get(), &handler);
  std::atomic<bool> stop{false};
  Status result;
  std::thread run([&] { result = consumer.Run(stop); });
  auto conn = RedisConn::Connect((*bus)->url());
  ASSERT_TRUE(conn.ok());
  bool dead = WaitFor(
      [&] {
        auto len = (*conn)->Command({"XLEN", event.topic + ".dlq"});
        return len.ok() && len->integer == 1;
      },
      20'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  run.join();
  ASSERT_TRUE(dead) << "nothing reached " << event.topic << ".dlq";
  EXPECT_TRUE(result.ok()) << result.ToString();
  std::vector<int64_t> at = handler.attempts();
  ASSERT_EQ(at.size(), 4u);
  // Each wait at least its backoff (the clock is real: only lower bounds are exact).
  EXPECT_GE(at[1] - at[0], 200);
  EXPECT_GE(at[2] - at[1], 400);
  EXPECT_GE(at[3] - at[2], 800);
  auto dlq = (*conn)->Command({"XRANGE", event.topic + ".dlq", "-", "+"});
  ASSERT_TRUE(dlq.ok());
  std::map<std::string, std::string> fields;
  const RedisReply& f = dlq->elements[0].elements[1];
  for (size_t i = 0; i + 1 < f.elements.size(); i += 2) {
    fields[f.elements[i].str] = f.elements[i + 1].str;
  }
  EXPECT_EQ(fields["body"], event.body);
  EXPECT_NE(fields["error"].find("cannot use event " + event.event_id), std::string::npos)
      << fields["error"];
  auto pending = (*conn)->Command({"XPENDING", event.topic, "verifier"});
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->elements[0].integer, 0) << "the dead-lettered delivery was not acked";
}

INSTANTIATE_TEST_SUITE_P(Buses, BrokerDownTest, ::testing::Values("amqp", "kafka"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gapless::e2e

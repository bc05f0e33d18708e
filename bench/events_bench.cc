// events_bench: how fast and how soon the event relay (node/relay.h) gets committed blocks onto
// each bus, against a raw producer on the same broker.
//
// Per bus (Redis Streams, RabbitMQ, librdkafka's mock Kafka cluster; each a private server started
// here, one bus at a time), in one run:
//
//   throughput  For each block shape (mainnet-shaped: 150 tx, 300 logs, 60 transfers; small: 10 tx,
//               10 logs, 9 transfers), --repeat times: a fresh database with events enabled, the
//               blocks written with WriteRange (ranges of --range) and the frontier persisted
//               (not timed), then a RelayDuty's Step loop (epoch 1, as under a LocalLease) until
//               its cursor passes the last block: relay events/s. The baseline, right before it on
//               the same Publisher: the same events (BlockEvents of the same blocks, built before
//               the clock starts) published in the batches the relay makes (whole blocks, up to
//               --batch-blocks blocks / --batch-events events): raw events/s. Medians, and the
//               ratio relay / raw. Where the relay's time goes: publish% = inside Publish (the
//               publisher is wrapped to time it); read% and build% = the same batches read back
//               with ReadBlocks (kEventReadOptions, as the relay reads) and turned into events
//               with BlockEvents alone, after the relay run, as shares of its time (the rest:
//               outbox, cursor and frontier queries, the cursor's commit and the outbox pruning).
//               The relay publishes batch n while it reads and builds batch n+1, so the shares
//               overlap and may add up to more than 100%. RabbitMQ: a durable consumer-group queue
//               is bound to the topics first, so the persistent messages are stored as they would
//               be in production (with no queue bound the exchange drops them).
//   latency     A fresh database; an EventConsumer (events/consumer.h; concurrency 2, in-memory
//               processing locks, a handler whose Process records the time of each block.new)
//               subscribed to the chain's block-derived topics; a RelayDuty on its own DutyHost
//               thread with a --tick-ms tick, woken by the frontier's NOTIFY through a PgWaker
//               as EventRelays wires it (--no-wake: polling at the tick only). Then
//               --latency-blocks blocks of about 20 events, one per WriteRange, each followed by
//               PersistFrontier, one every --interval-ms (jittered
//               +-50% so the writes do not lock to the tick's phase), after --warmup blocks that
//               are not measured (the Kafka consumer joins its group in them). Latency = from
//               right after WriteRange returned (the commit is done) to the handler's Process of
//               that block's block.new. The publisher is wrapped to time each Publish, which
//               splits the latency into pickup (commit -> the relay calls Publish with the block:
//               frontier persist + tick wait + outbox read + event build), confirm (Publish's
//               duration) and delivery (Publish called -> Process).
//
//   events_bench --pg URL [--buses redis,amqp,kafka] [--blocks 200] [--small-blocks 2000]
//                [--range 50] [--repeat 3] [--batch-blocks 200] [--batch-events 5000]
//                [--latency-blocks 300] [--interval-ms 25] [--tick-ms 200] [--no-wake] [--warmup
//                10]
//                [--kafka-consumer-props "k=v&k=v"]   (appended to the Kafka subscriber URL)
//
// The database gapless_events_bench is created on the --pg server and dropped afterwards.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "events/bus.h"
#include "events/consumer.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/duties.h"
#include "node/relay.h"
#include "store/migrate.h"
#include "store/notify.h"
#include "store/outbox.h"
#include "store/pg.h"
#include "store/reader.h"
#include "store/state.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/kafka_mock.h"
#include "testing/rabbitmq_server.h"
#include "testing/redis_server.h"

namespace gapless {
namespace {

using bench::Check;
using bench::Clock;
using bench::Die;
using bench::Percentile;
using bench::Seconds;

constexpr char kDatabase[] = "gapless_events_bench";
constexpr uint64_t kThroughputChain = 1;
constexpr uint64_t kLatencyChain = 2;
constexpr uint64_t kFirstBlock = 17'000'000;

struct Args {
  std::string pg;
  std::vector<std::string> buses = {"redis", "amqp", "kafka"};
  uint64_t blocks = 200;
  uint64_t small_blocks = 2000;
  uint64_t range = 50;
  int repeat = 3;
  size_t batch_blocks = 200;
  size_t batch_events = 5'000;
  uint64_t latency_blocks = 300;
  int64_t interval_ms = 25;
  int64_t tick_ms = 200;  // EventsOptions' default
  bool wake = true;       // the relay woken by the frontier's NOTIFY, as EventRelays wires it
  uint64_t warmup = 10;
  std::string kafka_consumer_props;  // "k=v&k=v" appended to the Kafka subscriber's URL
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  auto u64 = [](uint64_t* out) { return [out](const std::string& v) { *out = std::stoull(v); }; };
  bench::Flags()
      .Value("--pg", [&](const std::string& v) { a.pg = v; })
      .Value("--buses",
             [&](const std::string& v) {
               a.buses.clear();
               std::stringstream ss(v);
               for (std::string b; std::getline(ss, b, ',');) {
                 if (b != "redis" && b != "amqp" && b != "kafka") throw std::invalid_argument(b);
                 a.buses.push_back(b);
               }
             })
      .Value("--blocks", u64(&a.blocks))
      .Value("--small-blocks", u64(&a.small_blocks))
      .Value("--range", u64(&a.range))
      .Value("--repeat", [&](const std::string& v) { a.repeat = std::stoi(v); })
      .Value("--batch-blocks", [&](const std::string& v) { a.batch_blocks = std::stoull(v); })
      .Value("--batch-events", [&](const std::string& v) { a.batch_events = std::stoull(v); })
      .Value("--latency-blocks", u64(&a.latency_blocks))
      .Value("--interval-ms", [&](const std::string& v) { a.interval_ms = std::stoll(v); })
      .Value("--tick-ms", [&](const std::string& v) { a.tick_ms = std::stoll(v); })
      .Switch("--no-wake", [&] { a.wake = false; })
      .Value("--warmup", u64(&a.warmup))
      .Value("--kafka-consumer-props", [&](const std::string& v) { a.kafka_consumer_props = v; })
      .Parse(argc, argv);
  if (a.pg.empty())
    Die("--pg URL is required (a server where it may create " + std::string(kDatabase) + ")");
  if (a.range == 0 || a.repeat <= 0 || a.batch_blocks == 0 || a.tick_ms <= 0 || a.buses.empty())
    Die("--range, --repeat, --batch-blocks, --tick-ms must be > 0, --buses not empty");
  return a;
}

// ---- buses ----------------------------------------------------------------------------------

struct Bus {
  std::string kind;
  std::string url;      // the publisher's
  std::string sub_url;  // the subscriber's
  std::unique_ptr<RedisServer> redis;
  std::unique_ptr<RabbitMqServer> rabbit;
  std::unique_ptr<KafkaMockCluster> kafka;
};

std::vector<std::string> Topics(uint64_t chain_id) {
  return {EventTopic(kBlockNew, chain_id), EventTopic(kTransactionConfirmed, chain_id),
          EventTopic(kTokenTransfer, chain_id)};
}

Bus StartBus(const std::string& kind, const Args& args) {
  Bus bus;
  bus.kind = kind;
  if (kind == "redis") {
    auto s = RedisServer::Start();
    Check(s.status(), "start redis-server");
    bus.redis = std::move(s).value();
    bus.url = bus.sub_url = bus.redis->url();
  } else if (kind == "amqp") {
    auto s = RabbitMqServer::Start();
    Check(s.status(), "start RabbitMQ");
    bus.rabbit = std::move(s).value();
    bus.url = bus.sub_url = bus.rabbit->url();
  } else {
    auto s = KafkaMockCluster::Start(3);
    Check(s.status(), "start the Kafka mock cluster");
    bus.kafka = std::move(s).value();
    // One partition per topic (the key, the chain id, picks one anyway), replicated on 3 brokers.
    for (uint64_t chain : {kThroughputChain, kLatencyChain}) {
      for (const std::string& topic : Topics(chain)) {
        Check(bus.kafka->CreateTopic(topic, 1, 3), "create topic");
        Check(bus.kafka->SetLeader(topic, 0, 1), "set leader");
      }
    }
    bus.url = bus.kafka->url();
    // The mock's group coordinator makes a new member wait out the session timeout.
    bus.sub_url = bus.url + "?session.timeout.ms=4500&heartbeat.interval.ms=1000";
    if (!args.kafka_consumer_props.empty()) bus.sub_url += "&" + args.kafka_consumer_props;
  }
  return bus;
}

std::string BusLabel(const std::string& kind) {
  if (kind == "redis") return "Redis Streams";
  if (kind == "amqp") return "RabbitMQ";
  return "Kafka (mock)";
}

// Times every Publish of the wrapped publisher, and remembers for each block.new in a batch when
// the batch's Publish was called and when it returned.
class TimingPublisher : public Publisher {
 public:
  struct Span {
    Clock::time_point start, end;
  };
  explicit TimingPublisher(Publisher* inner) : inner_(inner) {}
  std::string name() const override { return inner_->name(); }
  Status Publish(const std::vector<OutgoingEvent>& events) override {
    auto start = Clock::now();
    Status st = inner_->Publish(events);
    auto end = Clock::now();
    publishing_seconds_ += Seconds(start, end);
    if (st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const OutgoingEvent& e : events) {
        if (e.event_type == kBlockNew && !spans_.contains(e.event_id)) {
          spans_[e.event_id] = Span{start, end};
        }
      }
    }
    return st;
  }
  std::optional<Span> SpanOf(const std::string& event_id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = spans_.find(event_id);
    if (it == spans_.end()) return std::nullopt;
    return it->second;
  }
  // Time spent inside Publish so far.
  double publishing_seconds() const { return publishing_seconds_; }

 private:
  Publisher* inner_;
  double publishing_seconds_ = 0;
  std::mutex mu_;
  std::map<std::string, Span> spans_;
};

// ---- database -------------------------------------------------------------------------------

// A fresh, migrated gapless_events_bench with events enabled from kFirstBlock.
std::string FreshDatabase(PgConn& admin, const std::string& server_url) {
  Check(admin.Exec(std::string("DROP DATABASE IF EXISTS ") + kDatabase + " WITH (FORCE)"), "drop");
  Check(admin.Exec(std::string("CREATE DATABASE ") + kDatabase), "create database");
  auto url = PgUrlWithDatabase(server_url, kDatabase);
  Check(url.status(), "url");
  auto conn = PgConn::Connect(*url);
  Check(conn.status(), "connect bench database");
  Check(Migrate(**conn), "migrate");
  Check(EnableEvents(**conn, kFirstBlock).status(), "enable events");
  return *url;
}

// ---- throughput -----------------------------------------------------------------------------

struct Shape {
  std::string name;
  SyntheticOptions data;
  uint64_t blocks = 0;
};

struct ThroughputFigures {
  std::vector<double> relay_eps, raw_eps;
  std::vector<double> publish_share;  // of the relay's time, inside Publisher::Publish
  // The relay's batches read back (ReadBlocks) and built (BlockEvents) alone, as a share of the
  // relay's time: what it does besides Publish and the outbox/cursor queries.
  std::vector<double> read_share, build_share;
  uint64_t events = 0;
};

// The relay's batches: whole blocks, at most max_blocks, growing until one reaches max_events.
std::vector<std::vector<OutgoingEvent>> RelayShapedBatches(const std::vector<BlockData>& blocks,
                                                           uint64_t chain_id, size_t max_blocks,
                                                           size_t max_events,
                                                           std::vector<size_t>* blocks_per_batch) {
  std::vector<std::vector<OutgoingEvent>> batches;
  std::vector<OutgoingEvent> batch;
  size_t in_batch = 0;
  for (const BlockData& b : blocks) {
    std::vector<OutgoingEvent> events = BlockEvents(chain_id, b);
    if (in_batch > 0 && (in_batch == max_blocks || batch.size() + events.size() > max_events)) {
      batches.push_back(std::move(batch));
      blocks_per_batch->push_back(in_batch);
      batch.clear();
      in_batch = 0;
    }
    for (OutgoingEvent& e : events) batch.push_back(std::move(e));
    ++in_batch;
  }
  if (!batch.empty()) {
    batches.push_back(std::move(batch));
    blocks_per_batch->push_back(in_batch);
  }
  return batches;
}

ThroughputFigures Throughput(const Args& args, const Bus& bus, Publisher& publisher, PgConn& admin,
                             const Shape& shape) {
  ThroughputFigures f;
  std::vector<RangeWrite> ranges;
  std::vector<BlockData> blocks;
  const uint64_t last = kFirstBlock + shape.blocks - 1;
  for (uint64_t from = kFirstBlock; from <= last; from += args.range) {
    RangeWrite w = SyntheticRange(from, std::min(from + args.range - 1, last), shape.data);
    for (const BlockData& b : w.blocks) blocks.push_back(b);
    ranges.push_back(std::move(w));
  }
  std::vector<size_t> blocks_per_batch;
  auto batches = RelayShapedBatches(blocks, kThroughputChain, args.batch_blocks, args.batch_events,
                                    &blocks_per_batch);
  for (const auto& b : batches) f.events += b.size();
  blocks.clear();

  for (int rep = 0; rep < args.repeat; ++rep) {
    // Raw: the same events through the same publisher, no PostgreSQL.
    auto start = Clock::now();
    for (const auto& batch : batches) Check(publisher.Publish(batch), "raw publish");
    f.raw_eps.push_back(static_cast<double>(f.events) / Seconds(start, Clock::now()));

    // Relay: write (not timed), then publish the outbox.
    std::string url = FreshDatabase(admin, args.pg);
    {
      auto conn = PgConn::Connect(url);
      Check(conn.status(), "connect");
      for (const RangeWrite& w : ranges) Check(WriteRange(**conn, w), "write range");
      Check(PersistFrontier(**conn, kFirstBlock, last + 1).status(), "persist frontier");
      Check((*conn)->Exec("CHECKPOINT"), "checkpoint");
    }
    auto pool = PgPool::Open(url, 1);
    Check(pool.status(), "pool");
    RelayOptions options;
    options.chain_id = kThroughputChain;
    options.max_blocks = args.batch_blocks;
    options.max_events = args.batch_events;
    options.to = last;
    options.buses = {publisher.name()};
    TimingPublisher timed(&publisher);
    RelayDuty relay(pool->get(), &timed, options);
    start = Clock::now();
    while (!relay.done()) Check(relay.Step(1), "relay step");
    double s = Seconds(start, Clock::now());
    if (relay.events_published() != f.events) {
      Die("relay published " + std::to_string(relay.events_published()) + " events, expected " +
          std::to_string(f.events));
    }
    f.relay_eps.push_back(static_cast<double>(f.events) / s);
    f.publish_share.push_back(timed.publishing_seconds() / s);
    {
      auto conn = pool->get()->Acquire();
      double read_s = 0, build_s = 0;
      uint64_t from = kFirstBlock;
      for (size_t n : blocks_per_batch) {
        auto t0 = Clock::now();
        auto read = ReadBlocks(*conn, from, from + n - 1, kEventReadOptions);
        Check(read.status(), "read blocks");
        auto t1 = Clock::now();
        size_t built = 0;
        for (const BlockData& b : *read) built += BlockEvents(kThroughputChain, b).size();
        read_s += Seconds(t0, t1);
        build_s += Seconds(t1, Clock::now());
        if (built == 0) Die("no events built");
        from += n;
      }
      f.read_share.push_back(read_s / s);
      f.build_share.push_back(build_s / s);
    }
    std::fprintf(stderr, "  %s %s repetition %d/%d: raw %.0f, relay %.0f events/s\n",
                 bus.kind.c_str(), shape.name.c_str(), rep + 1, args.repeat, f.raw_eps.back(),
                 f.relay_eps.back());
  }
  return f;
}

// ---- latency --------------------------------------------------------------------------------

// The processing keys in memory: one consumer process, nothing to coordinate with.
class LocalLocks : public ProcessingLocks {
 public:
  Result<bool> TryAcquire(const std::string& event_id, const std::string& token, int64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = held_.try_emplace(event_id, token);
    return inserted || it->second == token;
  }
  Status Release(const std::string& event_id, const std::string& token) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(event_id);
    if (it != held_.end() && it->second == token) held_.erase(it);
    return Status::Ok();
  }
  Result<bool> Renew(const std::string& event_id, const std::string& token, int64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(event_id);
    return it != held_.end() && it->second == token;  // no TTL here: held until released
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> held_;
};

// Records when Process first ran for each block.new (by event id); everything else is a no-op.
class StampHandler : public EventHandler {
 public:
  Status Process(const ConsumedEvent& event) override {
    auto now = Clock::now();
    ++processed_;
    if (event.envelope.event_type != kBlockNew) return Status::Ok();
    std::lock_guard<std::mutex> lock(mu_);
    seen_.try_emplace(event.envelope.event_id, now);
    return Status::Ok();
  }
  Result<bool> IsCompleted(const std::string&) override { return false; }

  std::optional<Clock::time_point> SeenAt(const std::string& event_id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = seen_.find(event_id);
    if (it == seen_.end()) return std::nullopt;
    return it->second;
  }
  uint64_t processed() const { return processed_.load(); }

 private:
  std::mutex mu_;
  std::map<std::string, Clock::time_point> seen_;
  std::atomic<uint64_t> processed_{0};
};

struct LatencyFigures {
  std::vector<double> total_ms, pickup_ms, confirm_ms, deliver_ms, frontier_ms;
  double events_per_block = 0;
};

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

LatencyFigures Latency(const Args& args, const Bus& bus, Publisher& inner, PgConn& admin) {
  LatencyFigures f;
  SyntheticOptions small;
  small.transactions_per_block = 10;
  small.logs_per_block = 10;
  small.token_transfers_per_block = 9;
  const uint64_t total = args.warmup + args.latency_blocks;
  std::vector<RangeWrite> writes;
  std::vector<std::string> block_new_ids;
  uint64_t events = 0;
  for (uint64_t i = 0; i < total; ++i) {
    RangeWrite w = SyntheticRange(kFirstBlock + i, kFirstBlock + i, small);
    auto ev = BlockEvents(kLatencyChain, w.blocks[0]);
    events += ev.size();
    block_new_ids.push_back(ev.front().event_id);
    writes.push_back(std::move(w));
  }
  f.events_per_block = static_cast<double>(events) / static_cast<double>(total);

  std::string url = FreshDatabase(admin, args.pg);
  auto conn_or = PgConn::Connect(url);
  Check(conn_or.status(), "connect");
  PgConn& conn = **conn_or;
  auto pool = PgPool::Open(url, 1);
  Check(pool.status(), "pool");

  SubscribeOptions sub_options;
  sub_options.group = "bench-latency";
  sub_options.topics = Topics(kLatencyChain);
  sub_options.from_beginning = true;
  auto sub = OpenSubscriber(bus.sub_url, sub_options);
  Check(sub.status(), "subscribe");
  LocalLocks locks;
  StampHandler handler;
  ConsumerOptions consumer_options;
  consumer_options.name = "bench";
  consumer_options.concurrency = 2;
  EventConsumer consumer(consumer_options, sub->get(), &locks, &handler);
  std::atomic<bool> stop{false};
  Status consumer_result;
  std::thread consumer_thread([&] { consumer_result = consumer.Run(stop); });

  TimingPublisher publisher(&inner);
  RelayOptions relay_options;
  relay_options.chain_id = kLatencyChain;
  relay_options.max_blocks = args.batch_blocks;
  relay_options.max_events = args.batch_events;
  relay_options.buses = {publisher.name()};
  RelayDuty relay(pool->get(), &publisher, relay_options);
  LocalLease lease;
  DutyHost host(&lease, args.tick_ms, relay.name());
  host.Add(&relay);
  std::unique_ptr<PgWaker> waker;
  if (args.wake) {
    auto opened = PgWaker::Open(url, {std::string(kFrontierChannel)});
    Check(opened.status(), "LISTEN connection");
    waker = std::move(opened).value();
    host.set_waker(waker.get());
  }
  Status relay_result;
  std::thread relay_thread([&] { relay_result = host.Run(stop); });

  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  std::vector<Clock::time_point> committed(total), frontier(total);
  auto write = [&](uint64_t i) {
    Check(WriteRange(conn, writes[i]), "write range");
    committed[i] = Clock::now();
    Check(PersistFrontier(conn, kFirstBlock, kFirstBlock + i + 1).status(), "persist frontier");
    frontier[i] = Clock::now();
  };
  auto wait_seen = [&](uint64_t upto, int64_t timeout_ms) {
    auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < end) {
      bool all = true;
      for (uint64_t i = 0; i < upto && all; ++i) all = handler.SeenAt(block_new_ids[i]).has_value();
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  // Warm-up: the consumer joins (Kafka: waits out the group's session timeout) and the
  // connections are open before anything is measured.
  for (uint64_t i = 0; i < args.warmup; ++i) {
    write(i);
    std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
  }
  if (!wait_seen(args.warmup, 60'000)) Die(bus.kind + ": warm-up blocks not consumed in 60 s");
  for (uint64_t i = args.warmup; i < total; ++i) {
    write(i);
    auto pause = static_cast<int64_t>(static_cast<double>(args.interval_ms) * 1000 * jitter(rng));
    std::this_thread::sleep_for(std::chrono::microseconds(pause));
  }
  bool all = wait_seen(total, 30'000);
  stop = true;
  relay_thread.join();
  consumer_thread.join();
  Check(relay_result, "relay");
  Check(consumer_result, "consumer");
  if (!all) Die(bus.kind + ": not every block.new was processed within 30 s");

  for (uint64_t i = args.warmup; i < total; ++i) {
    auto seen = handler.SeenAt(block_new_ids[i]);
    auto span = publisher.SpanOf(block_new_ids[i]);
    if (!seen || !span) Die("block " + std::to_string(i) + " has no process time or publish span");
    f.total_ms.push_back(Ms(committed[i], *seen));
    f.frontier_ms.push_back(Ms(committed[i], frontier[i]));
    f.pickup_ms.push_back(Ms(committed[i], span->start));
    f.confirm_ms.push_back(Ms(span->start, span->end));
    f.deliver_ms.push_back(Ms(span->start, *seen));
  }
  return f;
}

// ---- main -----------------------------------------------------------------------------------

double Median(std::vector<double> v) { return Percentile(std::move(v), 50); }

std::string Runs(const std::vector<double>& v) {
  std::string out;
  for (double x : v) out += (out.empty() ? "" : " ") + std::to_string(static_cast<int64_t>(x));
  return out;
}

int Main(int argc, char** argv) {
  bench::ProgramName() = "events_bench";
  spdlog::set_level(spdlog::level::warn);
  Args args = ParseArgs(argc, argv);

  auto admin_or = PgConn::Connect(args.pg);
  Check(admin_or.status(), "connect --pg");
  PgConn& admin = **admin_or;

  Shape mainnet{"mainnet", SyntheticOptions{}, args.blocks};
  Shape small{"small", SyntheticOptions{}, args.small_blocks};
  small.data.transactions_per_block = 10;
  small.data.logs_per_block = 10;
  small.data.token_transfers_per_block = 9;
  std::vector<Shape> shapes;
  for (const Shape& s : {mainnet, small}) {
    if (s.blocks > 0) shapes.push_back(s);
  }
  for (const Shape& s : shapes) {
    uint64_t events = BlockEvents(kThroughputChain, SyntheticBlock(kFirstBlock, s.data)).size();
    std::printf("shape %-8s %6llu blocks: %u tx, %u logs, %u transfers per block (~%llu events)\n",
                s.name.c_str(), static_cast<unsigned long long>(s.blocks),
                s.data.transactions_per_block, s.data.logs_per_block,
                s.data.token_transfers_per_block, static_cast<unsigned long long>(events));
  }
  std::printf(
      "relay batches: %zu blocks / %zu events; %d repetitions; latency: %llu blocks (+%llu "
      "warm-up), one every %lld ms +-50%%, relay tick %lld ms\n",
      args.batch_blocks, args.batch_events, args.repeat,
      static_cast<unsigned long long>(args.latency_blocks),
      static_cast<unsigned long long>(args.warmup), static_cast<long long>(args.interval_ms),
      static_cast<long long>(args.tick_ms));
  std::fflush(stdout);

  struct Row {
    std::string bus, shape;
    ThroughputFigures t;
  };
  std::vector<Row> rows;
  std::vector<std::pair<std::string, LatencyFigures>> latencies;
  for (const std::string& kind : args.buses) {
    std::fprintf(stderr, "%s: starting\n", kind.c_str());
    Bus bus = StartBus(kind, args);
    PublisherOptions publisher_options;
    auto publisher = OpenPublisher(bus.url, publisher_options);
    Check(publisher.status(), "open publisher");
    // RabbitMQ keeps only what a bound queue takes: bind a consumer-group queue (never read).
    std::unique_ptr<Subscriber> holder;
    if (kind == "amqp") {
      SubscribeOptions o;
      o.group = "bench-throughput";
      o.topics = Topics(kThroughputChain);
      auto s = OpenSubscriber(bus.sub_url, o);
      Check(s.status(), "bind the throughput queue");
      holder = std::move(s).value();
    }
    for (const Shape& shape : shapes) {
      rows.push_back(Row{kind, shape.name, Throughput(args, bus, **publisher, admin, shape)});
    }
    if (args.latency_blocks > 0) {
      latencies.emplace_back(kind, Latency(args, bus, **publisher, admin));
    }
  }
  Check(admin.Exec(std::string("DROP DATABASE IF EXISTS ") + kDatabase + " WITH (FORCE)"), "drop");

  if (!rows.empty()) {
    std::printf("\nThroughput (events/s, median of %d; all runs after |)\n", args.repeat);
    std::printf("%-14s %-8s %8s %11s %11s %7s %9s %6s %7s   %s\n", "bus", "shape", "events",
                "relay ev/s", "raw ev/s", "ratio", "publish%", "read%", "build%",
                "relay runs | raw runs");
    for (const Row& r : rows) {
      double relay = Median(r.t.relay_eps), raw = Median(r.t.raw_eps);
      std::printf(
          "%-14s %-8s %8llu %11.0f %11.0f %6.2fx %8.0f%% %5.0f%% %6.0f%%   %s | %s\n",
          BusLabel(r.bus).c_str(), r.shape.c_str(), static_cast<unsigned long long>(r.t.events),
          relay, raw, relay / raw, 100 * Median(r.t.publish_share), 100 * Median(r.t.read_share),
          100 * Median(r.t.build_share), Runs(r.t.relay_eps).c_str(), Runs(r.t.raw_eps).c_str());
    }
  }
  if (!latencies.empty()) {
    std::printf(
        "\nLatency commit -> EventConsumer Process(block.new), ms (%llu blocks of ~%.0f events "
        "each, relay tick %lld ms)\n",
        static_cast<unsigned long long>(args.latency_blocks),
        latencies.front().second.events_per_block, static_cast<long long>(args.tick_ms));
    std::printf("%-14s %7s %7s %7s %7s %7s | %-17s %-17s %-17s %-13s\n", "bus", "p50", "p90", "p99",
                "max", "mean", "pickup p50/p99", "confirm p50/p99", "deliver p50/p99",
                "frontier p50");
    for (const auto& [kind, l] : latencies) {
      double mean = 0;
      for (double x : l.total_ms) mean += x;
      mean /= static_cast<double>(l.total_ms.size());
      auto pair = [](const std::vector<double>& v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f / %.1f", Percentile(v, 50), Percentile(v, 99));
        return std::string(buf);
      };
      std::printf("%-14s %7.1f %7.1f %7.1f %7.1f %7.1f | %-17s %-17s %-17s %.1f\n",
                  BusLabel(kind).c_str(), Percentile(l.total_ms, 50), Percentile(l.total_ms, 90),
                  Percentile(l.total_ms, 99), Percentile(l.total_ms, 100), mean,
                  pair(l.pickup_ms).c_str(), pair(l.confirm_ms).c_str(), pair(l.deliver_ms).c_str(),
                  Percentile(l.frontier_ms, 50));
    }
  }
  return 0;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) { return gapless::Main(argc, argv); }

// retraction_itest_util: what the relay's and the retractions' integration tests share
// (retraction_itest.cc, relay_itest.cc, relay_pipeline_itest.cc): synthetic chains and forks, a
// recording publisher and a gate that holds a batch in flight, a relay step on its own thread, and
// the RetractionTest fixture (a test database, a private redis-server as the bus, the relay, the
// balances consumer). Header-only, test code.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "events/balances.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/relay.h"
#include "store/outbox.h"
#include "store/rollback.h"
#include "store/state.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/free_port.h"
#include "testing/pg_test_db.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::retraction_testing {

using testing_util::WaitFor;

inline constexpr uint64_t kChain = 1;
inline constexpr uint64_t kEpoch = 1;

inline SyntheticOptions Small(uint64_t seed) {
  return {.transactions_per_block = 3,
          .logs_per_block = 12,
          .token_transfers_per_block = 6,
          .withdrawals_per_block = 1,
          .seed = seed};
}

// Blocks from..to of another fork (seed 2) that branch off the stored chain (seed 1) at from - 1.
inline RangeWrite NewFork(uint64_t from, uint64_t to) {
  RangeWrite w = SyntheticRange(from, to, Small(2));
  w.blocks.front().block.parent_hash = SyntheticBlockHash(from - 1, 1);
  return w;
}

// Forwards to the real bus and records what the broker confirmed, in order; `after_confirm` runs
// once, after the next batch is confirmed, before Publish returns (a rollback committing while a
// batch is in flight).
class RecordingPublisher : public Publisher {
 public:
  explicit RecordingPublisher(std::unique_ptr<Publisher> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  Status Publish(const std::vector<OutgoingEvent>& events) override {
    GAPLESS_RETURN_IF_ERROR(inner_->Publish(events));
    sent.insert(sent.end(), events.begin(), events.end());
    // Once: the hook is taken before it runs.
    auto hook = std::move(after_confirm);
    after_confirm = nullptr;
    if (hook) hook(events);
    return Status::Ok();
  }
  std::vector<OutgoingEvent> sent;
  std::function<void(const std::vector<OutgoingEvent>&)> after_confirm;

 private:
  std::unique_ptr<Publisher> inner_;
};

inline uint64_t BlockNumberOf(const OutgoingEvent& e) {
  Result<Envelope> env = ParseEnvelope(e.body);
  EXPECT_TRUE(env.ok());
  simdjson::dom::parser parser;
  uint64_t n = 0;
  EXPECT_EQ(parser.parse(env->payload_json)["block_number"].get_uint64().get(n), simdjson::SUCCESS);
  return n;
}

// Holds every Publish until the test lets it through (to the wrapped publisher) or fails it, so a
// test sees a batch in flight and what the relay does meanwhile. Open: everything goes through.
class GatePublisher : public Publisher {
 public:
  explicit GatePublisher(Publisher* inner) : inner_(inner) {}
  std::string name() const override { return inner_->name(); }
  Status Publish(const std::vector<OutgoingEvent>& events) override {
    Status verdict = Status::Ok();
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!open_) {
        ++calls_;
        held_ = &events;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !verdicts_.empty() || open_; });
        if (!verdicts_.empty()) {
          verdict = verdicts_.front();
          verdicts_.pop_front();
        }
        held_ = nullptr;
        cv_.notify_all();
      }
    }
    GAPLESS_RETURN_IF_ERROR(verdict);
    return inner_->Publish(events);
  }
  // Opening also lets a held Publish through.
  void set_open(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  // Waits (up to 20 s) for a Publish to be held; the block number of its first event (nullopt:
  // none came).
  std::optional<uint64_t> WaitHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return held_ != nullptr; })) {
      return std::nullopt;
    }
    return BlockNumberOf(held_->front());
  }
  // Lets the held Publish go on with `verdict` (Ok: to the wrapped publisher), and waits until
  // it has taken it.
  void Release(Status verdict = Status::Ok()) {
    std::unique_lock<std::mutex> lock(mu_);
    verdicts_.push_back(std::move(verdict));
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return verdicts_.empty(); });
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  Publisher* inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  const std::vector<OutgoingEvent>* held_ = nullptr;
  std::deque<Status> verdicts_;
  int calls_ = 0;
};

// Runs a relay step on a thread; on destruction (a failed assertion included) opens the gate and
// waits for it.
class StepThread {
 public:
  StepThread(RelayDuty& relay, GatePublisher& gate)
      : gate_(gate),
        step_(std::async(std::launch::async, [&relay] { return relay.Step(kEpoch); })) {}
  ~StepThread() {
    gate_.set_open(true);
    if (step_.valid()) step_.wait();
  }
  // Whether the step has returned within `ms`.
  bool EndsWithin(int64_t ms) {
    return step_.wait_for(std::chrono::milliseconds(ms)) == std::future_status::ready;
  }
  // The step's result. A step that has not ended within 20 s (it holds a batch in Publish that
  // the test did not expect) fails the test, and is let through to end.
  Status Join() {
    if (step_.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "the relay step did not end: it is publishing a batch the test did not let "
                       "through";
      gate_.set_open(true);
    }
    return step_.get();
  }

 private:
  GatePublisher& gate_;
  std::future<Status> step_;
};

inline RevertedBlock RevertedOf(const OutgoingEvent& e) {
  Result<Envelope> env = ParseEnvelope(e.body);
  EXPECT_TRUE(env.ok());
  Result<RevertedBlock> r = ParseBlockRevertedPayload(env->payload_json);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : RevertedBlock{};
}

class RetractionTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto redis = RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status().ToString();
    redis_ = std::move(redis).value();
    auto pool = PgPool::Open(db().url(), 4);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool).value();
    auto publisher = OpenPublisher(redis_->url(), {});
    ASSERT_TRUE(publisher.ok()) << publisher.status().ToString();
    publisher_ = std::make_unique<RecordingPublisher>(std::move(publisher).value());
    ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  }

  std::unique_ptr<RelayDuty> Relay(size_t max_blocks, Publisher* publisher = nullptr) {
    RelayOptions o;
    o.chain_id = kChain;
    o.max_blocks = max_blocks;
    o.buses = {publisher_->name()};
    return std::make_unique<RelayDuty>(pool_.get(),
                                       publisher != nullptr ? publisher : publisher_.get(), o);
  }
  // The bus's cursor (nullopt before its first advance).
  std::optional<uint64_t> CursorNext() {
    auto cursor = LoadCursor(conn(), publisher_->name());
    EXPECT_TRUE(cursor.ok()) << cursor.status().ToString();
    if (!cursor.ok() || !cursor->has_value()) return std::nullopt;
    return (*cursor)->next_block;
  }
  void Write(const RangeWrite& w) {
    Status st = WriteRange(conn(), w);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(PersistFrontier(conn(), 0, w.blocks.back().block.number + 1).ok());
  }
  // Steps the relay until its cursor is at `next` and no retraction is pending.
  void PublishUpTo(RelayDuty& relay, uint64_t next) {
    for (int i = 0; i < 50; ++i) {
      Status st = relay.Step(kEpoch);
      ASSERT_TRUE(st.ok()) << st.ToString();
      auto cursor = LoadCursor(conn(), publisher_->name());
      ASSERT_TRUE(cursor.ok());
      auto pending =
          ReadRetractions(conn(), cursor->has_value() ? (*cursor)->retracted_through : 0, 1);
      ASSERT_TRUE(pending.ok());
      if (cursor->has_value() && (*cursor)->next_block == next && pending->empty()) return;
    }
    FAIL() << "the relay did not reach block " << next;
  }
  // A step holding a batch, and a second connection with a transaction open. The connection is
  // a member after the step, so it ends first (and its locks with it): a step that waits on them
  // is let go before it is waited for.
  struct HeldStep {
    std::unique_ptr<StepThread> step;
    std::unique_ptr<PgConn> locker;
  };
  // Blocks 0..4 published and their cursor advanced, then 5..14 written and a step started that
  // holds 5..9 in `gate` (closed); held->locker has begun a transaction.
  void HoldTheSecondOfThreeBatches(RelayDuty& relay, GatePublisher& gate, HeldStep* held) {
    Write(SyntheticRange(0, 4, Small(1)));
    gate.set_open(true);
    PublishUpTo(relay, 5);
    if (HasFatalFailure()) return;
    gate.set_open(false);
    Write(SyntheticRange(5, 14, Small(1)));
    auto locker = db().Connect();
    ASSERT_TRUE(locker.ok()) << locker.status().ToString();
    held->locker = std::move(locker).value();
    held->step = std::make_unique<StepThread>(relay, gate);
    ASSERT_EQ(gate.WaitHeld(), std::optional<uint64_t>(5));
    ASSERT_TRUE(held->locker->Exec("BEGIN").ok());
  }
  // The block numbers of the block.new events sent, in order.
  std::vector<uint64_t> PublishedBlocks() {
    std::vector<uint64_t> numbers;
    for (const auto& [pos, number] : Positions(kBlockNew)) numbers.push_back(number);
    return numbers;
  }
  // from, from + 1, ..., to - 1.
  static std::vector<uint64_t> Blocks(uint64_t from, uint64_t to) {
    std::vector<uint64_t> out;
    for (uint64_t n = from; n < to; ++n) out.push_back(n);
    return out;
  }
  // The ids the relay published for each block, by block hash, from `sent`.
  std::map<std::string, std::set<std::string>> IdsByBlockHash(size_t from, size_t to) {
    std::map<uint64_t, std::string> hash_of;  // the block.new events give number -> hash
    std::map<std::string, std::set<std::string>> out;
    std::map<uint64_t, std::set<std::string>> by_number;
    for (size_t i = from; i < to; ++i) {
      const OutgoingEvent& e = publisher_->sent[i];
      if (e.event_type == kBlockReverted) continue;
      by_number[BlockNumberOf(e)].insert(e.event_id);
      if (e.event_type == kBlockNew) {
        simdjson::dom::parser parser;
        std::string_view hash;
        auto payload = ParseEnvelope(e.body)->payload_json;
        EXPECT_EQ(parser.parse(payload)["hash"].get_string().get(hash), simdjson::SUCCESS);
        hash_of[BlockNumberOf(e)] = std::string(hash);
      }
    }
    for (auto& [n, ids] : by_number) out[hash_of[n]] = ids;
    return out;
  }
  // Positions in `sent` of events of `type`, with their block numbers.
  std::vector<std::pair<size_t, uint64_t>> Positions(std::string_view type, size_t from = 0) {
    std::vector<std::pair<size_t, uint64_t>> out;
    for (size_t i = from; i < publisher_->sent.size(); ++i) {
      if (publisher_->sent[i].event_type == type)
        out.emplace_back(i, BlockNumberOf(publisher_->sent[i]));
    }
    return out;
  }
  int64_t Count(const std::string& sql) {
    auto r = conn().Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r->GetInt64(0, 0) : -1;
  }

  // The balances consumer group (one consumer) over the bus's transfers and retractions, on a
  // thread until Stop (or destruction). nullptr (with a test failure) when it cannot start.
  struct BalancesRun {
    SubscribeOptions sub;
    std::unique_ptr<Subscriber> subscriber;
    std::atomic<bool> stop{false};
    Status consumed;
    std::thread thread;
    void Stop() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
    ~BalancesRun() { Stop(); }
  };
  std::unique_ptr<BalancesRun> StartBalances() {
    if (!EnsureBalancesSchema(conn()).ok()) {
      ADD_FAILURE() << "balances schema";
      return nullptr;
    }
    auto run = std::make_unique<BalancesRun>();
    run->sub.group = "balances";
    run->sub.topics = {EventTopic(kTokenTransfer, kChain), EventTopic(kBlockReverted, kChain)};
    auto subscriber = OpenSubscriber(redis_->url(), run->sub);
    if (!subscriber.ok()) {
      ADD_FAILURE() << subscriber.status().ToString();
      return nullptr;
    }
    run->subscriber = std::move(subscriber).value();
    BalancesOptions o;
    o.pg_url = db().url();
    o.redis_url = redis_->url();
    o.consumer.poll_timeout_ms = 20;
    o.consumer.status_interval_ms = 60'000;
    BalancesRun* r = run.get();
    r->thread =
        std::thread([r, o] { r->consumed = RunBalancesConsumer(o, r->subscriber.get(), r->stop); });
    return run;
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<PgPool> pool_;
  std::unique_ptr<RecordingPublisher> publisher_;
};

}  // namespace gapless::retraction_testing

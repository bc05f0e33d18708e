// consumer_order_test: ordered consumption (ConsumerOptions::ordered_topics) on an in-memory
// Subscriber and in-memory processing keys, on SimEnv: each listed partition applies its events in
// the order the bus delivered them, retries, dead letters and held keys included, while the other
// partitions go on. Shared: consumer_test_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/env.h"
#include "events/consumer.h"
#include "events/consumer_test_fixture.h"
#include "events/consumer_test_util.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using testing_util::ConsumerTest;
using testing_util::FakeLocks;
using testing_util::FakeSubscriber;
using testing_util::InMemoryCompletions;
using testing_util::kSecond;
using testing_util::Running;
using testing_util::TestEvent;
using testing_util::WaitFor;

// A handler that applies test events (TestEvent(n)) by appending them to a log, and fails the
// attempts its plan says: attempt a of event n fails if a < failures[n] (max_retries + 1 or
// more: the event is dead-lettered). Every call is logged with a logical clock taken when it
// begins and when it ends, so overlaps and order can be checked whatever the threads did.
class OrderLog : public InMemoryCompletions {
 public:
  struct Call {
    std::string topic;
    int32_t partition = 0;
    int n = 0;
    int attempt = 0;
    uint64_t begin = 0;
    uint64_t end = 0;
    bool ok = false;
  };

  std::map<int, int> failures;
  // The error of a failing attempt; "other" by default (retried, pauses nothing).
  std::function<Status(int n, int attempt)> error = [](int, int) {
    return Internal("planned failure");
  };

  Status Process(const ConsumedEvent& e) override {
    int n = std::stoi(e.envelope.payload_json.substr(5));  // {"n":N}
    uint64_t begin = clock_.fetch_add(1);
    int now_active = active_.fetch_add(1) + 1;
    int seen = max_active_.load();
    while (now_active > seen && !max_active_.compare_exchange_weak(seen, now_active)) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // lets calls overlap
    bool fail;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fail = e.attempt < failures[n];
    }
    active_.fetch_sub(1);
    uint64_t end = clock_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(
        {e.delivery.topic, e.delivery.partition, n, e.attempt, begin, end, /*ok=*/!fail});
    return fail ? error(n, e.attempt) : Status::Ok();
  }

  // The calls of one partition (or of all, topic ""), by the time they began.
  std::vector<Call> calls(const std::string& topic = "", int32_t partition = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Call> out;
    for (const Call& c : calls_) {
      if (topic.empty() || (c.topic == topic && c.partition == partition)) out.push_back(c);
    }
    std::sort(out.begin(), out.end(),
              [](const Call& a, const Call& b) { return a.begin < b.begin; });
    return out;
  }
  // The events applied (Process succeeded), in the order they were applied.
  std::vector<int> applied(const std::string& topic = "", int32_t partition = 0) {
    std::vector<Call> all = calls(topic, partition);
    std::sort(all.begin(), all.end(), [](const Call& a, const Call& b) { return a.end < b.end; });
    std::vector<int> out;
    for (const Call& c : all) {
      if (c.ok) out.push_back(c.n);
    }
    return out;
  }
  int max_active() const { return max_active_.load(); }

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
  std::atomic<uint64_t> clock_{0};
  std::atomic<int> active_{0};
  std::atomic<int> max_active_{0};
};

class OrderedConsumerTest : public ConsumerTest {
 protected:
  OrderLog log_;
};

// Without ordering (the default), a delivery that fails is overtaken by the ones behind it in
// its partition: block h+1 is applied before block h.
TEST_F(OrderedConsumerTest, WithoutOrderingALaterEventOfThePartitionIsAppliedFirst) {
  log_.failures[0] = 1;  // block 0 fails once: retried 1 s later
  for (int n = 0; n < 4; ++n) sub_.Add(TestEvent(n).body, "block.new.1", 0);
  Running r(Options(), &sub_, &locks_, &log_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked_count() == 4; }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  std::vector<int> applied = log_.applied("block.new.1", 0);
  ASSERT_EQ(applied.size(), 4u);
  EXPECT_NE(applied.front(), 0) << "block 1 must be able to overtake block 0";
  EXPECT_EQ(applied.back(), 0);
}

// The same with the topic ordered: blocks 1..3 wait while block 0 waits for its retry (shown in
// the status report as behind an earlier event), and are applied after it, in order.
TEST_F(OrderedConsumerTest, OrderedPartitionWaitsForTheRetryOfItsHead) {
  log_.failures[0] = 2;  // retried after 1 s and 2 s more
  for (int n = 0; n < 4; ++n) sub_.Add(TestEvent(n).body, "block.new.1", 0);
  ConsumerOptions o = Options();
  o.ordered_topics = {"block.new.1"};
  o.status_interval_ms = 500;
  std::mutex mu;
  size_t max_blocked = 0;
  o.on_status = [&](const ConsumerStatus& s) {
    std::lock_guard<std::mutex> lock(mu);
    max_blocked = std::max(max_blocked, s.blocked);
  };
  const int64_t t0 = env_.NowMicros();
  Running r(o, &sub_, &locks_, &log_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked_count() == 4; }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  EXPECT_THAT(log_.applied("block.new.1", 0), ::testing::ElementsAre(0, 1, 2, 3));
  std::vector<OrderLog::Call> calls = log_.calls("block.new.1", 0);
  ASSERT_EQ(calls.size(), 6u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(calls[i].n, 0) << "block 0's three attempts come first";
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GT(calls[i].begin, calls[i - 1].end) << "one call at a time in an ordered partition";
  }
  // Acked in order too, the last at block 0's second retry (1 s + 2 s).
  auto acks = sub_.ops("ack");
  ASSERT_EQ(acks.size(), 4u);
  for (size_t i = 0; i < acks.size(); ++i) EXPECT_EQ(acks[i].handle, i + 1);
  EXPECT_EQ(acks[0].at - t0, 3 * kSecond);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(max_blocked, 3u) << "blocks 1..3 reported as waiting behind block 0";
}

// A head that fails on every attempt is dead-lettered after its last retry, and that lets the
// next delivery of its partition go.
TEST_F(OrderedConsumerTest, DeadLetterOfTheHeadLetsTheNextOneGo) {
  log_.failures[0] = 100;
  for (int n = 0; n < 3; ++n) sub_.Add(TestEvent(n).body, "block.new.1", 0);
  ConsumerOptions o = Options();
  o.ordered_topics = {"*"};
  Running r(o, &sub_, &locks_, &log_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked_count() == 3; }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  EXPECT_THAT(log_.applied("block.new.1", 0), ::testing::ElementsAre(1, 2));
  auto dlq = sub_.ops("dlq");
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].handle, 1u);
  std::vector<OrderLog::Call> calls = log_.calls("block.new.1", 0);
  ASSERT_EQ(calls.size(), 6u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(calls[i].n, 0);
  EXPECT_EQ(calls[4].n, 1);
  // Block 1 started at the dead letter's (virtual) time: 1 + 2 + 4 s after block 0's first try.
  auto acks = sub_.ops("ack");
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[1].handle, 2u);
  EXPECT_EQ(acks[1].at, dlq[0].at);
}

// A head whose processing key another consumer holds keeps its partition's turn until it is
// done: block 1 is not applied before block 0, which waits for the other consumer's key to expire.
TEST_F(OrderedConsumerTest, AHeldHeadKeepsItsPartitionWaiting) {
  locks_.HoldForOther(TestEvent(0).event_id, 3'000);
  for (int n = 0; n < 2; ++n) sub_.Add(TestEvent(n).body, "block.new.1", 0);
  ConsumerOptions o = Options();
  o.ordered_topics = {"block.new.1"};
  const int64_t t0 = env_.NowMicros();
  Running r(o, &sub_, &locks_, &log_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked_count() == 2; }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  EXPECT_THAT(log_.applied("block.new.1", 0), ::testing::ElementsAre(0, 1));
  auto acks = sub_.ops("ack");
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_GE(acks[0].at, t0 + 3 * kSecond);
  EXPECT_EQ(acks[0].handle, 1u);
}

// Random failures (seeded), retries, database errors that pause a partition, and dead letters,
// over three ordered partitions and one unordered one: each ordered partition applies its events
// exactly in their order, one call at a time, skipping only the dead-lettered; the partitions
// interleave (one goes on while another's head waits for a retry); the unordered one is
// overtaken as before.
TEST_F(OrderedConsumerTest, UnderRandomFailuresEachOrderedPartitionAppliesInOrderAndOthersGoOn) {
  struct Partition {
    std::string topic;
    int32_t partition;
    bool ordered;
  };
  const std::vector<Partition> partitions = {{"block.new.1", 0, true},
                                             {"block.new.1", 1, true},
                                             {"block.reverted.1", 0, true},
                                             {"token.transfer.1", 0, false}};
  int unordered_overtakes = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SimEnv env(seed);
    FakeSubscriber sub(&env);
    FakeLocks locks(&env);
    OrderLog log;
    std::mt19937_64 rng(seed);
    constexpr int kEvents = 80;
    std::map<std::pair<std::string, int32_t>, std::vector<int>> sent;
    std::set<int> dead;
    std::set<int> database_errors;
    for (int n = 0; n < kEvents; ++n) {
      const Partition& p = partitions[rng() % partitions.size()];
      uint64_t roll = rng() % 100;
      int failures = roll < 65 ? 0 : roll < 80 ? 1 : roll < 88 ? 2 : roll < 94 ? 3 : 4;
      log.failures[n] = failures;
      if (failures == 4) dead.insert(n);
      if (failures > 0 && rng() % 4 == 0) database_errors.insert(n);
      sent[{p.topic, p.partition}].push_back(n);
      sub.Add(TestEvent(n).body, p.topic, p.partition);
    }
    log.error = [&database_errors](int n, int) {
      if (database_errors.count(n)) {
        return Aborted("deadlock detected").WithReason("sqlstate:40P01");
      }
      return Internal("planned failure");
    };
    ConsumerOptions o;
    o.name = "ordered";
    o.env = &env;
    o.ordered_topics = {"block.new.1", "block.reverted.1"};
    Running r(o, &sub, &locks, &log);
    ASSERT_TRUE(WaitFor([&] { return sub.acked_count() == kEvents; }, 60'000)) << sub.acked_count();
    ASSERT_TRUE(r.Stop().ok());
    EXPECT_EQ(sub.ops("dlq").size(), dead.size());

    for (const Partition& p : partitions) {
      SCOPED_TRACE(p.topic + "[" + std::to_string(p.partition) + "]");
      std::vector<int> expected;
      for (int n : sent[{p.topic, p.partition}]) {
        if (!dead.count(n)) expected.push_back(n);
      }
      std::vector<int> applied = log.applied(p.topic, p.partition);
      if (!p.ordered) {
        std::vector<int> sorted = applied;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(sorted, expected);
        if (applied != expected) unordered_overtakes++;
        continue;
      }
      EXPECT_EQ(applied, expected);
      std::vector<OrderLog::Call> calls = log.calls(p.topic, p.partition);
      for (size_t i = 1; i < calls.size(); ++i) {
        EXPECT_GT(calls[i].begin, calls[i - 1].end) << "two calls at once in an ordered partition";
        EXPECT_GE(calls[i].n, calls[i - 1].n) << "a later event started before an earlier one";
      }
    }

    // Interleaving: while the head of one ordered partition waited for a retry (between the end
    // of a failed attempt and the beginning of the next), another partition applied events.
    std::vector<OrderLog::Call> all = log.calls();
    int overlapped = 0;
    for (const OrderLog::Call& failed : all) {
      if (failed.ok || failed.topic == "token.transfer.1") continue;
      uint64_t next_begin = UINT64_MAX;
      for (const OrderLog::Call& c : all) {
        if (c.n == failed.n && c.attempt == failed.attempt + 1) next_begin = c.begin;
      }
      for (const OrderLog::Call& c : all) {
        bool other = c.topic != failed.topic || c.partition != failed.partition;
        if (other && c.ok && c.begin > failed.end && c.end < next_begin) {
          overlapped++;
          break;
        }
      }
    }
    EXPECT_GT(overlapped, 0) << "no partition went on while another waited for a retry";
    EXPECT_GE(log.max_active(), 2) << "partitions must be processed concurrently";
    EXPECT_LE(log.max_active(), 4);
  }
  EXPECT_GT(unordered_overtakes, 0) << "the unordered topic should show overtaking somewhere";
}

}  // namespace
}  // namespace gapless

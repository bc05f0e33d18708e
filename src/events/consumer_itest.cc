// consumer_itest: the consumer framework's processing keys in a real Redis (the shared test
// server): two consumer instances that share Redis and both receive every event three times
// process each event once; the key carries its TTL while an event is being processed and is gone
// afterwards. Ordered topics on a real Redis Streams bus apply each stream in publish order under
// retries and a dead letter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "events/consumer.h"
#include "events/consumer_test_util.h"
#include "events/redis_bus.h"
#include "testing/redis_test_db.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using testing_util::FakeSubscriber;
using testing_util::InMemoryCompletions;
using testing_util::TestEvent;
using testing_util::WaitFor;

// A service whose completion record is shared by both consumers (as a database would be).
class SharedHandler : public InMemoryCompletions {
 public:
  std::function<void(const ConsumedEvent&)> during_process = [](const ConsumedEvent&) {};
  Status Process(const ConsumedEvent& e) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_[e.envelope.event_id]++;
    }
    during_process(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return Status::Ok();
  }
  std::map<std::string, int> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> calls_;
};

ConsumerOptions FastOptions(const std::string& name) {
  ConsumerOptions o;
  o.name = name;
  o.poll_timeout_ms = 20;
  o.held_recheck_ms = 20;
  o.retry_base_ms = 20;
  o.recovery = {100, 100, 100, 20};
  return o;
}

class ConsumerRedisTest : public RedisTest {
 protected:
  std::string Prefix() { return keys().prefix() + "consumer:test"; }
  std::unique_ptr<RedisProcessingLocks> Locks() {
    auto locks = RedisProcessingLocks::Open(db().url(), Prefix());
    EXPECT_TRUE(locks.ok()) << locks.status().ToString();
    return locks.ok() ? std::move(*locks) : nullptr;
  }
  // Processing keys left under the test's prefix.
  int64_t KeysLeft() {
    auto r = conn().Command({"KEYS", Prefix() + ":processing:*"});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? static_cast<int64_t>(r->elements.size()) : -1;
  }
};

TEST_F(ConsumerRedisTest, TwoConsumersSharingRedisProcessEachEventOnce) {
  auto locks_a = Locks();
  auto locks_b = Locks();
  ASSERT_TRUE(locks_a && locks_b);
  Env* env = Env::Default();
  FakeSubscriber sub_a(env), sub_b(env);
  constexpr int kEvents = 60;
  // Every event reaches both consumers, three times in all.
  for (int copy = 0; copy < 3; ++copy) {
    for (int n = 0; n < kEvents; ++n) {
      ((n + copy) % 2 == 0 ? sub_a : sub_b).Add(TestEvent(n).body);
    }
  }
  size_t total = 3 * kEvents;
  SharedHandler handler;
  std::atomic<bool> stop{false};
  Status ra, rb;
  EventConsumer a(FastOptions("a"), &sub_a, locks_a.get(), &handler);
  EventConsumer b(FastOptions("b"), &sub_b, locks_b.get(), &handler);
  std::thread ta([&] { ra = a.Run(stop); });
  std::thread tb([&] { rb = b.Run(stop); });
  bool done = WaitFor([&] { return sub_a.acked_count() + sub_b.acked_count() == total; }, 60'000);
  stop = true;
  ta.join();
  tb.join();
  ASSERT_TRUE(done) << sub_a.acked_count() + sub_b.acked_count() << " of " << total;
  EXPECT_TRUE(ra.ok()) << ra.ToString();
  EXPECT_TRUE(rb.ok()) << rb.ToString();
  auto calls = handler.calls();
  EXPECT_EQ(calls.size(), static_cast<size_t>(kEvents));
  for (int n = 0; n < kEvents; ++n) {
    EXPECT_EQ(calls[TestEvent(n).event_id], 1) << "event " << n;
  }
  EXPECT_EQ(a.LastStatus().processed + b.LastStatus().processed, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(a.LastStatus().duplicates + b.LastStatus().duplicates,
            static_cast<uint64_t>(2 * kEvents));
  EXPECT_EQ(KeysLeft(), 0);
}

TEST_F(ConsumerRedisTest, ProcessingKeyHasItsTtlWhileWorkingAndIsGoneAfter) {
  auto locks = Locks();
  ASSERT_TRUE(locks);
  Env* env = Env::Default();
  FakeSubscriber sub(env);
  uint64_t h = sub.Add(TestEvent(1).body);
  SharedHandler handler;
  auto checker = NewConnection();
  ASSERT_TRUE(checker);
  std::string holder;
  int64_t pttl = -10;
  const std::string key = ProcessingKey(Prefix(), TestEvent(1).event_id);
  handler.during_process = [&](const ConsumedEvent&) {
    auto v = checker->Command({"GET", key});
    if (v.ok()) holder = v->str;
    auto t = checker->Command({"PTTL", key});
    if (t.ok()) pttl = t->integer;
  };
  ConsumerOptions o = FastOptions("ttl");
  o.processing_ttl_ms = 300'000;
  std::atomic<bool> stop{false};
  EventConsumer c(o, &sub, locks.get(), &handler);
  std::thread t([&] { (void)c.Run(stop); });
  bool acked = WaitFor([&] { return sub.acked(h); }, 30'000);
  stop = true;
  t.join();
  ASSERT_TRUE(acked);
  EXPECT_FALSE(holder.empty()) << "the key must exist while the event is processed";
  EXPECT_GT(pttl, 290'000);
  EXPECT_LE(pttl, 300'000);
  EXPECT_EQ(KeysLeft(), 0);
}

// A handler that runs longer than the key's TTL keeps its key: the poll thread renews it, so
// another consumer never takes the event over from a live one (and the TTL can be short enough
// that a dead consumer's event waits seconds, not minutes).
TEST_F(ConsumerRedisTest, TheProcessingKeyIsRenewedWhileAHandlerRunsLongerThanItsTtl) {
  auto locks = Locks();
  ASSERT_TRUE(locks);
  Env* env = Env::Default();
  FakeSubscriber sub(env);
  uint64_t h = sub.Add(TestEvent(1).body);
  SharedHandler handler;
  auto checker = NewConnection();
  ASSERT_TRUE(checker);
  constexpr int64_t kTtlMs = 600;
  const std::string key = ProcessingKey(Prefix(), TestEvent(1).event_id);
  std::vector<std::string> holders;  // the key's holder every 100 ms while the handler runs
  handler.during_process = [&](const ConsumedEvent&) {
    for (int i = 0; i < 20; ++i) {  // 2 s: more than three TTLs
      auto v = checker->Command({"GET", key});
      holders.push_back(v.ok() ? v->str : "error");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  };
  ConsumerOptions o = FastOptions("renew");
  o.processing_ttl_ms = kTtlMs;
  std::atomic<bool> stop{false};
  EventConsumer c(o, &sub, locks.get(), &handler);
  std::thread t([&] { (void)c.Run(stop); });
  bool acked = WaitFor([&] { return sub.acked(h); }, 30'000);
  stop = true;
  t.join();
  ASSERT_TRUE(acked);
  ASSERT_EQ(holders.size(), 20u);
  for (size_t i = 0; i < holders.size(); ++i) {
    EXPECT_FALSE(holders[i].empty()) << "the key was gone " << (i * 100) << " ms into the handler";
  }
  EXPECT_EQ(KeysLeft(), 0);
}

// A renewal racing with the attempt's release must not bring the key back.
TEST_F(ConsumerRedisTest, RenewExtendsOnlyAKeyItsTokenHoldsAndNeverMakesOne) {
  auto locks = Locks();
  ASSERT_TRUE(locks);
  ASSERT_TRUE(locks->TryAcquire("e2", "tok-a", 1'000).ok());
  auto renewed = locks->Renew("e2", "tok-a", 60'000);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_TRUE(*renewed);
  auto pttl = conn().Command({"PTTL", ProcessingKey(Prefix(), "e2")});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, 50'000);
  auto other = locks->Renew("e2", "tok-b", 60'000);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other);
  ASSERT_TRUE(locks->Release("e2", "tok-a").ok());
  auto late = locks->Renew("e2", "tok-a", 60'000);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(*late);
  EXPECT_EQ(KeysLeft(), 0) << "a renewal after the release made the key again";
}

// The three scripts share their argument checks (lua/consumer_lib.lua): each refuses a bad
// argument naming itself and the argument, and writes nothing.
TEST_F(ConsumerRedisTest, EveryProcessingKeyScriptRefusesABadArgumentByNameBeforeAnyWrite) {
  auto locks = Locks();
  ASSERT_TRUE(locks);
  auto empty = locks->TryAcquire("e3", "", 10'000);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("consumer_acquire: empty token"), std::string::npos)
      << empty.status().ToString();
  auto zero = locks->TryAcquire("e3", "tok-a", 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("consumer_acquire: ttl must be an integer >= 1 ms, got 0"),
            std::string::npos)
      << zero.status().ToString();
  EXPECT_EQ(KeysLeft(), 0);
  ASSERT_TRUE(locks->TryAcquire("e3", "tok-a", 60'000).ok());
  auto renew = locks->Renew("e3", "tok-a", -5);
  ASSERT_FALSE(renew.ok());
  EXPECT_NE(renew.status().message().find("consumer_renew: ttl must be an integer >= 1 ms, got -5"),
            std::string::npos)
      << renew.status().ToString();
  auto pttl = conn().Command({"PTTL", ProcessingKey(Prefix(), "e3")});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, 50'000) << "a refused renewal changed the TTL";
  auto release = locks->Release("e3", "");
  ASSERT_FALSE(release.ok());
  EXPECT_NE(release.message().find("consumer_release: empty token"), std::string::npos)
      << release.ToString();
  EXPECT_EQ(KeysLeft(), 1);
  ASSERT_TRUE(locks->Release("e3", "tok-a").ok());
}

TEST_F(ConsumerRedisTest, AcquireIsIdempotentForItsTokenAndReleaseChecksTheToken) {
  auto locks = Locks();
  ASSERT_TRUE(locks);
  auto a = locks->TryAcquire("e1", "tok-a", 10'000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(*a);
  auto again = locks->TryAcquire("e1", "tok-a", 10'000);  // a resend after a lost reply
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  auto other = locks->TryAcquire("e1", "tok-b", 10'000);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other);
  ASSERT_TRUE(locks->Release("e1", "tok-b").ok());
  EXPECT_EQ(KeysLeft(), 1) << "another token must not delete the key";
  ASSERT_TRUE(locks->Release("e1", "tok-a").ok());
  EXPECT_EQ(KeysLeft(), 0);
  auto b = locks->TryAcquire("e1", "tok-b", 10'000);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(*b);
  ASSERT_TRUE(locks->Release("e1", "tok-b").ok());
}

// Ordered consumption on a real bus: two Redis streams of 40 events each, published interleaved,
// consumed with ordered_topics = {"*"} by four workers, with failures planned per event (some
// fail once or twice before succeeding, one fails on every attempt and is dead-lettered). Each
// stream's events are applied exactly in the order they were published, less the dead letter,
// and the group ends with nothing pending.
TEST_F(ConsumerRedisTest, OrderedTopicsOnRedisStreamsApplyEachStreamInPublishOrder) {
  auto locks = Locks();
  ASSERT_TRUE(locks);
  const std::vector<std::string> topics = {keys().prefix() + "ordered:block.new.1",
                                           keys().prefix() + "ordered:block.reverted.1"};
  constexpr int kPerTopic = 40;
  std::vector<OutgoingEvent> batch;
  for (int n = 0; n < 2 * kPerTopic; ++n) {
    OutgoingEvent e = TestEvent(n);
    e.topic = topics[n % 2];
    batch.push_back(std::move(e));
  }
  auto pub = OpenRedisPublisher(db().url(), {});
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  ASSERT_TRUE((*pub)->Publish(batch).ok());
  SubscribeOptions so;
  so.group = "ordered";
  so.topics = topics;
  auto sub = OpenRedisSubscriber(db().url(), so);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();

  // How many attempts of event n fail: some once, some twice, and event 20 on every attempt
  // (dead-lettered after its third retry).
  auto failures = [](int n) { return n == 20 ? 100 : n % 7 == 3 ? 1 : n % 11 == 5 ? 2 : 0; };
  class Handler : public InMemoryCompletions {
   public:
    explicit Handler(std::function<int(int)> failures) : failures_(std::move(failures)) {}
    Status Process(const ConsumedEvent& e) override {
      int n = std::stoi(e.envelope.payload_json.substr(5));  // {"n":N}
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (e.attempt < failures_(n)) return Internal("planned failure");
      std::lock_guard<std::mutex> lock(mu_);
      applied_[e.delivery.topic].push_back(n);
      return Status::Ok();
    }
    std::map<std::string, std::vector<int>> applied() {
      std::lock_guard<std::mutex> lock(mu_);
      return applied_;
    }
    size_t count() {
      std::lock_guard<std::mutex> lock(mu_);
      size_t n = 0;
      for (const auto& [topic, events] : applied_) n += events.size();
      return n;
    }

   private:
    std::function<int(int)> failures_;
    std::mutex mu_;
    std::map<std::string, std::vector<int>> applied_;
  } handler(failures);

  ConsumerOptions o = FastOptions("ordered");
  o.ordered_topics = {"*"};
  std::atomic<bool> stop{false};
  Status result;
  EventConsumer c(o, sub->get(), locks.get(), &handler);
  std::thread t([&] { result = c.Run(stop); });
  bool done = WaitFor(
      [&] {
        if (handler.count() < 2 * kPerTopic - 1) return false;
        auto lag = RedisGroupLag(db().url(), so);
        return lag.ok() && *lag == 0;
      },
      60'000);
  stop = true;
  t.join();
  ASSERT_TRUE(result.ok()) << result.ToString();
  ASSERT_TRUE(done) << handler.count() << " applied";
  auto applied = handler.applied();
  for (int k = 0; k < 2; ++k) {
    std::vector<int> expected;
    for (int n = k; n < 2 * kPerTopic; n += 2) {
      if (n != 20) expected.push_back(n);
    }
    EXPECT_EQ(applied[topics[k]], expected) << topics[k];
  }
  auto dlq = conn().Command({"XLEN", topics[0] + ".dlq"});
  ASSERT_TRUE(dlq.ok());
  EXPECT_EQ(dlq->integer, 1);
  EXPECT_EQ(c.LastStatus().dead_lettered, 1u);
  EXPECT_EQ(KeysLeft(), 0);
}
}  // namespace
}  // namespace gapless

// consumer_test: the consumer framework on an in-memory Subscriber and in-memory processing keys,
// on SimEnv (virtual time stands still while a delivery is in a worker and jumps to the next
// timer when none is, so the retry, pause and report delays are observed exactly).
#include "events/consumer.h"

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
#include "events/consumer_test_util.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using ::testing::HasSubstr;
using testing_util::FakeLocks;
using testing_util::FakeSubscriber;
using testing_util::InMemoryCompletions;
using testing_util::TestEvent;
using testing_util::WaitFor;

// A handler whose completion set lives in memory; the test decides what Process does.
class TestHandler : public InMemoryCompletions {
 public:
  explicit TestHandler(Env* env) : env_(env) {}

  std::function<Status(const ConsumedEvent&)> process = [](const ConsumedEvent&) {
    return Status::Ok();
  };

  Status Process(const ConsumedEvent& e) override {
    int now_active = active_.fetch_add(1) + 1;
    int seen = max_active_.load();
    while (now_active > seen && !max_active_.compare_exchange_weak(seen, now_active)) {
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_[e.envelope.event_id].push_back(env_->NowMicros());
    }
    Status st = process(e);
    active_.fetch_sub(1);
    return st;
  }
  void OnFailed(const ConsumedEvent& e, const Status&, bool final) override {
    std::lock_guard<std::mutex> lock(mu_);
    finals_[e.envelope.event_id].push_back(final);
  }

  std::vector<int64_t> calls(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[id];
  }
  std::vector<bool> finals(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return finals_[id];
  }
  void Complete(const std::string& id) { (void)MarkCompleted(id); }
  int max_active() const { return max_active_.load(); }

 private:
  Env* env_;
  std::mutex mu_;
  std::map<std::string, std::vector<int64_t>> calls_;
  std::map<std::string, std::vector<bool>> finals_;
  std::atomic<int> active_{0};
  std::atomic<int> max_active_{0};
};

// Runs a consumer on its own thread until Stop().
class Running {
 public:
  Running(ConsumerOptions options, Subscriber* sub, ProcessingLocks* locks, EventHandler* handler)
      : consumer_(std::move(options), sub, locks, handler),
        thread_([this] { result_ = consumer_.Run(stop_); }) {}
  ~Running() { (void)Stop(); }
  Status Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return result_;
  }
  EventConsumer& consumer() { return consumer_; }

 private:
  std::atomic<bool> stop_{false};
  Status result_;
  EventConsumer consumer_;
  std::thread thread_;
};

class ConsumerTest : public ::testing::Test {
 protected:
  ConsumerOptions Options() {
    ConsumerOptions o;
    o.name = "test";
    o.env = &env_;
    return o;
  }
  SimEnv env_;
  FakeSubscriber sub_{&env_};
  FakeLocks locks_{&env_};
  TestHandler handler_{&env_};
};

constexpr int64_t kSecond = 1'000'000;

TEST(ClassifyErrorTest, UsesReasonsAndCodesOnly) {
  EXPECT_EQ(ClassifyError(Unavailable("x").WithReason("http:429")), ErrorClass::kRateLimit);
  EXPECT_EQ(ClassifyError(Internal("x").WithReason("rpc:rate-limited")), ErrorClass::kRateLimit);
  EXPECT_EQ(ClassifyError(Internal("x").WithReason(std::string(kRateLimitedReason))),
            ErrorClass::kRateLimit);
  EXPECT_EQ(ClassifyError(Aborted("x").WithReason("sqlstate:40P01")), ErrorClass::kDatabase);
  EXPECT_EQ(ClassifyError(Unavailable("x").WithReason("sqlstate:57P01")), ErrorClass::kDatabase);
  EXPECT_EQ(ClassifyError(Unavailable("x").WithReason("redis:LOADING")), ErrorClass::kDatabase);
  EXPECT_EQ(ClassifyError(Unavailable("connection lost")), ErrorClass::kNetwork);
  EXPECT_EQ(ClassifyError(Internal("x").WithReason("http:503")), ErrorClass::kNetwork);
  // Message text never decides.
  EXPECT_EQ(ClassifyError(Internal("rate limit exceeded, database down, network")),
            ErrorClass::kOther);
  EXPECT_EQ(ClassifyError(InvalidData("x")), ErrorClass::kOther);
  RecoveryDelays d;
  EXPECT_EQ(d.For(ErrorClass::kRateLimit), 30'000);
  EXPECT_EQ(d.For(ErrorClass::kNetwork), 10'000);
  EXPECT_EQ(d.For(ErrorClass::kDatabase), 5'000);
  EXPECT_EQ(d.For(ErrorClass::kOther), 2'000);
}

TEST(ProcessingKeyTest, Shape) {
  EXPECT_EQ(ProcessingKey("gapless:consumer:balances", "abc"),
            "gapless:consumer:balances:processing:abc");
}

TEST_F(ConsumerTest, EachEventProcessedOnceAlthoughDeliveredThreeTimes) {
  constexpr int kEvents = 30;
  std::vector<std::string> bodies;
  for (int n = 0; n < kEvents; ++n) {
    for (int copy = 0; copy < 3; ++copy) bodies.push_back(TestEvent(n).body);
  }
  std::mt19937 rng(7);
  std::shuffle(bodies.begin(), bodies.end(), rng);
  for (size_t i = 0; i < bodies.size(); ++i) sub_.Add(bodies[i], "test.event.1", i % 2);
  handler_.process = [](const ConsumedEvent&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // lets copies overlap
    return Status::Ok();
  };
  Running r(Options(), &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked_count() == bodies.size(); }, 20'000))
      << sub_.acked_count();
  ASSERT_TRUE(r.Stop().ok());
  for (int n = 0; n < kEvents; ++n) {
    EXPECT_EQ(handler_.calls(TestEvent(n).event_id).size(), 1u) << "event " << n;
  }
  EXPECT_EQ(sub_.ack_calls(), bodies.size());
  EXPECT_EQ(locks_.held(), 0u) << "a processing key outlived its attempt";
  ConsumerStatus s = r.consumer().LastStatus();
  EXPECT_EQ(s.processed, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(s.duplicates, static_cast<uint64_t>(2 * kEvents));
  EXPECT_EQ(s.failures, 0u);
}

TEST_F(ConsumerTest, FailedProcessIsRetriedThreeTimesAtOneTwoFourSecondsThenDeadLettered) {
  const std::string bad = TestEvent(1).event_id;
  handler_.process = [&](const ConsumedEvent& e) {
    if (e.envelope.event_id == bad) return Internal("boom 42");
    return Status::Ok();
  };
  uint64_t bad_handle = sub_.Add(TestEvent(1).body);
  uint64_t good_handle = sub_.Add(TestEvent(2).body);
  Running r(Options(), &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked(bad_handle) && sub_.acked(good_handle); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());

  std::vector<int64_t> calls = handler_.calls(bad);
  ASSERT_EQ(calls.size(), 4u) << "one try and exactly three retries";
  EXPECT_EQ(calls[1] - calls[0], 1 * kSecond);
  EXPECT_EQ(calls[2] - calls[1], 2 * kSecond);
  EXPECT_EQ(calls[3] - calls[2], 4 * kSecond);
  EXPECT_THAT(handler_.finals(bad), ::testing::ElementsAre(false, false, false, true));

  // Dead-lettered once, with the event id and the error, then acked (in that order).
  std::vector<FakeSubscriber::Op> ops;
  for (const auto& op : sub_.ops()) {
    if (op.handle == bad_handle) ops.push_back(op);
  }
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].what, "dlq");
  EXPECT_THAT(ops[0].text, HasSubstr(bad));
  EXPECT_THAT(ops[0].text, HasSubstr("boom 42"));
  EXPECT_THAT(ops[0].text, HasSubstr("attempts=4"));
  EXPECT_EQ(ops[1].what, "ack");
  EXPECT_EQ(ops[0].at, calls[3]);
  // An "other" error pauses nothing.
  EXPECT_TRUE(sub_.ops("pause").empty());
  EXPECT_EQ(handler_.calls(TestEvent(2).event_id).size(), 1u);
  EXPECT_EQ(locks_.held(), 0u);
  ConsumerStatus s = r.consumer().LastStatus();
  EXPECT_EQ(s.failures, 4u);
  EXPECT_EQ(s.dead_lettered, 1u);
  EXPECT_EQ(s.processed, 1u);
}

TEST_F(ConsumerTest, ShorterConfiguredRetryDelaysAndRetryCount) {
  const std::string bad = TestEvent(1).event_id;
  int tries = 0;
  handler_.process = [&](const ConsumedEvent&) {
    return ++tries <= 2 ? Internal("flaky") : Status::Ok();
  };
  uint64_t h = sub_.Add(TestEvent(1).body);
  ConsumerOptions o = Options();
  o.retry_base_ms = 100;
  o.max_retries = 5;
  Running r(o, &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked(h); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  std::vector<int64_t> calls = handler_.calls(bad);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1] - calls[0], 100'000);
  EXPECT_EQ(calls[2] - calls[1], 200'000);
  EXPECT_TRUE(sub_.ops("dlq").empty()) << "succeeded on its second retry";
}

TEST_F(ConsumerTest, DatabaseErrorPausesThePartitionForFiveSecondsThenResumes) {
  const std::string bad = TestEvent(1).event_id;
  int tries = 0;
  handler_.process = [&](const ConsumedEvent& e) {
    if (e.envelope.event_id == bad && ++tries == 1) {
      return Aborted("deadlock detected").WithReason("sqlstate:40P01");
    }
    return Status::Ok();
  };
  const int64_t t0 = env_.NowMicros();
  uint64_t bad_h = sub_.Add(TestEvent(1).body, "test.event.1", 0);
  // Published while the partition is paused: partition 0's must wait for the resume, partition
  // 1's must not.
  uint64_t p0_h = sub_.Add(TestEvent(2).body, "test.event.1", 0, t0 + 1 * kSecond);
  uint64_t p1_h = sub_.Add(TestEvent(3).body, "test.event.1", 1, t0 + 1 * kSecond);
  Running r(Options(), &sub_, &locks_, &handler_);
  ASSERT_TRUE(
      WaitFor([&] { return sub_.acked(bad_h) && sub_.acked(p0_h) && sub_.acked(p1_h); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());

  auto pauses = sub_.ops("pause");
  auto resumes = sub_.ops("resume");
  ASSERT_EQ(pauses.size(), 1u);
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(pauses[0].partition, 0);
  EXPECT_EQ(resumes[0].partition, 0);
  EXPECT_EQ(resumes[0].at - pauses[0].at, 5 * kSecond);
  std::vector<int64_t> calls = handler_.calls(bad);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(pauses[0].at, calls[0]);
  EXPECT_EQ(calls[1], resumes[0].at) << "the retry waits for its partition's resume";
  EXPECT_GE(sub_.delivered_at(p0_h), resumes[0].at);
  EXPECT_LT(sub_.delivered_at(p1_h), resumes[0].at);
  EXPECT_TRUE(r.consumer().LastStatus().paused.empty());
}

// A second failure of the partition while it is paused lengthens the pause; a retry scheduled
// before that must wait for the later resume too (it ran at its own due time before: seed 209).
TEST_F(ConsumerTest, ARetryWaitsForItsPartitionsPauseWhenALaterFailureLengthensIt) {
  const std::string db_failure = TestEvent(1).event_id;
  const std::string rate_limited = TestEvent(2).event_id;
  std::map<std::string, int> tries;
  std::mutex mu;
  handler_.process = [&](const ConsumedEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (++tries[e.envelope.event_id] > 1) return Status::Ok();
    if (e.envelope.event_id == db_failure) {
      return Aborted("deadlock detected").WithReason("sqlstate:40P01");
    }
    if (e.envelope.event_id == rate_limited) {
      // Fails after the database failure has paused the partition (virtual time stands still
      // while this runs).
      mu.unlock();
      bool paused = WaitFor([&] { return !sub_.ops("pause").empty(); }, 10'000);
      mu.lock();
      if (!paused) return Internal("the partition was never paused");
      return Unavailable("too many requests").WithReason(std::string(kRateLimitedReason));
    }
    return Status::Ok();
  };
  uint64_t a = sub_.Add(TestEvent(1).body, "test.event.1", 0);
  uint64_t b = sub_.Add(TestEvent(2).body, "test.event.1", 0);
  ConsumerOptions o = Options();
  o.concurrency = 2;
  Running r(o, &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked(a) && sub_.acked(b); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());

  auto pauses = sub_.ops("pause");
  auto resumes = sub_.ops("resume");
  ASSERT_EQ(pauses.size(), 1u);
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0].at - pauses[0].at, 30 * kSecond) << "the rate limit's delay";
  std::vector<int64_t> calls = handler_.calls(db_failure);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_GE(calls[1], resumes[0].at) << "retried while its partition was paused";
}

TEST_F(ConsumerTest, ConcurrencyNeverExceedsTheBound) {
  for (int n = 0; n < 40; ++n) sub_.Add(TestEvent(n).body);
  std::atomic<size_t> max_reported_active{0};
  handler_.process = [](const ConsumedEvent&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return Status::Ok();
  };
  ConsumerOptions o = Options();
  o.concurrency = 3;
  o.status_interval_ms = 10;  // reports while work is in flight
  o.on_status = [&](const ConsumerStatus& s) {
    EXPECT_EQ(s.capacity, 3u);
    EXPECT_LE(s.queued, 6u) << "buffer bound: 2 * concurrency";
    max_reported_active = std::max<size_t>(max_reported_active, s.active);
  };
  Running r(o, &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked_count() == 40; }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  EXPECT_EQ(handler_.max_active(), 3) << "the bound must be reached and never passed";
  EXPECT_LE(max_reported_active.load(), 3u);
}

TEST_F(ConsumerTest, StatusReportNumbers) {
  std::set<std::string> failed_once;
  std::mutex mu;
  handler_.process = [&](const ConsumedEvent& e) {
    bool n = e.envelope.payload_json == "{\"n\":3}" || e.envelope.payload_json == "{\"n\":7}";
    std::lock_guard<std::mutex> lock(mu);
    if (n && failed_once.insert(e.envelope.event_id).second) return Internal("boom");
    return Status::Ok();
  };
  for (int n = 0; n < 10; ++n) sub_.Add(TestEvent(n).body, "test.event.1", n % 2);
  sub_.set_lag(7);
  std::vector<ConsumerStatus> reports;
  ConsumerOptions o = Options();
  o.on_status = [&](const ConsumerStatus& s) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(s);
  };
  const int64_t start_wall = env_.WallMicros();
  Running r(o, &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return reports.size() >= 2;
      },
      20'000));
  ASSERT_TRUE(r.Stop().ok());

  std::lock_guard<std::mutex> lock(mu);
  // Every 30 s of (virtual) time.
  EXPECT_EQ(reports[0].uptime_ms, 30'000);
  EXPECT_EQ(reports[1].uptime_ms, 60'000);
  const ConsumerStatus& s = reports[0];
  EXPECT_EQ(s.name, "test");
  EXPECT_EQ(s.capacity, 4u);
  EXPECT_EQ(s.active, 0u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.scheduled, 0u);
  EXPECT_EQ(s.processed, 10u);
  EXPECT_EQ(s.failures, 2u);
  EXPECT_EQ(s.acked, 10u);
  EXPECT_DOUBLE_EQ(s.success_ratio, 10.0 / 12.0);
  EXPECT_DOUBLE_EQ(s.per_minute, 20.0);  // 10 in 30 s
  EXPECT_EQ(s.started_wall_micros, start_wall);
  EXPECT_EQ(s.partitions, (std::vector<std::string>{"test.event.1[0]", "test.event.1[1]"}));
  EXPECT_TRUE(s.paused.empty());
  EXPECT_THAT(s.last_error, HasSubstr("boom"));
  // The failures happened at the start; their retries 1 s later.
  EXPECT_EQ(s.last_error_age_ms, 30'000);
  EXPECT_GT(s.rss_bytes, 1 << 20);
  ASSERT_TRUE(s.lag.has_value());
  EXPECT_EQ(*s.lag, 7);
  std::string text = s.ToString();
  EXPECT_THAT(text, HasSubstr("active tasks: 0/4"));
  EXPECT_THAT(text, HasSubstr("total processed: 10 (20.00/min average)"));
  EXPECT_THAT(text, HasSubstr("success rate: 83.3% (2 failures)"));
  EXPECT_THAT(text, HasSubstr("uptime: 00:00:30"));
  EXPECT_THAT(text, HasSubstr("partitions: [test.event.1[0], test.event.1[1]]"));
  EXPECT_THAT(text, HasSubstr("(30 s ago)"));
  EXPECT_THAT(text, HasSubstr("consumer lag: 7"));
}

TEST_F(ConsumerTest, EventHeldByAnotherConsumerIsRecheckedNotAckedNorProcessed) {
  const std::string id = TestEvent(1).event_id;
  locks_.HoldForOther(id, 300'000);
  uint64_t h = sub_.Add(TestEvent(1).body);
  Running r(Options(), &sub_, &locks_, &handler_);
  // Looked at again every second, without processing or acking.
  ASSERT_TRUE(WaitFor([&] { return locks_.acquires(id) >= 3; }, 20'000));
  EXPECT_FALSE(sub_.acked(h));
  EXPECT_TRUE(handler_.calls(id).empty());
  // The other consumer finishes: the next look finds it completed and acks it.
  handler_.Complete(id);
  locks_.ReleaseOther(id);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked(h); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  EXPECT_TRUE(handler_.calls(id).empty());
  EXPECT_EQ(r.consumer().LastStatus().duplicates, 1u);
}

TEST_F(ConsumerTest, DeliveriesWaitingForARecheckCountAgainstTheBuffer) {
  for (int n = 0; n < 40; ++n) {
    locks_.HoldForOther(TestEvent(n).event_id, 300'000);
    sub_.Add(TestEvent(n).body);
  }
  Running r(Options(), &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return locks_.acquires(TestEvent(0).event_id) >= 5; }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  // 2 * concurrency waiting, plus at most concurrency in the workers.
  EXPECT_LE(sub_.delivered_count(), 12u);
  EXPECT_GE(sub_.delivered_count(), 8u);
  EXPECT_EQ(sub_.acked_count(), 0u);
}

TEST_F(ConsumerTest, ExpiredKeyOfACrashedHolderLetsTheEventBeProcessed) {
  const std::string id = TestEvent(1).event_id;
  locks_.HoldForOther(id, 3'000);  // the holder died; its key expires in 3 s
  uint64_t h = sub_.Add(TestEvent(1).body);
  const int64_t t0 = env_.NowMicros();
  Running r(Options(), &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked(h); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  ASSERT_EQ(handler_.calls(id).size(), 1u);
  EXPECT_GE(handler_.calls(id)[0], t0 + 3 * kSecond);
}

TEST_F(ConsumerTest, MalformedBodyIsDeadLetteredAtOnce) {
  uint64_t h = sub_.Add("{\"not\":\"an envelope\"}");
  Running r(Options(), &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked(h); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  auto dlq = sub_.ops("dlq");
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_THAT(dlq[0].text, HasSubstr("event_type"));
}

TEST_F(ConsumerTest, FailedPreconditionStopsTheConsumerAndLeavesTheEventUnacked) {
  handler_.process = [](const ConsumedEvent&) {
    return FailedPrecondition("table token_balances has the wrong shape");
  };
  uint64_t h = sub_.Add(TestEvent(1).body);
  std::atomic<bool> stop{false};
  EventConsumer c(Options(), &sub_, &locks_, &handler_);
  Status st = c.Run(stop);  // returns by itself
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr(TestEvent(1).event_id));
  EXPECT_FALSE(sub_.acked(h));
  EXPECT_TRUE(sub_.ops("dlq").empty());
  EXPECT_EQ(locks_.held(), 0u);
}

TEST_F(ConsumerTest, GracefulStopFinishesAndAcksInFlightWork) {
  std::atomic<int> started{0};
  std::atomic<bool> release{false};
  handler_.process = [&](const ConsumedEvent&) {
    started++;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::Ok();
  };
  for (int n = 0; n < 10; ++n) sub_.Add(TestEvent(n).body);
  ConsumerOptions o = Options();
  o.concurrency = 2;
  auto r = std::make_unique<Running>(o, &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return started == 2; }, 20'000));
  std::thread stopper([&] { EXPECT_TRUE(r->Stop().ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sub_.acked_count(), 0u) << "Run must not return before in-flight work is done";
  release = true;
  stopper.join();
  EXPECT_EQ(sub_.acked_count(), 2u) << "the two in flight are acked; the rest stay for the bus";
  EXPECT_EQ(started, 2);
  EXPECT_EQ(locks_.held(), 0u);
}

TEST_F(ConsumerTest, PollFailureIsRetriedAfterTheNetworkDelay) {
  sub_.FailPolls(1);
  uint64_t h = sub_.Add(TestEvent(1).body);
  const int64_t t0 = env_.NowMicros();
  Running r(Options(), &sub_, &locks_, &handler_);
  ASSERT_TRUE(WaitFor([&] { return sub_.acked(h); }, 20'000));
  ASSERT_TRUE(r.Stop().ok());
  EXPECT_EQ(sub_.delivered_at(h), t0 + 10 * kSecond);
  EXPECT_THAT(r.consumer().LastStatus().last_error, HasSubstr("fake bus down"));
}

// --- Ordered consumption (ConsumerOptions::ordered_topics) ---

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

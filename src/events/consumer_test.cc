// consumer_test: the consumer framework on an in-memory Subscriber and in-memory processing keys,
// on SimEnv (virtual time stands still while a delivery is in a worker and jumps to the next
// timer when none is, so the retry, pause and report delays are observed exactly).
// The consumer in order: consumer_order_test.cc. Shared: consumer_test_fixture.h.
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
#include "events/consumer_test_fixture.h"
#include "events/consumer_test_util.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using ::testing::HasSubstr;
using testing_util::ConsumerTest;
using testing_util::FakeSubscriber;
using testing_util::kSecond;
using testing_util::Running;
using testing_util::TestEvent;
using testing_util::WaitFor;

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

}  // namespace
}  // namespace gapless

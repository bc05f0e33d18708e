// The QueueItest fixture of the leased work queue's integration tests (queue_itest.cc,
// queue_janitor_itest.cc, queue_fence_itest.cc, queue_complete_claim_itest.cc): a Queue on the
// test redis-server's database of each test, and helpers that read the queue's keys directly.
// Outside an anonymous namespace: gtest requires every TEST_F of a suite, in whichever file, to
// use the one fixture class.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coord/queue.h"
#include "testing/redis_test_db.h"

namespace gapless {

class QueueItest : public RedisTest {
 protected:
  void SetUp() override {
    RedisTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    queue_ = std::make_unique<Queue>(&conn(), keys());
  }
  Queue& q() { return *queue_; }

  std::vector<std::string> List(const std::string& key) {
    auto r = conn().Command({"LRANGE", key, "0", "-1"});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> out;
    if (r.ok()) {
      for (auto& e : r->elements) out.push_back(e.str);
    }
    return out;
  }
  std::vector<std::string> Pending() { return List(keys().pending()); }
  std::vector<std::string> Processing() { return List(keys().processing()); }
  // A hash field, "" when missing.
  std::string HGet(const std::string& key, const std::string& field) {
    auto r = conn().Command({"HGET", key, field});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->str : "";
  }
  bool HExists(const std::string& key, const std::string& field) {
    auto r = conn().Command({"HEXISTS", key, field});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && r->integer == 1;
  }
  // The completed set's score of a task ("" when it is not there).
  std::string CompletedScore(const TaskRange& t) {
    auto r = conn().Command({"ZSCORE", keys().completed(), t.id()});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->str : "";
  }
  static std::vector<TaskRange> Tasks(const std::vector<ExpiredTask>& expired) {
    std::vector<TaskRange> out;
    for (const ExpiredTask& e : expired) out.push_back(e.task);
    return out;
  }
  // Claims the head with a 50 ms lease and lets it expire; returns the janitor's answer.
  std::vector<ExpiredTask> ClaimAndExpire(const std::string& worker, int64_t max_expiries,
                                          TaskRange* claimed = nullptr) {
    Lease l = MustClaim(worker, 50);
    if (claimed != nullptr) *claimed = l.task;
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    auto expired = q().Janitor(100, max_expiries);
    EXPECT_TRUE(expired.ok()) << expired.status().ToString();
    return expired.ok() ? *expired : std::vector<ExpiredTask>{};
  }

  Lease MustClaim(const std::string& worker, int64_t ttl_ms = 60'000) {
    auto l = q().Claim(worker, ttl_ms);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_TRUE(l.ok() && l->has_value()) << "queue empty";
    return l.ok() && l->has_value() ? **l : Lease{};
  }

  std::unique_ptr<Queue> queue_;
};

using V = std::vector<std::string>;
inline const TaskRange kA{100, 149}, kB{150, 199}, kC{200, 249};

}  // namespace gapless

// consumer_test_fixture: what the consumer framework's unit tests share (consumer_test.cc,
// consumer_order_test.cc): a handler that records its calls on the virtual clock, a consumer run
// on its own thread, and the ConsumerTest fixture (SimEnv, the in-memory subscriber and processing
// keys of consumer_test_util.h). Header-only, test code.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/env.h"
#include "events/consumer.h"
#include "events/consumer_test_util.h"

namespace gapless::testing_util {

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

inline constexpr int64_t kSecond = 1'000'000;

}  // namespace gapless::testing_util

// consumer_test_util: in-memory fakes for the consumer framework's tests (events/consumer.h):
// a Subscriber that delivers what the test adds and records acks, dead letters, pauses and
// resumes with their (virtual) times, and ProcessingLocks in a map with TTLs on an Env.
// A handler base that records completions in memory. Header-only, test code. Thread-safe (the test
// thread inspects while the consumer runs).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/env.h"
#include "events/bus.h"
#include "events/consumer.h"
#include "events/event.h"

namespace gapless::testing_util {

// An EventHandler whose completion record is an in-memory set (IsCompleted / MarkCompleted);
// tests derive their handlers from it and write only Process.
class InMemoryCompletions : public EventHandler {
 public:
  Result<bool> IsCompleted(const std::string& id) override {
    std::lock_guard<std::mutex> lock(completed_mu_);
    return completed_.count(id) > 0;
  }
  Status MarkCompleted(const std::string& id) override {
    std::lock_guard<std::mutex> lock(completed_mu_);
    completed_.insert(id);
    return Status::Ok();
  }

 private:
  std::mutex completed_mu_;
  std::set<std::string> completed_;
};

// An envelope for a test event number n ("test.event", chain 1) with a payload {"n":n}.
inline OutgoingEvent TestEvent(int n) {
  return MakeEvent(1, "test.event", EventId(1, "test.event", std::to_string(n)),
                   "2024-01-01T00:00:00Z", "{\"n\":" + std::to_string(n) + "}");
}

class FakeSubscriber : public Subscriber {
 public:
  struct Op {
    std::string what;  // "ack", "dlq", "pause", "resume"
    uint64_t handle = 0;
    std::string topic;
    int32_t partition = 0;
    int64_t at = 0;    // env micros
    std::string text;  // the dead letter's error
  };

  explicit FakeSubscriber(Env* env) : env_(env) {}

  // Queues a delivery, available from env time `available_at` (0: at once). Returns its handle.
  uint64_t Add(std::string body, std::string topic = "test.event.1", int32_t partition = 0,
               int64_t available_at = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    Delivery d;
    d.topic = std::move(topic);
    d.partition = partition;
    d.handle = ++next_handle_;
    d.position = std::to_string(d.handle);
    d.body = std::move(body);
    ready_.push_back({available_at, std::move(d)});
    return next_handle_;
  }

  std::string name() const override { return "fake://"; }

  Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      polls_++;
      if (poll_failures_ > 0) {
        poll_failures_--;
        return Unavailable("fake bus down");
      }
      std::vector<Delivery> out;
      int64_t now = env_->NowMicros();
      // A partition with a delivery handed back and not due yet delivers nothing after it.
      std::set<std::pair<std::string, int32_t>> held_up;
      for (auto it = ready_.begin(); it != ready_.end() && out.size() < max;) {
        const std::pair<std::string, int32_t> tp{it->second.topic, it->second.partition};
        bool paused = paused_.count(tp) > 0 || held_up.count(tp) > 0;
        if (!paused && it->first > now && handed_back_.count(it->second.handle) > 0) {
          held_up.insert(tp);
        }
        if (!paused && it->first <= now) {
          handed_back_.erase(it->second.handle);
          delivered_at_[it->second.handle] = now;
          out.push_back(std::move(it->second));
          it = ready_.erase(it);
        } else {
          ++it;
        }
      }
      if (!out.empty()) return out;
    }
    if (timeout_ms > 0) {
      env_->SleepMicros(timeout_ms * 1000);
      // Keeps an idle consumer on SimEnv from spinning a core.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return std::vector<Delivery>{};
  }

  Status Ack(const Delivery& d) override {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.push_back({"ack", d.handle, d.topic, d.partition, env_->NowMicros(), ""});
    acked_.insert(d.handle);
    return Status::Ok();
  }
  Status DeadLetter(const Delivery& d, std::string_view error) override {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.push_back({"dlq", d.handle, d.topic, d.partition, env_->NowMicros(), std::string(error)});
    return Status::Ok();
  }
  // Delivered again from `hand_back_delay_micros` on (a Kafka client refetching after a seek),
  // and nothing of its partition after it before it (a seek moves the partition's position).
  Status HandBack(const Delivery& d) override {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.push_back({"hand_back", d.handle, d.topic, d.partition, env_->NowMicros(), ""});
    Delivery again = d;
    again.redelivered = true;
    handed_back_.insert(d.handle);
    ready_.insert(ready_.begin(), {env_->NowMicros() + hand_back_delay_micros_, std::move(again)});
    return Status::Ok();
  }
  void set_hand_back_delay_micros(int64_t micros) {
    std::lock_guard<std::mutex> lock(mu_);
    hand_back_delay_micros_ = micros;
  }

  Status Pause(const std::string& topic, int32_t partition) override {
    std::lock_guard<std::mutex> lock(mu_);
    paused_.insert({topic, partition});
    ops_.push_back({"pause", 0, topic, partition, env_->NowMicros(), ""});
    return Status::Ok();
  }
  Status Resume(const std::string& topic, int32_t partition) override {
    std::lock_guard<std::mutex> lock(mu_);
    paused_.erase({topic, partition});
    ops_.push_back({"resume", 0, topic, partition, env_->NowMicros(), ""});
    return Status::Ok();
  }
  Result<int64_t> Lag() override {
    std::lock_guard<std::mutex> lock(mu_);
    return lag_;
  }
  std::vector<std::string> Assignment() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return assignment_;
  }
  // What Assignment() reports from now on (a rebalance took partitions away or gave them).
  void set_assignment(std::vector<std::string> assignment) {
    std::lock_guard<std::mutex> lock(mu_);
    assignment_ = std::move(assignment);
  }

  void set_lag(int64_t lag) {
    std::lock_guard<std::mutex> lock(mu_);
    lag_ = lag;
  }
  void FailPolls(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    poll_failures_ = n;
  }
  size_t acked_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.size();
  }
  bool acked(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.count(handle) > 0;
  }
  // How many Ack calls (an event acked twice would show here).
  size_t ack_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(ops_.begin(), ops_.end(), [](const Op& o) { return o.what == "ack"; });
  }
  std::vector<Op> ops() {
    std::lock_guard<std::mutex> lock(mu_);
    return ops_;
  }
  std::vector<Op> ops(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Op> out;
    for (const Op& o : ops_) {
      if (o.what == what) out.push_back(o);
    }
    return out;
  }
  // Deliveries handed to the consumer so far.
  size_t delivered_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return delivered_at_.size();
  }
  // When the delivery was handed to the consumer; -1 if not yet.
  int64_t delivered_at(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = delivered_at_.find(handle);
    return it == delivered_at_.end() ? -1 : it->second;
  }

 private:
  Env* env_;
  mutable std::mutex mu_;
  std::vector<std::string> assignment_{"test.event.1[0]", "test.event.1[1]"};
  uint64_t next_handle_ = 0;
  std::vector<std::pair<int64_t, Delivery>> ready_;
  std::set<std::pair<std::string, int32_t>> paused_;
  int64_t hand_back_delay_micros_ = 50'000;
  std::set<uint64_t> handed_back_;  // handles handed back, not delivered again yet
  std::set<uint64_t> acked_;
  std::map<uint64_t, int64_t> delivered_at_;
  std::vector<Op> ops_;
  int64_t lag_ = 0;
  int poll_failures_ = 0;
  uint64_t polls_ = 0;
};

// ProcessingLocks in memory, with TTLs on `env`.
class FakeLocks : public ProcessingLocks {
 public:
  explicit FakeLocks(Env* env) : env_(env) {}
  Result<bool> TryAcquire(const std::string& id, const std::string& token,
                          int64_t ttl_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    acquires_[id]++;
    int64_t now = env_->NowMicros();
    auto it = keys_.find(id);
    if (it != keys_.end() && it->second.second > now && it->second.first != token) return false;
    keys_[id] = {token, now + ttl_ms * 1000};
    return true;
  }
  Status Release(const std::string& id, const std::string& token) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = keys_.find(id);
    if (it != keys_.end() && it->second.first == token) keys_.erase(it);
    return Status::Ok();
  }
  Result<bool> Renew(const std::string& id, const std::string& token, int64_t ttl_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = keys_.find(id);
    int64_t now = env_->NowMicros();
    if (it == keys_.end() || it->second.first != token || it->second.second <= now) return false;
    it->second.second = now + ttl_ms * 1000;
    return true;
  }
  // Holds `id` for someone else, as another consumer would.
  void HoldForOther(const std::string& id, int64_t ttl_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    keys_[id] = {"other-consumer", env_->NowMicros() + ttl_ms * 1000};
  }
  void ReleaseOther(const std::string& id) { (void)Release(id, "other-consumer"); }
  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_.size();
  }
  int acquires(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return acquires_[id];
  }

 private:
  Env* env_;
  std::mutex mu_;
  std::map<std::string, std::pair<std::string, int64_t>> keys_;
  std::map<std::string, int> acquires_;
};

}  // namespace gapless::testing_util

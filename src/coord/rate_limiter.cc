#include "coord/rate_limiter.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace gapless {

RateLimiter::RateLimiter(RedisConn* conn, std::string key, RateLimiterOptions options)
    : conn_(conn),
      key_(std::move(key)),
      options_(options),
      env_(options.env != nullptr ? options.env : Env::Default()),
      effective_(static_cast<double>(std::max<int64_t>(options.limit, 1))) {
  // Members must be unique fleet-wide (the script treats a member already in the window as a
  // retried admission): a random 64-bit value and the pid, plus a per-limiter sequence number.
  uint64_t hi = env_->Uniform(uint64_t{1} << 32);
  uint64_t lo = env_->Uniform(uint64_t{1} << 32);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64 ".%ld.", (hi << 32) | lo,
                static_cast<long>(::getpid()));
  member_prefix_ = buf;
  last_adjust_micros_ = env_->NowMicros();
}

void RateLimiter::RecoverLocked(int64_t now) {
  double limit = static_cast<double>(options_.limit);
  if (effective_ < limit && now > last_adjust_micros_) {
    double windows = static_cast<double>(now - last_adjust_micros_) /
                     static_cast<double>(options_.window_ms * 1000);
    effective_ = std::min(limit, effective_ + windows * options_.recovery_per_window * limit);
  }
  last_adjust_micros_ = now;
}

Status RateLimiter::Acquire() {
  if (options_.limit < 1 || options_.window_ms < 1) {
    return FailedPrecondition("rate limiter " + key_ + ": limit and window must be >= 1");
  }
  const std::string window = std::to_string(options_.window_ms);
  std::string member;
  {
    std::lock_guard<std::mutex> lock(mu_);
    member = member_prefix_ + std::to_string(++sequence_);
  }
  const RedisScript& script = LoadScript("rate_limit.lua");
  while (true) {
    int64_t wait_ms = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      RecoverLocked(env_->NowMicros());
      int64_t limit = std::max<int64_t>(1, static_cast<int64_t>(effective_));
      // Idempotent: the same member is admitted at most once per window (see rate_limit.lua).
      auto reply = conn_->Eval(script, {key_}, {std::to_string(limit), window, member},
                               /*idempotent=*/true);
      if (!reply.ok()) return reply.status().WithContext("rate limiter " + key_);
      if (reply->type != RedisReply::Type::kInteger) {
        return Internal("rate limiter " + key_ + ": rate_limit.lua returned a non-integer");
      }
      wait_ms = reply->integer;
      if (wait_ms <= 0) {
        ++admitted_;
        return Status::Ok();
      }
      ++refusals_;
    }
    int64_t sleep = wait_ms * 1000;
    if (options_.max_jitter_micros > 0) {
      sleep += static_cast<int64_t>(
          env_->Uniform(static_cast<uint64_t>(options_.max_jitter_micros) + 1));
    }
    env_->SleepMicros(sleep);
    std::lock_guard<std::mutex> lock(mu_);
    waited_micros_ += sleep;
  }
}

void RateLimiter::SlowDown() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = env_->NowMicros();
  RecoverLocked(now);
  if (decreased_ && now - last_decrease_micros_ < options_.window_ms * 1000) return;
  effective_ = std::max(1.0, effective_ / 2);
  decreased_ = true;
  last_decrease_micros_ = now;
}

int64_t RateLimiter::effective_limit() {
  std::lock_guard<std::mutex> lock(mu_);
  RecoverLocked(env_->NowMicros());
  return std::max<int64_t>(1, static_cast<int64_t>(effective_));
}

int64_t RateLimiter::admitted() {
  std::lock_guard<std::mutex> lock(mu_);
  return admitted_;
}

int64_t RateLimiter::refusals() {
  std::lock_guard<std::mutex> lock(mu_);
  return refusals_;
}

int64_t RateLimiter::waited_micros() {
  std::lock_guard<std::mutex> lock(mu_);
  return waited_micros_;
}

}  // namespace gapless

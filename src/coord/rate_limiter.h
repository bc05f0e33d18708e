// RateLimiter: the fleet-wide request budget of one RPC endpoint, a sliding-window log in Redis
// (seed 002, lua/rate_limit.lua). Every process calling the endpoint shares one sorted set, so
// "at most `limit` requests in any `window`" holds across the whole fleet, with time taken from
// Redis TIME only (the callers' clocks do not matter).
//
// Acquire() waits rather than fails: when the window is full it sleeps (Env::SleepMicros) for the
// wait the script returns plus a little jitter, then asks again.
//
// Adaptive slow-down (AIMD, like TCP's congestion window): SlowDown(), called on an HTTP 429,
// halves this limiter's effective limit (never below 1). Several 429s from requests that were in
// flight together count once: a further SlowDown within one window of the last decrease is
// ignored. The effective limit then recovers additively, `recovery_per_window` x limit per window
// of time since the decrease, up to the configured limit (by default half the limit comes back in
// 4 windows). Recovery is by time rather than by count of successes so that it does not depend on
// how busy the process is. The effective limit is what this process passes to the script, so a
// slowed process backs off while the others keep their budget; all processes that see 429s slow
// down together.
//
// Thread-safety: thread-safe. A mutex guards the connection (only for the duration of one EVAL,
// never during a sleep) and the adaptive state, so one limiter per endpoint can be shared by all
// the worker threads of a process, and a 429 seen by one thread slows the whole process. The
// RedisConn given must not be used by anything else concurrently.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "coord/redis.h"
#include "core/env.h"
#include "core/status.h"

namespace gapless {

struct RateLimiterOptions {
  int64_t limit = 0;         // admissions per window, fleet-wide (>= 1)
  int64_t window_ms = 1000;  // window length (>= 1)
  // Fraction of `limit` restored per window of time after a SlowDown (additive increase).
  double recovery_per_window = 0.125;
  // Extra sleep in [0, max_jitter_micros] after each refusal, so that waiters woken by the same
  // expiring admission do not all ask again at the same instant.
  int64_t max_jitter_micros = 2'000;
  Env* env = nullptr;  // nullptr = Env::Default()
};

class RateLimiter {
 public:
  // `conn` is borrowed and must outlive the limiter; `key` is the endpoint's sorted set
  // (Keys::rate_limit(endpoint)).
  RateLimiter(RedisConn* conn, std::string key, RateLimiterOptions options);

  // Blocks until the fleet-wide window admits one more request, then returns Ok. Fails only when
  // Redis does: Unavailable when it cannot be reached (after RedisConn's own retries; the call is
  // idempotent, a retried admission is not counted twice), Internal for a script error (bad
  // options, the key holding another type). FailedPrecondition for invalid options.
  Status Acquire();

  // Reports an HTTP 429 from the endpoint: multiplicative decrease of the effective limit, at most
  // once per window (see the file comment).
  void SlowDown();

  // The limit this process currently asks for (<= options.limit, >= 1).
  int64_t effective_limit();
  const std::string& key() const { return key_; }

  // Counters, for status reports and tests.
  int64_t admitted();
  int64_t refusals();       // times Acquire had to wait
  int64_t waited_micros();  // total time slept waiting

 private:
  // Additive increase for the time elapsed since the last adjustment. Requires mu_.
  void RecoverLocked(int64_t now);

  RedisConn* conn_;
  std::string key_;
  RateLimiterOptions options_;
  Env* env_;
  std::string member_prefix_;

  std::mutex mu_;
  double effective_;
  int64_t last_adjust_micros_ = 0;
  bool decreased_ = false;
  int64_t last_decrease_micros_ = 0;
  uint64_t sequence_ = 0;
  int64_t admitted_ = 0;
  int64_t refusals_ = 0;
  int64_t waited_micros_ = 0;
};

}  // namespace gapless

// Env: the one seam between gapless and the outside world's time and randomness.
//
// Code that sleeps, reads a clock or draws random numbers takes an Env* (never a global), so unit
// tests can run it on SimEnv: virtual time that advances only when someone sleeps or the test
// advances it, and a seeded RNG, which makes backoff, lease expiry and timeouts deterministic.
// Env::Default() is the real one. Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>

namespace gapless {

class Env {
 public:
  virtual ~Env() = default;

  // Monotonic microseconds (arbitrary epoch): for durations and deadlines only.
  virtual int64_t NowMicros() = 0;
  // Wall-clock unix microseconds: for display and log lines only, never for safety.
  virtual int64_t WallMicros() = 0;
  virtual void SleepMicros(int64_t micros) = 0;
  // Uniform in [0, bound) (bound > 0).
  virtual uint64_t Uniform(uint64_t bound) = 0;

  // The process-wide real Env. Never destroyed.
  static Env* Default();
};

// SimEnv: virtual time and a seeded RNG. SleepMicros advances the virtual clock at once and
// returns (the sleeping thread "wakes" immediately at the later time), so a test of a retry
// loop with 30 s of backoff finishes in microseconds and observes exactly the delays chosen.
class SimEnv : public Env {
 public:
  explicit SimEnv(uint64_t seed = 1, int64_t start_micros = 1'000'000'000)
      : now_(start_micros), rng_(seed) {}

  int64_t NowMicros() override;
  int64_t WallMicros() override;
  void SleepMicros(int64_t micros) override;
  uint64_t Uniform(uint64_t bound) override;

  void Advance(int64_t micros);
  // Total virtual time slept through SleepMicros.
  int64_t slept_micros();

 private:
  std::mutex mu_;
  int64_t now_;
  int64_t slept_ = 0;
  std::mt19937_64 rng_;
};

// Exponential backoff with full jitter: a delay in [base*2^attempt / 2, base*2^attempt], capped.
int64_t BackoffMicros(Env* env, int attempt, int64_t base_micros, int64_t cap_micros);

// This machine's host name (gethostname), or "unknown". For registry entries and logs.
std::string HostName();

}  // namespace gapless

#include "core/env.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

TEST(SimEnv, SleepAdvancesVirtualTimeOnly) {
  SimEnv env;
  int64_t start = env.NowMicros();
  env.SleepMicros(30'000'000);
  EXPECT_EQ(env.NowMicros() - start, 30'000'000);
  EXPECT_EQ(env.slept_micros(), 30'000'000);
}

TEST(SimEnv, SameSeedSameSequence) {
  SimEnv a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 16; ++i) {
    uint64_t x = a.Uniform(1'000'000);
    EXPECT_EQ(x, b.Uniform(1'000'000));
    differs |= x != c.Uniform(1'000'000);
  }
  EXPECT_TRUE(differs);
}

TEST(Backoff, GrowsExponentiallyWithinJitterAndCap) {
  SimEnv env(7);
  for (int attempt = 0; attempt < 12; ++attempt) {
    int64_t ceiling = std::min<int64_t>(30'000'000, 1'000'000LL << attempt);
    int64_t d = BackoffMicros(&env, attempt, 1'000'000, 30'000'000);
    EXPECT_GE(d, ceiling / 2) << attempt;
    EXPECT_LE(d, ceiling) << attempt;
  }
}

}  // namespace
}  // namespace gapless

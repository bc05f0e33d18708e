// The key-count growth rule and the prefix grouping of the memory watch (coord/key_watch.h).
#include "coord/key_watch.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

constexpr int64_t kMinute = 60'000;

// Samples one per `step_ms`, oldest first, with these key counts.
std::vector<KeyCountSample> Samples(std::vector<int64_t> counts, int64_t step_ms = 2 * kMinute) {
  std::vector<KeyCountSample> out;
  int64_t t = 1'700'000'000'000;
  for (int64_t n : counts) {
    out.push_back({t, n});
    t += step_ms;
  }
  return out;
}

TEST(KeyGrowthTest, SixRisingSamplesOverTenMinutesAreGrowth) {
  KeyGrowth g = DetectKeyGrowth(Samples({100, 110, 125, 130, 180, 200}));  // 10 min
  EXPECT_TRUE(g.growing);
  EXPECT_EQ(g.rising_samples, 6u);
  EXPECT_EQ(g.span_ms, 10 * kMinute);
  EXPECT_EQ(g.from_keys, 100);
  EXPECT_EQ(g.to_keys, 200);
}

TEST(KeyGrowthTest, TooShortOrTooFewIsNotGrowthYet) {
  EXPECT_FALSE(DetectKeyGrowth(Samples({100, 110, 125, 130, 180, 200}, kMinute)).growing)
      << "6 samples over 5 min";
  EXPECT_FALSE(DetectKeyGrowth(Samples({100, 110, 125, 130, 180}, 5 * kMinute)).growing)
      << "5 samples over 20 min";
  EXPECT_FALSE(DetectKeyGrowth({}).growing);
  EXPECT_FALSE(DetectKeyGrowth(Samples({100})).growing);
}

// A steady fleet: the count moves both ways (leases, heartbeats and markers come and go), or
// stays put. Neither is growth, however long the history.
TEST(KeyGrowthTest, ACountThatFallsOrStaysIsNotGrowth) {
  KeyGrowth g = DetectKeyGrowth(Samples({100, 101, 102, 103, 99, 100, 101, 102, 103}));
  EXPECT_FALSE(g.growing);
  EXPECT_EQ(g.rising_samples, 5u) << "the run starts after the step down";
  EXPECT_FALSE(DetectKeyGrowth(Samples(std::vector<int64_t>(30, 500))).growing);
  EXPECT_FALSE(DetectKeyGrowth(Samples({100, 110, 120, 120, 130, 140, 150})).growing)
      << "strictly rising: a flat step ends the run";
}

TEST(KeyGrowthTest, OnlyTheRunEndingAtTheNewestSampleCounts) {
  // Rose for long, then fell: the leak was fixed (or the keys expired).
  EXPECT_FALSE(DetectKeyGrowth(Samples({1, 2, 3, 4, 5, 6, 7, 8, 2})).growing);
  // Fell, then rose at every one of the last 7 samples over 12 minutes.
  KeyGrowth g = DetectKeyGrowth(Samples({500, 100, 110, 120, 130, 140, 150, 160}));
  EXPECT_TRUE(g.growing);
  EXPECT_EQ(g.rising_samples, 7u);
  EXPECT_EQ(g.from_keys, 100);
}

TEST(KeyGrowthTest, AClockThatGoesBackEndsTheRun) {
  std::vector<KeyCountSample> s = Samples({100, 110, 120, 130, 140, 150, 160, 170});
  s[4].time_ms = s[3].time_ms - 1;  // after a failover to a server whose clock is behind
  EXPECT_FALSE(DetectKeyGrowth(s).growing);
}

TEST(KeyGrowthTest, TheRuleIsConfigurable) {
  KeyGrowthRule rule{3, 3 * kMinute};
  EXPECT_TRUE(DetectKeyGrowth(Samples({1, 2, 3}, 2 * kMinute), rule).growing);
}

TEST(KeyCountSamplesTest, ParsesNewestFirstIntoOldestFirstAndNamesABadEntry) {
  auto s = ParseKeyCountSamples({"3000:30", "2000:20", "1000:10"});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].time_ms, 1000);
  EXPECT_EQ((*s)[0].keys, 10);
  EXPECT_EQ((*s)[2].keys, 30);
  auto bad = ParseKeyCountSamples({"3000:30", "2000:x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidData);
  EXPECT_NE(bad.status().message().find("2000:x"), std::string::npos);
}

TEST(KeyPrefixTest, GroupsGaplessKeysByNameAndOthersByFirstPart) {
  EXPECT_EQ(KeyPrefix("gapless:{chain-1-db-ab}:heartbeat:host:12:3"),
            "gapless:{chain-1-db-ab}:heartbeat:*");
  EXPECT_EQ(KeyPrefix("gapless:{chain-1-db-ab}:frontier"), "gapless:{chain-1-db-ab}:frontier");
  EXPECT_EQ(KeyPrefix("gapless:{chain-1}:rangedone:100-199"), "gapless:{chain-1}:rangedone:*");
  EXPECT_EQ(KeyPrefix("bull:emails:42"), "bull:*");
  EXPECT_EQ(KeyPrefix("session"), "(no prefix)");
}

}  // namespace
}  // namespace gapless

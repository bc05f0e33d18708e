#include "node/ranges.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

using V = std::vector<BlockRange>;

TEST(PendingRanges, AlignsToRangeSizeAndClipsToRequest) {
  EXPECT_EQ(PendingRanges(5, 24, 10, {}), (V{{5, 9}, {10, 19}, {20, 24}}));
  EXPECT_EQ(PendingRanges(0, 9, 10, {}), (V{{0, 9}}));
  EXPECT_EQ(PendingRanges(7, 7, 10, {}), (V{{7, 7}}));
}

TEST(PendingRanges, SkipsCommittedRangesAndSplitsPartialOnes) {
  // [10,19] done; [20,24] done inside range [20,29].
  EXPECT_EQ(PendingRanges(0, 29, 10, {{20, 24}, {10, 19}}), (V{{0, 9}, {25, 29}}));
  // Everything done.
  EXPECT_EQ(PendingRanges(0, 29, 10, {{0, 29}}), V{});
  // Overlapping and out-of-request records.
  EXPECT_EQ(PendingRanges(10, 39, 10, {{0, 12}, {5, 15}, {30, 100}}), (V{{16, 19}, {20, 29}}));
}

TEST(PendingRanges, EmptyRequestGivesNothing) {
  EXPECT_EQ(PendingRanges(10, 9, 10, {}), V{});
  EXPECT_EQ(PendingRanges(0, 10, 0, {}), V{});
}

}  // namespace
}  // namespace gapless

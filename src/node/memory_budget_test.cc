#include "node/memory_budget.h"

#include <gtest/gtest.h>

#include <limits>

namespace gapless {
namespace {

constexpr uint64_t kMiB = MemoryBudget::kMiB;

// What the model says a thread holds with parts of `part` blocks and batches of `batch`.
double ThreadBytes(const MemoryBudget& b, uint64_t part, uint32_t batch) {
  double json = static_cast<double>(b.json_bytes_per_block());
  return MemoryBudget::kDecodedPerJsonByte * json * static_cast<double>(part) +
         MemoryBudget::kInFlightPerJsonByte * json * batch;
}

TEST(MemoryBudget, WithoutABudgetEverythingIsAsAsked) {
  MemoryBudget none(0, 16);
  none.Observe(10, 100 * kMiB);
  EXPECT_EQ(none.BatchBlocks(50), 50u);
  EXPECT_EQ(none.PartBlocks(500, 50), 500u);
}

TEST(MemoryBudget, TheDefaultsFitTheDefaultBudgetUnchanged) {
  MemoryBudget budget(256 * kMiB, 4);
  budget.Observe(10, 10 * 420 * 1024);  // mainnet block 17000000: ~420 KB of JSON
  EXPECT_EQ(budget.BatchBlocks(10), 10u);
  EXPECT_EQ(budget.PartBlocks(50, 10), 50u);
}

TEST(MemoryBudget, TheLargestFlagsAreCutToTheThreadsShare) {
  MemoryBudget budget(256 * kMiB, 16);
  budget.Observe(50, 50 * 420 * 1024);
  uint32_t batch = budget.BatchBlocks(50);
  uint64_t part = budget.PartBlocks(500, batch);
  EXPECT_LT(batch, 50u);
  EXPECT_GE(batch, 1u);
  EXPECT_LT(part, 500u);
  EXPECT_GE(part, batch);
  EXPECT_LE(ThreadBytes(budget, part, batch), static_cast<double>(budget.thread_share_bytes()));
  // All threads at their share, plus the fixed part, stay within the budget.
  EXPECT_LE(16 * (ThreadBytes(budget, part, batch) + MemoryBudget::kThreadBytes) +
                MemoryBudget::kBaseBytes,
            256.0 * kMiB);
  // A part never exceeds what is left of the range.
  EXPECT_EQ(budget.PartBlocks(3, batch), std::min<uint64_t>(3, part));
}

// A fleet worker that prefetches holds two decoded parts (the one being written and the next):
// both fit in its share together, with the batch in flight once.
TEST(MemoryBudget, TwoHeldPartsFitTheShareTogether) {
  MemoryBudget budget(256 * kMiB, 16);
  budget.Observe(50, 50 * 420 * 1024);
  uint32_t batch = budget.BatchBlocks(50);
  uint64_t one = budget.PartBlocks(500, batch);
  uint64_t two = budget.PartBlocks(500, batch, 2);
  EXPECT_LT(two, one);
  EXPECT_GE(two, 1u);
  double json = static_cast<double>(budget.json_bytes_per_block());
  EXPECT_LE(2 * MemoryBudget::kDecodedPerJsonByte * json * static_cast<double>(two) +
                MemoryBudget::kInFlightPerJsonByte * json * batch,
            static_cast<double>(budget.thread_share_bytes()));
  MemoryBudget none(0, 16);
  EXPECT_EQ(none.PartBlocks(500, 50, 2), 500u);  // no budget: the range whole, prefetch or not
}

TEST(MemoryBudget, LargerBlocksShrinkThePartsAtOnceSmallerOnesGrowThemSlowly) {
  MemoryBudget budget(256 * kMiB, 16);
  budget.Observe(10, 10 * 100 * 1024);  // the first observation replaces the initial guess
  EXPECT_EQ(budget.json_bytes_per_block(), 100u * 1024);
  uint64_t small_part = budget.PartBlocks(500, 1);
  budget.Observe(1, 2 * kMiB);  // one huge block
  EXPECT_EQ(budget.json_bytes_per_block(), 2 * kMiB);
  uint64_t huge_part = budget.PartBlocks(500, 1);
  EXPECT_LT(huge_part, small_part);
  budget.Observe(10, 10 * 100 * 1024);
  EXPECT_GT(budget.json_bytes_per_block(), 100u * 1024 * 10);  // down by an eighth of the gap
  EXPECT_LT(budget.json_bytes_per_block(), 2 * kMiB);
  for (int i = 0; i < 100; ++i) budget.Observe(10, 10 * 100 * 1024);
  EXPECT_LT(budget.json_bytes_per_block(), 101u * 1024);
}

TEST(MemoryBudget, ABudgetBelowTheFixedNeedsFetchesOneBlockAtATime) {
  MemoryBudget tiny(MemoryBudget::kBaseBytes, 8);
  EXPECT_EQ(tiny.thread_share_bytes(), 0u);
  EXPECT_EQ(tiny.BatchBlocks(10), 1u);
  EXPECT_EQ(tiny.PartBlocks(50, 1), 1u);
}

TEST(MemoryBudget, AStreamConsumersSharesAddUpToItsShare) {
  MemoryBudget budget(256 * kMiB, 5);
  budget.Observe(20, 20 * 420 * 1024);
  const double json = static_cast<double>(budget.json_bytes_per_block());
  const uint32_t batch = budget.StreamBatchBlocks(100);
  const uint64_t part = budget.StreamPartBlocks(500);
  EXPECT_GE(batch, 1u);
  EXPECT_LT(batch, 100u);
  EXPECT_GE(part, 1u);
  EXPECT_LT(part, 500u);
  const double held = 2.0 * static_cast<double>(budget.StreamQueueBytes()) +
                      static_cast<double>(budget.StreamHeldBytes()) +
                      MemoryBudget::kInFlightPerJsonByte * json * batch +
                      MemoryBudget::kDecodedPerJsonByte * json * static_cast<double>(part);
  EXPECT_LE(held, static_cast<double>(budget.thread_share_bytes()));
  EXPECT_GT(held, 0.8 * static_cast<double>(budget.thread_share_bytes()));
  EXPECT_EQ(budget.StreamPartBlocks(3), std::min<uint64_t>(3, part));
}

TEST(MemoryBudget, AStreamConsumerWithoutABudgetOrBelowItsNeeds) {
  MemoryBudget none(0, 4);
  EXPECT_EQ(none.StreamQueueBytes(), 0u) << "librdkafka's own defaults";
  EXPECT_EQ(none.StreamHeldBytes(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(none.StreamBatchBlocks(100), 100u);
  EXPECT_EQ(none.StreamPartBlocks(500), 500u);
  MemoryBudget tiny(MemoryBudget::kBaseBytes, 4);
  EXPECT_EQ(tiny.StreamQueueBytes(), kMiB) << "the floor librdkafka accepts";
  EXPECT_EQ(tiny.StreamHeldBytes(), 0u) << "every message written as it comes";
  EXPECT_EQ(tiny.StreamBatchBlocks(100), 1u);
  EXPECT_EQ(tiny.StreamPartBlocks(500), 1u);
}

}  // namespace
}  // namespace gapless

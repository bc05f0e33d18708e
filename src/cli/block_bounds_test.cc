#include "cli/block_bounds.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

TEST(BlockBounds, NumbersAreTakenTagsAreLeftToTheNode) {
  auto n = ParseBlockBound("17000000", "--from");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->number, 17000000u);
  for (const char* tag : {"latest", "safe", "finalized", "0x10"}) {
    auto t = ParseBlockBound(tag, "--to");
    ASSERT_TRUE(t.ok()) << tag;
    EXPECT_FALSE(t->number.has_value()) << tag;
    EXPECT_EQ(t->text, tag);
  }
}

TEST(BlockBounds, GarbageAndOverflowNameTheFlag) {
  for (const char* bad : {"", "abc", "-1", "12a", "99999999999999999999999"}) {
    auto b = ParseBlockBound(bad, "--from");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), Code::kFailedPrecondition);
    EXPECT_EQ(b.status().message(),
              std::string("--from ") + bad + ": expected a block number or latest|safe|finalized");
  }
}

TEST(BlockBounds, UpperBoundIsANumberOrMax) {
  auto max = ParseUpperBound("max");
  ASSERT_TRUE(max.ok());
  EXPECT_FALSE(max->has_value());
  auto n = ParseUpperBound("42");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(**n, 42u);
  auto tag = ParseUpperBound("latest");  // no node to resolve it
  ASSERT_FALSE(tag.ok());
  EXPECT_EQ(tag.status().message(), "--to latest: expected a block number");
}

}  // namespace
}  // namespace gapless

// Failpoints as a test arms them: the armed set is read from GAPLESS_FAILPOINTS at the first
// query, so this binary's only query of them is this test.
#include "core/failpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace gapless {
namespace {

TEST(FailpointTest, APointFiresOnceAtTheNthTimeItIsReached) {
  ASSERT_EQ(setenv("GAPLESS_FAILPOINTS", "first,third@3,bad@x,,zero@0", 1), 0);
  EXPECT_FALSE(FailpointFiresOnce("unarmed"));
  EXPECT_TRUE(FailpointFiresOnce("first"));
  EXPECT_FALSE(FailpointFiresOnce("first"));  // once
  EXPECT_FALSE(FailpointFiresOnce("third"));
  EXPECT_FALSE(FailpointFiresOnce("third"));
  EXPECT_TRUE(FailpointFiresOnce("third"));
  EXPECT_FALSE(FailpointFiresOnce("third"));
  // A malformed count arms the point for its first time, as a bare name does.
  EXPECT_TRUE(FailpointFiresOnce("bad"));
  EXPECT_TRUE(FailpointFiresOnce("zero"));
  EXPECT_FALSE(FailpointFiresOnce("zero"));
}

}  // namespace
}  // namespace gapless

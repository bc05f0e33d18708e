#include "core/status.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

TEST(StatusTest, ReasonSurvivesContextAndIsNeverSetOnOk) {
  Status st = Aborted("stale token 3").WithReason("stale-fence-token");
  Status wrapped = st.WithContext("write 100-109").WithContext("task 100-109");
  EXPECT_EQ(wrapped.code(), Code::kAborted);
  EXPECT_EQ(wrapped.reason(), "stale-fence-token");
  EXPECT_EQ(wrapped.message(), "task 100-109: write 100-109: stale token 3");
  // The reason is for code, not for people: ToString does not show it.
  EXPECT_EQ(wrapped.ToString(), "Aborted: task 100-109: write 100-109: stale token 3");

  EXPECT_EQ(Aborted("serialization failure").reason(), "");
  EXPECT_EQ(Status::Ok().WithReason("x").reason(), "");
  EXPECT_TRUE(Status::Ok().WithReason("x").ok());

  Result<int> r(Unavailable("down").WithReason("r"));
  EXPECT_EQ(r.status().reason(), "r");
}

}  // namespace
}  // namespace gapless

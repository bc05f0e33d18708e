// The `index` frontier duty (node/duties.h FrontierDuty) against a real PostgreSQL: it moves
// over what is committed, and each step reads from its own frontier on, not from the job's start
// (issue 35: the rows grew with every part, and each step read them all).
#include <gtest/gtest.h>

#include "node/duties.h"
#include "store/state.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

class FrontierDutyTest : public PgTest {
 protected:
  void Write(uint64_t from, uint64_t to) {
    Status st = WriteRange(conn(), SyntheticRange(from, to, SmallSyntheticOptions()));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
};

TEST_F(FrontierDutyTest, AStepReadsFromTheDutysFrontierOn) {
  auto pool = PgPool::Open(db().url(), 1);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  FrontierDuty duty(pool->get(), 0, 39);
  Write(0, 9);
  Write(10, 19);
  ASSERT_TRUE(duty.Step(0).ok());
  EXPECT_EQ(duty.frontier(), 20u);
  // Rows below the frontier are not read again (taken away by hand here to show it).
  ASSERT_TRUE(conn().Exec("DELETE FROM indexed_ranges WHERE to_block < 20").ok());
  Write(20, 29);
  Status st = duty.Step(0);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(duty.frontier(), 30u);
  EXPECT_EQ(LoadFrontier(conn()).value(), std::optional<uint64_t>(30));
  Write(31, 39);  // 30 missing: no move
  ASSERT_TRUE(duty.Step(0).ok());
  EXPECT_EQ(duty.frontier(), 30u);
  Write(30, 30);
  ASSERT_TRUE(duty.Step(0).ok());
  EXPECT_EQ(duty.frontier(), 40u);
  EXPECT_TRUE(duty.done());
}

}  // namespace
}  // namespace gapless

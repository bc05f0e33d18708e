#include <gtest/gtest.h>

#include "store/state.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

class StateTest : public PgTest {
 protected:
  void Write(uint64_t from, uint64_t to, std::optional<int64_t> token = std::nullopt) {
    Status st = WriteRange(conn(), SyntheticRange(from, to,
                                                  {.transactions_per_block = 2,
                                                   .logs_per_block = 2,
                                                   .token_transfers_per_block = 1,
                                                   .withdrawals_per_block = 0},
                                                  token));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
};

TEST_F(StateTest, MaxFenceTokenIsTheFloorForANewCounter) {
  EXPECT_EQ(MaxFenceToken(conn()).value(), 0);
  Write(0, 9, 17);
  Write(10, 19, 42);
  Write(20, 29);  // unfenced
  EXPECT_EQ(MaxFenceToken(conn()).value(), 42);
}

TEST_F(StateTest, FrontierNeverRunsAheadOfCommittedRows) {
  Write(100, 109);
  Write(120, 129);  // 110..119 missing
  EXPECT_EQ(PersistFrontier(conn(), 100, 110).value(), 110u);
  auto ahead = PersistFrontier(conn(), 100, 130);
  ASSERT_FALSE(ahead.ok());
  EXPECT_EQ(ahead.status().code(), Code::kDataLoss);
  EXPECT_NE(ahead.status().message().find("block 110"), std::string::npos)
      << ahead.status().ToString();
  EXPECT_EQ(LoadFrontier(conn()).value(), std::optional<uint64_t>(110));

  Write(110, 119);
  EXPECT_EQ(PersistFrontier(conn(), 100, 130).value(), 130u);
}

TEST_F(StateTest, FrontierNeverDecreases) {
  EXPECT_EQ(LoadFrontier(conn()).value(), std::nullopt);
  Write(0, 49);
  EXPECT_EQ(PersistFrontier(conn(), 0, 50).value(), 50u);
  EXPECT_EQ(PersistFrontier(conn(), 0, 20).value(), 50u);  // a late, lower report is ignored
  EXPECT_EQ(LoadFrontier(conn()).value(), std::optional<uint64_t>(50));
}

TEST_F(StateTest, FrontierAtTheStartNeedsNoRows) {
  EXPECT_EQ(PersistFrontier(conn(), 7, 7).value(), 7u);
  EXPECT_FALSE(PersistFrontier(conn(), 7, 8).ok());
}

}  // namespace
}  // namespace gapless

#include <gtest/gtest.h>

#include "store/queries.h"
#include "store/state.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

class StateTest : public PgTest {
 protected:
  RangeWrite Range(uint64_t from, uint64_t to, std::optional<int64_t> token = std::nullopt,
                   std::string owner = "") {
    RangeWrite w = SyntheticRange(from, to,
                                  {.transactions_per_block = 2,
                                   .logs_per_block = 2,
                                   .token_transfers_per_block = 1,
                                   .withdrawals_per_block = 0},
                                  token);
    w.fence_owner = std::move(owner);
    return w;
  }
  void Write(uint64_t from, uint64_t to, std::optional<int64_t> token = std::nullopt,
             std::string owner = "") {
    Status st = WriteRange(conn(), Range(from, to, token, std::move(owner)));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // indexed_ranges as "from-to:token:owner" rows, ascending.
  std::string Rows() {
    auto res = conn().Query(
        "SELECT from_block || '-' || to_block || ':' || coalesce(fence_token::text, '')"
        " || ':' || coalesce(fence_owner, '') FROM indexed_ranges ORDER BY from_block");
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    std::string out;
    for (int i = 0; res.ok() && i < res->rows(); ++i) {
      out += (out.empty() ? "" : " ") + std::string(res->Get(i, 0));
    }
    return out;
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

// Issue 35: a frontier step read every row from the run's start. It reads from the recorded
// frontier on: rows below it (here taken away by hand) are not looked at again.
TEST_F(StateTest, AFrontierStepReadsOnlyFromTheRecordedFrontierOn) {
  Write(0, 9);
  Write(10, 19);
  EXPECT_EQ(PersistFrontier(conn(), 0, 20).value(), 20u);
  ASSERT_TRUE(conn().Exec("DELETE FROM indexed_ranges WHERE to_block < 20").ok());
  Write(20, 29);
  auto moved = PersistFrontier(conn(), 0, 30);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 30u);
  // Still never ahead of the data from there on.
  Write(31, 39);
  auto ahead = PersistFrontier(conn(), 0, 40);
  EXPECT_EQ(ahead.status().code(), Code::kDataLoss) << ahead.status().ToString();
  EXPECT_NE(ahead.status().message().find("block 30"), std::string::npos);
}

// Rows the frontier passed, once settled, are merged into one per run of adjacent rows with the
// highest token and its owner; rows at or above the frontier stay; what is committed and the
// counter's floor do not change. Young rows are left for a later step.
TEST_F(StateTest, CompactionMergesAdjacentCommittedRowsBelowTheFrontier) {
  for (uint64_t b = 0; b < 10; ++b)
    Write(b, b, 100 + static_cast<int64_t>(b), "w" + std::to_string(b));
  Write(10, 11, 50, "x");                                // above the frontier below: in flight
  EXPECT_EQ(PersistFrontier(conn(), 0, 5).value(), 5u);  // the default delay: nothing settled yet
  EXPECT_EQ(QueryCount(conn(), "SELECT count(*) FROM indexed_ranges"), 11);
  EXPECT_EQ(PersistFrontier(conn(), 0, 10, /*compact_after_seconds=*/0).value(), 10u);
  EXPECT_EQ(Rows(), "0-9:109:w9 10-11:50:x");
  EXPECT_EQ(MaxFenceToken(conn()).value(), 109);
  auto committed = CommittedRanges(conn(), 0, 100);
  ASSERT_TRUE(committed.ok());
  EXPECT_EQ(*committed, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 11}}));
  // The next step merges what it passed into the row before.
  Write(12, 14, 60, "y");
  EXPECT_EQ(PersistFrontier(conn(), 0, 15, 0).value(), 15u);
  EXPECT_EQ(Rows(), "0-14:109:w9");
  // Unfenced rows (`index`) merge too, keeping the highest token.
  Write(15, 19);
  Write(20, 24);
  EXPECT_EQ(PersistFrontier(conn(), 0, 25, 0).value(), 25u);
  EXPECT_EQ(Rows(), "0-24:109:w9");
}

// Rows holding different datasets (store/datasets.h) are not merged: the merged row would claim
// traces for blocks written without them, and a later `--traces` run would skip them.
// Rows below the frontier's base with a hole after them (an `index` of 0..4 into a database
// whose fleet runs from 100) do not stop compaction for good: the walk goes past the hole, and
// no merged row spans it.
TEST_F(StateTest, CompactionGoesPastAHoleBelowTheFrontiersBase) {
  Write(0, 4, 1, "a");
  Write(100, 104, 2, "b");
  Write(105, 109, 3, "c");
  EXPECT_EQ(PersistFrontier(conn(), 100, 110, 0).value(), 110u);
  Write(110, 114, 4, "d");
  EXPECT_EQ(PersistFrontier(conn(), 100, 115, 0).value(), 115u);
  EXPECT_EQ(Rows(), "0-4:1:a 100-114:4:d");
  Write(115, 119, 5, "e");
  EXPECT_EQ(PersistFrontier(conn(), 100, 120, 0).value(), 120u);
  EXPECT_EQ(Rows(), "0-4:1:a 100-119:5:e");
  auto committed = CommittedRanges(conn(), 0, 119);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->size(), 2u);
}

TEST_F(StateTest, CompactionKeepsRowsWithDifferentDatasetsApart) {
  Write(0, 4, 1, "a");
  RangeWrite traced = Range(5, 9, 2, "b");
  traced.datasets.Add(kTracesDataset);
  ASSERT_TRUE(WriteRange(conn(), traced).ok());
  Write(10, 14, 3, "c");
  EXPECT_EQ(PersistFrontier(conn(), 0, 15, 0).value(), 15u);
  EXPECT_EQ(Rows(), "0-4:1:a 5-9:2:b 10-14:3:c");
  auto lacking = RangesLacking(conn(), Datasets().Add(kTracesDataset), 0, 14);
  ASSERT_TRUE(lacking.ok()) << lacking.status().ToString();
  ASSERT_EQ(lacking->size(), 2u);
  EXPECT_EQ((*lacking)[0].from, 0u);
  EXPECT_EQ((*lacking)[1].from, 10u);
}

// A backfill (a write holding a dataset the merged row lacks) that starts at a merged row's first
// block cuts the row at its end and keeps the rest recorded, also when a row written since starts
// inside the rest: no committed block loses its record, nor its fence.
TEST_F(StateTest, ABackfillCuttingAMergedRowKeepsTheRestRecordedAroundARowInsideIt) {
  Write(0, 4, 1, "a");
  Write(5, 9, 2, "b");
  Write(10, 14, 3, "c");
  Write(15, 19, 4, "d");
  Write(20, 24, 5, "e");
  EXPECT_EQ(PersistFrontier(conn(), 0, 25, 0).value(), 25u);
  EXPECT_EQ(Rows(), "0-24:5:e");
  auto traced = [&](uint64_t from, uint64_t to, int64_t token, const std::string& owner) {
    RangeWrite w = Range(from, to, token, owner);
    w.datasets.Add(kTracesDataset);
    Status st = WriteRange(conn(), w);
    ASSERT_TRUE(st.ok()) << st.ToString();
  };
  traced(5, 9, 6, "f");  // a backfill's second range commits first: a row inside the merged one
  traced(0, 4, 7, "g");  // then its first: the merged row is cut at 4
  auto committed = CommittedRanges(conn(), 0, 24);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  ASSERT_EQ(committed->size(), 1u) << Rows();
  EXPECT_EQ((*committed)[0], std::make_pair(uint64_t{0}, uint64_t{24})) << Rows();
  EXPECT_EQ(Rows(), "0-4:7:g 5-9:6:f 10-24:5:e");
  // The rest keeps the merged row's fence: a token it refused is still refused there.
  EXPECT_EQ(WriteRange(conn(), Range(10, 14, 3, "c")).reason(), kStaleFenceReason);
  EXPECT_EQ(WriteRange(conn(), Range(20, 24, 5, "z")).reason(), kStaleFenceReason);
  auto lacking = RangesLacking(conn(), Datasets().Add(kTracesDataset), 0, 24);
  ASSERT_TRUE(lacking.ok()) << lacking.status().ToString();
  ASSERT_EQ(lacking->size(), 1u);
  EXPECT_EQ((*lacking)[0].from, 10u);
  EXPECT_EQ((*lacking)[0].to, 24u);
}

// The fence after compaction (state.h "Compaction"): rows whose highest token has two holders
// (one token granted twice) are not merged into one holder's row; a token below a merged row's is
// refused on every block it covers, an equal token from another holder too.
TEST_F(StateTest, AStaleTokenIsStillRefusedUnderACompactedRow) {
  auto refused = [&](uint64_t from, uint64_t to, int64_t token, const std::string& owner) {
    Status st = WriteRange(conn(), Range(from, to, token, owner));
    EXPECT_EQ(st.reason(), kStaleFenceReason)
        << from << "-" << to << " token " << token << " by " << owner << ": " << st.ToString();
  };
  Write(0, 4, 7, "a");
  Write(5, 9, 7, "b");  // token 7 granted twice (a Redis failover)
  Write(10, 14, 3, "c");
  EXPECT_EQ(PersistFrontier(conn(), 0, 15, 0).value(), 15u);
  EXPECT_EQ(Rows(), "0-4:7:a 5-14:7:b");
  refused(5, 9, 7, "a");  // merged into a's row, this would pass
  refused(6, 12, 7, "a");
  refused(0, 4, 7, "b");
  refused(10, 14, 6, "c");

  Write(15, 19, 9, "d");
  Write(20, 24, 4, "e");
  EXPECT_EQ(PersistFrontier(conn(), 0, 25, 0).value(), 25u);
  EXPECT_EQ(Rows(), "0-4:7:a 5-24:9:d");
  refused(15, 19, 8, "d");  // below the row's own token
  refused(15, 19, 9, "z");  // an equal token from another holder
  refused(22, 22, 9, "z");
  refused(5, 9, 7, "b");
  refused(3, 6, 6, "a");
  // Stricter than the rows were: 8 was above 20..24's own token 4. Below the frontier that
  // costs nothing (the blocks are committed); state.h says why.
  refused(20, 24, 8, "e2");
  EXPECT_TRUE(WriteRange(conn(), Range(15, 19, 9, "d")).ok());   // the holder of 9
  EXPECT_TRUE(WriteRange(conn(), Range(10, 14, 10, "f")).ok());  // a newer lease
  EXPECT_EQ(MaxFenceToken(conn()).value(), 10);
}

// A range in flight above the frontier keeps its row and its fence: its holder's retry passes,
// another holder's equal token and an older token are refused, its next part is written. The
// rows below, merged with a higher token, do not reach it; nor when the frontier passes its
// first part while the task goes on (the rows are too young to merge).
TEST_F(StateTest, ARangeInFlightAboveTheFrontierKeepsItsFence) {
  Write(0, 4, 25, "p");
  Write(5, 9, 30, "later");    // granted again after the range's first lease was lost
  Write(10, 14, 20, "owner");  // the first part of the task 10..19
  EXPECT_EQ(PersistFrontier(conn(), 0, 10, 0).value(), 10u);
  EXPECT_EQ(Rows(), "0-9:30:later 10-14:20:owner");
  auto in_flight = [&] {
    EXPECT_TRUE(WriteRange(conn(), Range(10, 14, 20, "owner")).ok());  // a lost reply, retried
    EXPECT_EQ(WriteRange(conn(), Range(10, 14, 20, "other")).reason(), kStaleFenceReason);
    EXPECT_EQ(WriteRange(conn(), Range(10, 14, 19, "owner")).reason(), kStaleFenceReason);
  };
  in_flight();
  EXPECT_TRUE(WriteRange(conn(), Range(15, 17, 20, "owner")).ok());  // the next part
  EXPECT_EQ(WriteRange(conn(), Range(15, 17, 20, "other")).reason(), kStaleFenceReason);
  EXPECT_EQ(PersistFrontier(conn(), 0, 18).value(), 18u);
  EXPECT_EQ(Rows(), "0-9:30:later 10-14:20:owner 15-17:20:owner");
  in_flight();
  EXPECT_TRUE(WriteRange(conn(), Range(18, 19, 20, "owner")).ok());  // the last part
}

}  // namespace
}  // namespace gapless

// Rolling back a re-orged fork against a real PostgreSQL: every row above the fork point goes in
// one transaction, indexed_ranges and the frontier follow, the unpublished outbox rows of the
// orphaned blocks go, the re-org is recorded; a rewrite of the new fork then commits; a re-org
// deeper than the bound and a stale leader's rollback change nothing.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/outbox.h"
#include "store/queries.h"
#include "store/rollback.h"
#include "store/state.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

SyntheticOptions Small(uint64_t seed = 1) {
  return {.transactions_per_block = 3,
          .logs_per_block = 6,
          .token_transfers_per_block = 3,
          .withdrawals_per_block = 1,
          .traces_per_block = 6,  // two traced transactions and the reward: 7 traces
          .seed = seed};
}

class RollbackTest : public PgTest {
 protected:
  int64_t Count(const std::string& sql) {
    auto res = conn().Query(sql);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? *res->GetInt64(0, 0) : -1;
  }
  // Rows of every data table above `block`.
  int64_t RowsAbove(uint64_t block) {
    const std::string b = std::to_string(block);
    return Count("SELECT (SELECT count(*) FROM blocks WHERE number > " + b +
                 ") + (SELECT count(*) FROM transactions WHERE block_number > " + b +
                 ") + (SELECT count(*) FROM logs WHERE block_number > " + b +
                 ") + (SELECT count(*) FROM token_transfers WHERE block_number > " + b +
                 ") + (SELECT count(*) FROM withdrawals WHERE block_number > " + b +
                 ") + (SELECT count(*) FROM traces WHERE block_number > " + b +
                 ") + (SELECT count(*) FROM contracts WHERE block_number > " + b +
                 ") + (SELECT count(*) FROM tokens WHERE block_number > " + b + ")");
  }
  // One contract created by each block's first transaction, and a token first seen in every
  // fifth block (issue 18's tables, rolled back with their blocks).
  static RangeWrite WithContractsAndTokens(RangeWrite w) {
    for (BlockData& d : w.blocks) {
      Contract c;
      c.block_number = d.block.number;
      c.transaction_hash = d.transactions.front().hash;
      c.transaction_index = d.transactions.front().transaction_index;
      c.address = "0x" + std::string(38, 'c') + fmt::format("{:02x}", d.block.number);
      c.creator_address = d.transactions.front().from_address;
      c.creation_type = "create";
      c.bytecode = "0x6000";
      d.contracts.push_back(c);
      if (d.block.number % 5 == 2) {
        Token t;
        t.address = "0x" + std::string(38, 'e') + fmt::format("{:02x}", d.block.number);
        t.block_number = d.block.number;
        t.standard = "erc20";
        t.symbol = "T" + std::to_string(d.block.number);
        d.tokens.push_back(t);
      }
    }
    return w;
  }
  // Blocks of another fork (seed 2) that branch off the stored chain after block from - 1.
  static RangeWrite NewFork(uint64_t from, uint64_t to) {
    RangeWrite w = SyntheticRange(from, to, Small(2));
    w.blocks.front().block.parent_hash = SyntheticBlockHash(from - 1, 1);
    return w;
  }
  void WriteAndPersist(uint64_t from, uint64_t to, uint64_t seed) {
    ASSERT_TRUE(
        WriteRange(conn(), WithContractsAndTokens(SyntheticRange(from, to, Small(seed)))).ok());
    ASSERT_TRUE(PersistFrontier(conn(), 0, to + 1).ok());
  }
};

TEST_F(RollbackTest, EverythingAboveTheForkPointGoesAndIsRecorded) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  WriteAndPersist(0, 9, 1);
  WriteAndPersist(10, 19, 1);
  const int64_t below_before = Count("SELECT count(*) FROM transactions WHERE block_number <= 14");
  ASSERT_EQ(Count("SELECT count(*) FROM traces WHERE block_number > 14"), 5 * 7);
  ASSERT_EQ(Count("SELECT count(*) FROM contracts"), 20);
  ASSERT_EQ(Count("SELECT count(*) FROM tokens"), 4);  // first seen at 2, 7, 12, 17
  std::vector<std::string> new_hashes;
  for (uint64_t n = 15; n <= 19; ++n) new_hashes.push_back(SyntheticBlockHash(n, 2));

  auto r = RollBack(conn(), {.fork_point = 14, .new_hashes = new_hashes, .leader_epoch = 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->depth, 5u);
  ASSERT_EQ(r->old_hashes.size(), 5u);
  EXPECT_EQ(r->old_hashes[0], SyntheticBlockHash(15, 1));
  EXPECT_EQ(r->generation, 1u);
  EXPECT_EQ(r->frontier, 15u);
  EXPECT_EQ(RowsAbove(14), 0) << "an orphaned row survived";
  EXPECT_EQ(Count("SELECT count(*) FROM contracts"), 15);
  EXPECT_EQ(Count("SELECT count(*) FROM tokens"), 3) << "a token first seen below the fork went";
  EXPECT_EQ(Count("SELECT count(*) FROM transactions WHERE block_number <= 14"), below_before);
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 15);
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox WHERE block_number > 14"), 0);
  EXPECT_EQ(LoadFrontier(conn())->value_or(0), 15u);
  auto ranges = CommittedRanges(conn(), 0, 100);
  ASSERT_TRUE(ranges.ok());
  EXPECT_EQ(*ranges, (std::vector<std::pair<uint64_t, uint64_t>>{{0, 14}}));
  EXPECT_EQ(Count("SELECT count(*) FROM reorgs WHERE fork_point = 14 AND depth = 5 AND "
                  "generation = 1 AND leader_epoch = 3 AND cardinality(old_hashes) = 5 AND "
                  "cardinality(new_hashes) = 5"),
            1);
  EXPECT_EQ(*ReorgGeneration(conn()), 1u);

  // The new fork's blocks (joining at the fork point) commit over the same heights, and the
  // frontier moves on.
  ASSERT_TRUE(WriteRange(conn(), WithContractsAndTokens(NewFork(15, 19))).ok());
  EXPECT_EQ(*PersistFrontier(conn(), 0, 20), 20u);
  EXPECT_EQ(Count("SELECT count(*) FROM blocks WHERE number > 14"), 5);
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox WHERE block_number > 14"), 5);
  // The new fork's traces, none of the old one's.
  EXPECT_EQ(Count("SELECT count(*) FROM traces WHERE block_number > 14"), 5 * 7);
  EXPECT_EQ(Count("SELECT count(*) FROM traces t JOIN transactions x ON x.hash = "
                  "t.transaction_hash WHERE t.block_number > 14"),
            5 * 6);
  // The new fork's contracts (created by its transactions) and the token it shows at 17 again.
  EXPECT_EQ(Count("SELECT count(*) FROM contracts c JOIN transactions x ON x.hash = "
                  "c.transaction_hash WHERE c.block_number > 14"),
            5);
  EXPECT_EQ(Count("SELECT count(*) FROM tokens"), 4);
}

TEST_F(RollbackTest, TooDeepOrAStaleEpochChangesNothing) {
  WriteAndPersist(0, 99, 1);
  auto deep =
      RollBack(conn(), {.fork_point = 20, .new_hashes = {}, .leader_epoch = 5, .max_depth = 64});
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(deep.status().reason(), kReorgTooDeepReason);
  EXPECT_NE(deep.status().message().find("fork point 20"), std::string::npos)
      << deep.status().message();
  EXPECT_NE(deep.status().message().find("--max-reorg-depth"), std::string::npos);
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 100);
  EXPECT_EQ(LoadFrontier(conn())->value_or(0), 100u);

  ASSERT_TRUE(RollBack(conn(), {.fork_point = 97, .new_hashes = {}, .leader_epoch = 5}).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 98);
  // A deposed leader (epoch 4) rolling back after its successor (5): refused, nothing changes.
  auto stale = RollBack(conn(), {.fork_point = 90, .new_hashes = {}, .leader_epoch = 4});
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), Code::kAborted);
  EXPECT_EQ(stale.status().reason(), kStaleReorgEpochReason);
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 98);
  EXPECT_EQ(Count("SELECT count(*) FROM reorgs"), 1);
  // Nothing above the fork point: no re-org recorded.
  auto none = RollBack(conn(), {.fork_point = 200, .new_hashes = {}, .leader_epoch = 5});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->depth, 0u);
  EXPECT_EQ(Count("SELECT count(*) FROM reorgs"), 1);
}

// The writer refuses a range that does not join the stored chain, on either side, and writes
// nothing: the first block's parent must be the stored block below, and the stored block above
// must have the last block as its parent.
TEST_F(RollbackTest, ARangeThatDoesNotJoinTheStoredChainIsRefused) {
  WriteAndPersist(0, 19, 1);
  // The old fork's 20..24 after 0..19 joins; another fork's 20..24 does not.
  Status st = WriteRange(conn(), SyntheticRange(20, 24, Small(2)));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kAborted);
  EXPECT_EQ(st.reason(), kParentMismatchReason);
  EXPECT_NE(st.message().find("block 20 has parent"), std::string::npos) << st.message();
  // A late worker of the old fork rewriting 15..19 of a fork that is not the stored one: the
  // stored block 20 (when there) must have 19 as parent.
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(20, 24, Small(1))).ok());
  st = WriteRange(conn(), NewFork(15, 19));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), kParentMismatchReason);
  EXPECT_NE(st.message().find("stored block 20"), std::string::npos) << st.message();
  EXPECT_EQ(Count("SELECT count(*) FROM blocks WHERE number BETWEEN 15 AND 19 AND hash = "
                  "decode(substr('" +
                  SyntheticBlockHash(15, 1) + "', 3), 'hex')"),
            1)
      << "the refused write changed the stored block 15";
  // Blocks of two forks inside one range: InvalidData before anything is sent.
  RangeWrite mixed = SyntheticRange(25, 29, Small(1));
  mixed.blocks[2].block.parent_hash = SyntheticBlockHash(26, 2);
  st = WriteRange(conn(), mixed);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInvalidData);
  EXPECT_NE(st.message().find("block 27"), std::string::npos) << st.message();
}

// The re-org fence: a token granted before the rollback (at or below its floor) cannot write above
// the fork point, even where no stored neighbour would show the break; a later token can; a range
// at or below the fork point is not fenced. The floor counts as a fence token (a Redis that lost
// its counter is floored above it), and a rollback with a floor is recorded, with the head log's
// fork generation, even when nothing was stored above the fork point.
TEST_F(RollbackTest, ATokenGrantedBeforeTheRollbackCannotWriteAboveTheForkPoint) {
  RangeWrite first = SyntheticRange(0, 9, Small(1));
  first.fence_token = 3;
  ASSERT_TRUE(WriteRange(conn(), first).ok());
  RangeWrite orphaned = SyntheticRange(10, 14, Small(1));
  orphaned.fence_token = 5;
  ASSERT_TRUE(WriteRange(conn(), orphaned).ok());
  RollbackRequest request{.fork_point = 9,
                          .new_hashes = {},
                          .leader_epoch = 1,
                          .fence_floor = 7,
                          .head_fork_generation = 1};
  auto rolled = RollBack(conn(), request);
  ASSERT_TRUE(rolled.ok()) << rolled.status().ToString();
  ASSERT_EQ(rolled->depth, 5u);

  // A worker paused with the old fork's 15..19 (nothing stored around them any more).
  RangeWrite late = SyntheticRange(15, 19, Small(1));
  late.fence_token = 6;
  Status st = WriteRange(conn(), late);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), kReorgFencedReason) << st.ToString();
  EXPECT_NE(st.message().find("above block 9"), std::string::npos) << st.message();
  orphaned.fence_token = 7;  // at the floor: refused too
  EXPECT_EQ(WriteRange(conn(), orphaned).reason(), kReorgFencedReason);
  EXPECT_EQ(RowsAbove(9), 0);
  EXPECT_EQ(MaxFenceToken(conn()).value(), 7);

  RangeWrite below = SyntheticRange(5, 9, Small(1));
  below.fence_token = 6;
  EXPECT_TRUE(WriteRange(conn(), below).ok()) << "a range at or below the fork point is fenced";
  RangeWrite canonical = NewFork(10, 14);
  canonical.fence_token = 8;
  st = WriteRange(conn(), canonical);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(HeadForkGeneration(conn()).value(), 1u);

  // Nothing above block 14 is stored: recorded all the same, for its floor.
  auto empty = RollBack(conn(), RollbackRequest{.fork_point = 14,
                                                .new_hashes = {},
                                                .leader_epoch = 1,
                                                .fence_floor = 9,
                                                .head_fork_generation = 2});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->depth, 0u);
  EXPECT_EQ(Count("SELECT count(*) FROM reorgs"), 2);
  EXPECT_EQ(HeadForkGeneration(conn()).value(), 2u);
  EXPECT_EQ(Count("SELECT count(*) FROM blocks"), 15);
}

}  // namespace
}  // namespace gapless

// The event outbox against a real PostgreSQL: rows exist exactly for committed blocks once events
// are enabled, in both write modes, never twice; the cursor is fenced by the leader's epoch and
// pruning follows the slowest bus.
#include <gtest/gtest.h>

#include "store/outbox.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

SyntheticOptions Small() {
  return {.transactions_per_block = 4,
          .logs_per_block = 8,
          .token_transfers_per_block = 4,
          .withdrawals_per_block = 1};
}

class OutboxTest : public PgTest {
 protected:
  int64_t Count(const std::string& sql) {
    auto res = conn().Query(sql);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? *res->GetInt64(0, 0) : -1;
  }
};

TEST_F(OutboxTest, NoRowsUntilEventsAreEnabled) {
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(0, 4, Small())).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 0);
  auto from = EventsFrom(conn());
  ASSERT_TRUE(from.ok());
  EXPECT_FALSE(from->has_value());
  auto enabled = EnableEvents(conn(), 5);
  ASSERT_TRUE(enabled.ok());
  EXPECT_EQ(*enabled, 5u);
  // A second enable keeps the first start.
  EXPECT_EQ(*EnableEvents(conn(), 9), 5u);
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(5, 9, Small())).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 5);
  EXPECT_EQ(Count("SELECT min(block_number) FROM event_outbox"), 5);
}

TEST_F(OutboxTest, OneRowPerCommittedBlockInBothModesHoweverOftenWritten) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  RangeWrite w = SyntheticRange(10, 19, Small());
  for (WriteMode mode :
       {WriteMode::kStagingUpsert, WriteMode::kReplaceRange, WriteMode::kStagingUpsert}) {
    Status st = WriteRange(conn(), w, {.mode = mode});
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 10);
  auto rows = ReadOutbox(conn(), 0, 100, 100);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 10u);
  for (size_t i = 0; i < rows->size(); ++i) {
    const BlockData& d = w.blocks[i];
    EXPECT_EQ((*rows)[i].block_number, d.block.number);
    EXPECT_EQ((*rows)[i].block_hash, d.block.hash);
    EXPECT_EQ((*rows)[i].event_count, 1 + d.transactions.size() + d.token_transfers.size());
  }
}

TEST_F(OutboxTest, AFailedWriteLeavesNoOutboxRow) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(0, 4, Small(), /*fence_token=*/7)).ok());
  ASSERT_TRUE(conn().Exec("DELETE FROM event_outbox").ok());
  // A stale token is refused: no data, and no event either.
  Status st = WriteRange(conn(), SyntheticRange(0, 4, Small(), /*fence_token=*/3));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 0);
  // A range whose rows break a constraint mid-write commits nothing, the outbox included.
  RangeWrite bad = SyntheticRange(20, 22, Small());
  bad.blocks[2].block.hash = "0xnothex";
  EXPECT_EQ(WriteRange(conn(), bad).code(), Code::kInvalidData);
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM blocks WHERE number >= 20"), 0);
}

TEST_F(OutboxTest, CursorIsFencedByTheLeaderEpochAndPrunesBelowTheSlowestBus) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(0, 9, Small())).ok());
  const std::vector<std::string> buses = {"redis://a", "kafka://b"};
  Status st = AdvanceCursor(conn(), "redis://a", 0, 5, 50, /*leader_epoch=*/3, buses, 0);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // kafka://b has no cursor yet: nothing is pruned.
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 10);
  ASSERT_TRUE(AdvanceCursor(conn(), "kafka://b", 0, 3, 30, 3, buses, 0).ok());
  EXPECT_EQ(Count("SELECT min(block_number) FROM event_outbox"), 3);
  // A deposed leader (epoch 2) cannot move the cursor.
  st = AdvanceCursor(conn(), "redis://a", 5, 8, 30, 2, buses, 0);
  EXPECT_EQ(st.code(), Code::kAborted);
  EXPECT_EQ(st.reason(), kStaleRelayEpochReason);
  // A relay that read an old cursor position cannot move it either.
  st = AdvanceCursor(conn(), "redis://a", 2, 8, 30, 4, buses, 0);
  EXPECT_EQ(st.code(), Code::kAborted);
  EXPECT_NE(st.reason(), kStaleRelayEpochReason);
  auto cursor = LoadCursor(conn(), "redis://a");
  ASSERT_TRUE(cursor.ok() && cursor->has_value());
  EXPECT_EQ((*cursor)->next_block, 5u);
  EXPECT_EQ((*cursor)->events_sent, 50u);
  EXPECT_EQ((*cursor)->leader_epoch, 3u);
  // A newer epoch moves it, and the prune follows the slower bus.
  ASSERT_TRUE(AdvanceCursor(conn(), "redis://a", 5, 10, 40, 4, buses, 0).ok());
  ASSERT_TRUE(AdvanceCursor(conn(), "kafka://b", 3, 10, 60, 4, buses, 0).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 0);
  auto stats = LoadOutboxStats(conn());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->rows, 0u);
}

TEST_F(OutboxTest, ARangeWrittenAgainAfterItWasPublishedLeavesNoRowBehind) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  RangeWrite w = SyntheticRange(0, 9, Small());
  ASSERT_TRUE(WriteRange(conn(), w).ok());
  const std::vector<std::string> buses = {"redis://a"};
  ASSERT_TRUE(AdvanceCursor(conn(), "redis://a", 0, 10, 100, 1, buses, 0).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 0);
  // A stale worker writes the published range again (idempotent for the data): no outbox row.
  for (WriteMode mode : {WriteMode::kStagingUpsert, WriteMode::kReplaceRange}) {
    ASSERT_TRUE(WriteRange(conn(), w, {.mode = mode}).ok());
  }
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 0);
  // Blocks above the cursor still get theirs.
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(10, 12, Small())).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 3);
  // A row below the cursor (a rewrite that raced the advance) goes with the next prune.
  ASSERT_TRUE(conn()
                  .Exec("INSERT INTO event_outbox (block_number, block_hash, event_count)"
                        " VALUES (5, '\\x00', 1)")
                  .ok());
  ASSERT_TRUE(PruneOutbox(conn(), buses).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 3);
  EXPECT_EQ(Count("SELECT min(block_number) FROM event_outbox"), 10);
}

}  // namespace
}  // namespace gapless

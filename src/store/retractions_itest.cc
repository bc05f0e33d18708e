// The events side of a rollback against a real PostgreSQL: RollBack records one retraction per
// orphaned block (what undoing needs once the rows are gone), lowers the bus cursors above the
// fork, and refuses the cursor advance of a batch read before it; the retraction progress is
// fenced like the cursor, and published retractions are pruned.
#include <gtest/gtest.h>

#include "events/event.h"
#include "store/outbox.h"
#include "store/retractions.h"
#include "store/rollback.h"
#include "store/state.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

SyntheticOptions Small(uint64_t seed = 1) {
  return {.transactions_per_block = 3,
          .logs_per_block = 12,
          .token_transfers_per_block = 6,
          .withdrawals_per_block = 1,
          .traces_per_block = 3,
          .seed = seed};
}

// The synthetic block with one internal transfer added below its first transaction's top frame:
// a CALL of value 7 (the synthetic traces move no value below the top).
BlockData WithInternalTransfer(BlockData d) {
  Trace t = d.traces.front();
  t.trace_address = {2};
  t.value = U256(7);
  t.status = 1;
  t.error.reset();
  t.trace_id = "call_" + *t.transaction_hash + "_2";
  d.traces.insert(d.traces.begin() + 1, t);
  return d;
}

class RetractionsTest : public PgTest {
 protected:
  int64_t Count(const std::string& sql) {
    auto res = conn().Query(sql);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? *res->GetInt64(0, 0) : -1;
  }
  void WriteAndPersist(uint64_t from, uint64_t to) {
    RangeWrite w = SyntheticRange(from, to, Small());
    for (BlockData& d : w.blocks) d = WithInternalTransfer(std::move(d));
    ASSERT_TRUE(WriteRange(conn(), w).ok());
    ASSERT_TRUE(PersistFrontier(conn(), 0, to + 1).ok());
  }
  std::vector<Retraction> All() {
    auto r = ReadRetractions(conn(), 0, 1000);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<Retraction>{};
  }
  uint64_t NextBlock(const std::string& bus) {
    auto c = LoadCursor(conn(), bus);
    EXPECT_TRUE(c.ok() && c->has_value());
    return c.ok() && c->has_value() ? (*c)->next_block : 0;
  }
};

TEST_F(RetractionsTest, EveryOrphanedBlockIsRetractedHighestFirstWithWhatUndoingNeeds) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  WriteAndPersist(0, 19);
  const std::vector<std::string> buses = {"redis://a", "kafka://b", "amqp://c"};
  // a published everything, b up to 16 (a batch may be in flight above), c up to 11.
  ASSERT_TRUE(AdvanceCursor(conn(), "redis://a", 0, 20, 0, 1, buses, 0).ok());
  ASSERT_TRUE(AdvanceCursor(conn(), "kafka://b", 0, 17, 0, 1, buses, 0).ok());
  ASSERT_TRUE(AdvanceCursor(conn(), "amqp://c", 0, 12, 0, 1, buses, 0).ok());

  auto r = RollBack(conn(), {.fork_point = 14, .new_hashes = {}, .leader_epoch = 1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->depth, 5u);

  std::vector<Retraction> all = All();
  ASSERT_EQ(all.size(), 5u) << "every orphaned block, whatever the cursors say";
  for (size_t i = 0; i < all.size(); ++i) {
    const Retraction& x = all[i];
    const uint64_t number = 19 - i;  // the highest block first
    SCOPED_TRACE("block " + std::to_string(number));
    EXPECT_EQ(x.seq, i + 1);
    EXPECT_EQ(x.generation, 1u);
    EXPECT_GT(x.reverted_at, 1'600'000'000u);
    BlockData original = SyntheticBlock(number, Small());
    EXPECT_EQ(x.block.block.number, number);
    EXPECT_EQ(x.block.block.hash, original.block.hash);
    ASSERT_EQ(x.block.transactions.size(), original.transactions.size());
    for (size_t t = 0; t < original.transactions.size(); ++t) {
      EXPECT_EQ(x.block.transactions[t].hash, original.transactions[t].hash);
      EXPECT_EQ(x.block.transactions[t].transaction_index, t);
    }
    ASSERT_FALSE(original.token_transfers.empty());
    EXPECT_EQ(x.block.token_transfers, original.token_transfers)
        << "the copy of the transfers differs from what was written";
    // Its internal transfers, so block.reverted names their trace.internal_transfer ids.
    const BlockData written = WithInternalTransfer(original);
    std::vector<std::string> expected, kept;
    for (const Trace& t : written.traces) {
      if (IsInternalTransfer(t)) {
        expected.push_back(InternalTransferEventId(1, written.block.hash, t));
      }
    }
    for (const Trace& t : x.block.traces) {
      EXPECT_TRUE(IsInternalTransfer(t));
      kept.push_back(InternalTransferEventId(1, x.block.block.hash, t));
    }
    ASSERT_EQ(expected.size(), 1u);
    EXPECT_EQ(kept, expected);
  }
  // The cursors above the fork come down to it; the one below stays.
  EXPECT_EQ(NextBlock("redis://a"), 15u);
  EXPECT_EQ(NextBlock("kafka://b"), 15u);
  EXPECT_EQ(NextBlock("amqp://c"), 12u);
  // Reading after a seq continues from there.
  auto rest = ReadRetractions(conn(), 3, 10);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ(rest->front().block.block.number, 16u);
  EXPECT_EQ(rest->front().block.token_transfers, SyntheticBlock(16, Small()).token_transfers);
}

TEST_F(RetractionsTest, NothingWithoutEventsAndNothingBelowEventsFrom) {
  WriteAndPersist(0, 19);
  ASSERT_TRUE(RollBack(conn(), {.fork_point = 17, .new_hashes = {}, .leader_epoch = 1}).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_retractions"), 0);
  // Events enabled from 16 on: of 13..16 only 16 was ever an event.
  ASSERT_TRUE(EnableEvents(conn(), 16).ok());
  ASSERT_TRUE(RollBack(conn(), {.fork_point = 12, .new_hashes = {}, .leader_epoch = 1}).ok());
  std::vector<Retraction> all = All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].block.block.number, 17u);
  EXPECT_EQ(all[1].block.block.number, 16u);
}

TEST_F(RetractionsTest, ABatchReadBeforeARollbackCannotMoveTheCursor) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  WriteAndPersist(0, 19);
  const std::vector<std::string> buses = {"redis://a", "kafka://b"};
  ASSERT_TRUE(AdvanceCursor(conn(), "redis://a", 0, 18, 0, 1, buses, 0).ok());
  ASSERT_TRUE(AdvanceCursor(conn(), "kafka://b", 0, 10, 0, 1, buses, 0).ok());
  // Both relays read a batch at generation 0: a 18..19, b 10..19. Then the rollback to 14.
  ASSERT_TRUE(RollBack(conn(), {.fork_point = 14, .new_hashes = {}, .leader_epoch = 1}).ok());
  // a's cursor was lowered: its expected position is gone.
  Status st = AdvanceCursor(conn(), "redis://a", 18, 20, 0, 1, buses, 0);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(NextBlock("redis://a"), 15u);
  // b's cursor (10) was below the fork and stays, but its batch held orphaned blocks: the
  // generation refuses it.
  st = AdvanceCursor(conn(), "kafka://b", 10, 20, 0, 1, buses, 0);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("rollback"), std::string::npos) << st.message();
  EXPECT_EQ(NextBlock("kafka://b"), 10u);
  // Read again (generation 1), the same positions move.
  EXPECT_TRUE(AdvanceCursor(conn(), "kafka://b", 10, 15, 0, 1, buses, 1).ok());
  EXPECT_EQ(NextBlock("kafka://b"), 15u);
}

TEST_F(RetractionsTest, ProgressIsFencedAndPublishedRetractionsArePrunedSeqsNeverReused) {
  ASSERT_TRUE(EnableEvents(conn(), 0).ok());
  WriteAndPersist(0, 19);
  const std::vector<std::string> buses = {"redis://a", "kafka://b"};
  ASSERT_TRUE(RollBack(conn(), {.fork_point = 16, .new_hashes = {}, .leader_epoch = 2}).ok());
  ASSERT_EQ(All().size(), 3u);
  // A bus without a cursor gets one at the block it gives (where it would start).
  ASSERT_TRUE(AdvanceRetractions(conn(), "redis://a", 0, 3, 3, 2, 0, buses).ok());
  EXPECT_EQ(NextBlock("redis://a"), 0u);
  EXPECT_EQ(Count("SELECT count(*) FROM event_retractions"), 3) << "b has not published them";
  // A deposed leader, or a relay that read an old position, cannot move it.
  Status st = AdvanceRetractions(conn(), "redis://a", 3, 5, 2, 1, 0, buses);
  EXPECT_EQ(st.reason(), kStaleRelayEpochReason);
  st = AdvanceRetractions(conn(), "kafka://b", 2, 3, 3, 2, 0, buses);
  EXPECT_EQ(st.code(), Code::kAborted);
  ASSERT_TRUE(AdvanceRetractions(conn(), "kafka://b", 0, 2, 2, 2, 0, buses).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_retractions"), 1);
  ASSERT_TRUE(AdvanceRetractions(conn(), "kafka://b", 2, 3, 1, 2, 0, buses).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM event_retractions"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM event_retraction_transfers"), 0);
  auto a = LoadCursor(conn(), "redis://a");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->retracted_through, 3u);
  EXPECT_EQ((*a)->events_sent, 3u);

  // Every retraction pruned: the next rollback's seqs still go on from 3.
  ASSERT_TRUE(WriteRange(conn(), SyntheticRange(17, 19, Small())).ok());
  ASSERT_TRUE(RollBack(conn(), {.fork_point = 15, .new_hashes = {}, .leader_epoch = 2}).ok());
  std::vector<Retraction> second = All();
  ASSERT_EQ(second.size(), 4u);
  EXPECT_EQ(second.front().seq, 4u);
  EXPECT_EQ(second.front().block.block.number, 19u);
  EXPECT_EQ(second.front().generation, 2u);
  EXPECT_EQ(second.back().seq, 7u);
  EXPECT_EQ(second.back().block.block.number, 16u);
}

}  // namespace
}  // namespace gapless

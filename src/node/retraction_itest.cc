// Retraction events end to end, against a real PostgreSQL and a real Redis Streams bus (a private
// redis-server): blocks with token transfers are published by the relay, a rollback orphans the
// top of the chain, the new fork's blocks are written and published. The bus must carry one
// block.reverted per orphaned block, highest first, before the new fork's events, each naming
// exactly the ids published for its block; the balances consumer run over the whole stream ends
// equal to the aggregate of the new fork's transfers, and a retraction delivered again changes
// nothing. A relay batch in flight when the rollback commits is refused at its cursor advance
// and read again, whether the rollback lowered its cursor or only orphaned blocks above it.
// The relay without re-orgs: relay_itest.cc; its pipelining: relay_pipeline_itest.cc. Shared:
// retraction_itest_util.h.
#include <gtest/gtest.h>

#include "node/retraction_itest_util.h"

namespace gapless::retraction_testing {
namespace {

TEST_F(RetractionTest, OrphanedBlocksAreRevertedOnTheBusBeforeTheNewForkAndBalancesFollow) {
  Write(SyntheticRange(0, 19, Small(1)));
  std::unique_ptr<RelayDuty> relay = Relay(8);
  PublishUpTo(*relay, 20);
  const size_t old_fork_end = publisher_->sent.size();
  std::map<std::string, std::set<std::string>> published = IdsByBlockHash(0, old_fork_end);
  ASSERT_EQ(published.size(), 20u);

  auto rb = RollBack(conn(), {.fork_point = 14, .new_hashes = {}, .leader_epoch = kEpoch});
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  ASSERT_EQ(rb->depth, 5u);
  // The relay publishes the retractions even before the new fork is there.
  PublishUpTo(*relay, 15);
  const size_t reverted_end = publisher_->sent.size();
  EXPECT_EQ(reverted_end - old_fork_end, 5u) << "one block.reverted per orphaned block, no more";
  Write(NewFork(15, 19));
  PublishUpTo(*relay, 20);

  // The order on the bus: the old fork, then block.reverted 19, 18, ..., 15, then the new fork.
  auto reverted = Positions(kBlockReverted);
  ASSERT_EQ(reverted.size(), 5u);
  for (size_t i = 0; i < reverted.size(); ++i) {
    EXPECT_EQ(reverted[i].second, 19 - i) << "retractions must come highest block first";
    EXPECT_GE(reverted[i].first, old_fork_end);
    EXPECT_LT(reverted[i].first, reverted_end);
  }
  auto new_blocks = Positions(kBlockNew, reverted_end);
  ASSERT_EQ(new_blocks.size(), 5u);
  for (size_t i = 0; i < new_blocks.size(); ++i) EXPECT_EQ(new_blocks[i].second, 15 + i);
  // Each retraction names exactly the ids that were published for its block.
  for (const auto& [pos, number] : reverted) {
    RevertedBlock r = RevertedOf(publisher_->sent[pos]);
    EXPECT_EQ(r.block_hash, SyntheticBlockHash(number, 1));
    EXPECT_EQ(r.reorg_generation, 1u);
    std::set<std::string> ids(r.reverted_event_ids.begin(), r.reverted_event_ids.end());
    EXPECT_EQ(ids.size(), r.reverted_event_ids.size());
    EXPECT_EQ(ids, published[r.block_hash]) << "block " << number;
    EXPECT_EQ(r.token_transfers.size(), SyntheticBlock(number, Small(1)).token_transfers.size());
  }
  // The new fork's events are other events (their identity holds the new hashes).
  std::map<std::string, std::set<std::string>> new_fork =
      IdsByBlockHash(reverted_end, publisher_->sent.size());
  std::set<std::string> new_hashes, want_hashes;
  for (const auto& [hash, ids] : new_fork) {
    new_hashes.insert(hash);
    for (const auto& [old_hash, old_ids] : published) {
      for (const std::string& id : ids) EXPECT_EQ(old_ids.count(id), 0u) << id;
    }
  }
  for (uint64_t n = 15; n <= 19; ++n) want_hashes.insert(SyntheticBlockHash(n, 2));
  EXPECT_EQ(new_hashes, want_hashes);

  // The balances consumer over the whole stream (transfers and retractions, two streams read in
  // no particular order between them).
  std::unique_ptr<BalancesRun> run = StartBalances();
  ASSERT_NE(run, nullptr);
  const SubscribeOptions& sub = run->sub;
  const int64_t transfers = static_cast<int64_t>(Positions(kTokenTransfer).size());
  auto caught_up = [&] {
    auto lag = GroupLag(redis_->url(), sub);
    return lag.ok() && *lag == 0 && Count("SELECT count(*) FROM applied_events") == transfers + 5;
  };
  bool done = WaitFor(caught_up, 60'000);
  auto check = CheckBalancesAgainstTransfers(conn());
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_TRUE(done) << "applied " << Count("SELECT count(*) FROM applied_events") << " of "
                    << transfers + 5;
  EXPECT_EQ(check->differing, 0) << "token_balances differs from the new fork's transfers";
  EXPECT_GT(check->expected, 20);
  const int64_t reverted_transfers =
      Count("SELECT count(*) FROM applied_events WHERE reverted_at IS NOT NULL");
  int64_t orphaned_transfers = 0;
  for (uint64_t n = 15; n <= 19; ++n) {
    orphaned_transfers += static_cast<int64_t>(SyntheticBlock(n, Small(1)).token_transfers.size());
  }
  EXPECT_EQ(reverted_transfers, orphaned_transfers);

  // The retractions delivered again (a relay that crashed between publish and advance): nothing
  // changes.
  std::vector<OutgoingEvent> again;
  for (const auto& [pos, number] : reverted) again.push_back(publisher_->sent[pos]);
  ASSERT_TRUE(publisher_->Publish(again).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        auto lag = GroupLag(redis_->url(), sub);
        return lag.ok() && *lag == 0;
      },
      30'000));
  run->Stop();
  EXPECT_TRUE(run->consumed.ok()) << run->consumed.ToString();
  check = CheckBalancesAgainstTransfers(conn());
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(check->differing, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM applied_events WHERE reverted_at IS NOT NULL"),
            reverted_transfers);
  // Everything published by the one bus: the outbox and the retractions are pruned.
  EXPECT_EQ(Count("SELECT count(*) FROM event_retractions"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM event_outbox"), 0);
}

// Issue 16: a flip-flop re-org, A -> B -> A with A's exact blocks back (a node that switches
// forks and back). A's events come back under new ids (the block's incarnation in their
// identity), so a consumer that deduplicates by id, and the balances consumer that tombstoned
// the ids A's retraction named, apply them again; each retraction names the ids its publication
// had.
TEST_F(RetractionTest, ABlockThatComesBackInAFlipFlopReorgTakesEffectAgain) {
  Write(SyntheticRange(0, 19, Small(1)));
  std::unique_ptr<RelayDuty> relay = Relay(8);
  PublishUpTo(*relay, 20);
  const size_t first_end = publisher_->sent.size();
  std::map<std::string, std::set<std::string>> first = IdsByBlockHash(0, first_end);
  // A -> B.
  ASSERT_TRUE(RollBack(conn(), {.fork_point = 14, .new_hashes = {}, .leader_epoch = kEpoch}).ok());
  PublishUpTo(*relay, 15);
  Write(NewFork(15, 19));
  PublishUpTo(*relay, 20);
  // B -> A: A's very blocks again.
  ASSERT_TRUE(RollBack(conn(), {.fork_point = 14, .new_hashes = {}, .leader_epoch = kEpoch}).ok());
  PublishUpTo(*relay, 15);
  const size_t back_start = publisher_->sent.size();
  Write(SyntheticRange(15, 19, Small(1)));
  PublishUpTo(*relay, 20);
  if (HasFatalFailure()) return;

  std::map<std::string, std::set<std::string>> back =
      IdsByBlockHash(back_start, publisher_->sent.size());
  ASSERT_EQ(back.size(), 5u);
  for (const auto& [hash, ids] : back) {
    ASSERT_TRUE(first.count(hash)) << "block " << hash << " is not A's";
    for (const std::string& id : ids) {
      EXPECT_EQ(first[hash].count(id), 0u) << "A's comeback reuses the id " << id;
    }
  }
  // The first retraction of A named A's first ids.
  for (const auto& [pos, number] : Positions(kBlockReverted)) {
    RevertedBlock r = RevertedOf(publisher_->sent[pos]);
    if (r.block_hash != SyntheticBlockHash(number, 1)) continue;  // B's
    std::set<std::string> named(r.reverted_event_ids.begin(), r.reverted_event_ids.end());
    EXPECT_EQ(named, first[r.block_hash]) << "block " << number;
  }

  // The balances consumer over the whole stream ends equal to A's transfers.
  std::unique_ptr<BalancesRun> run = StartBalances();
  ASSERT_NE(run, nullptr);
  const SubscribeOptions& sub = run->sub;
  const int64_t transfers = static_cast<int64_t>(Positions(kTokenTransfer).size());
  const bool done = WaitFor(
      [&] {
        auto lag = GroupLag(redis_->url(), sub);
        return lag.ok() && *lag == 0 && Count("SELECT count(*) FROM applied_events") >= transfers;
      },
      60'000);
  run->Stop();
  EXPECT_TRUE(done);
  EXPECT_TRUE(run->consumed.ok()) << run->consumed.ToString();
  auto check = CheckBalancesAgainstTransfers(conn());
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->differing, 0) << "token_balances differs from A's transfers";
  EXPECT_GT(check->expected, 20);
}

// A batch of blocks 15..19 is confirmed by the broker while a rollback commits: its
// AdvanceCursor must be refused, and the next steps must retract every orphaned block (those of
// the batch too) before the new fork.
class InFlightTest : public RetractionTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(InFlightTest, ABatchInFlightAcrossARollbackIsRefusedAndRetracted) {
  const uint64_t fork = GetParam();  // 12: the cursor (15) is lowered; 16: it is not
  Write(SyntheticRange(0, 14, Small(1)));
  std::unique_ptr<RelayDuty> relay = Relay(5);
  PublishUpTo(*relay, 15);
  Write(SyntheticRange(15, 19, Small(1)));
  const size_t before_batch = publisher_->sent.size();

  auto other = db().Connect();
  ASSERT_TRUE(other.ok());
  Status rolled_back = Internal("the rollback did not run");
  publisher_->after_confirm = [&](const std::vector<OutgoingEvent>&) {
    auto r = RollBack(**other, {.fork_point = fork, .new_hashes = {}, .leader_epoch = kEpoch});
    rolled_back = r.status();
  };
  Status st = relay->Step(kEpoch);
  ASSERT_TRUE(rolled_back.ok()) << rolled_back.ToString();
  EXPECT_EQ(st.code(), Code::kAborted) << "the in-flight batch moved the cursor: " << st.ToString();
  auto cursor = LoadCursor(conn(), publisher_->name());
  ASSERT_TRUE(cursor.ok() && cursor->has_value());
  EXPECT_EQ((*cursor)->next_block, std::min<uint64_t>(15, fork + 1));
  std::map<std::string, std::set<std::string>> in_flight =
      IdsByBlockHash(before_batch, publisher_->sent.size());
  ASSERT_EQ(in_flight.size(), 5u) << "the batch 15..19 reached the bus";

  Write(NewFork(fork + 1, 19));
  const size_t after_batch = publisher_->sent.size();
  PublishUpTo(*relay, 20);
  auto reverted = Positions(kBlockReverted, after_batch);
  ASSERT_EQ(reverted.size(), 19 - fork);
  for (size_t i = 0; i < reverted.size(); ++i) {
    EXPECT_EQ(reverted[i].second, 19 - i);
    RevertedBlock r = RevertedOf(publisher_->sent[reverted[i].first]);
    if (reverted[i].second >= 15) {
      std::set<std::string> ids(r.reverted_event_ids.begin(), r.reverted_event_ids.end());
      EXPECT_EQ(ids, in_flight[r.block_hash]) << "block " << reverted[i].second;
    }
  }
  // Then the blocks from the cursor on: those of the refused batch below the fork again (the same
  // ids: at least once), the new fork above it.
  const uint64_t restart = std::min<uint64_t>(15, fork + 1);
  auto blocks_after = Positions(kBlockNew, after_batch);
  ASSERT_EQ(blocks_after.size(), 20 - restart);
  EXPECT_GT(blocks_after.front().first, reverted.back().first)
      << "a block was published before the retractions";
  for (size_t i = 0; i < blocks_after.size(); ++i) {
    const uint64_t n = restart + i;
    EXPECT_EQ(blocks_after[i].second, n);
    const OutgoingEvent& e = publisher_->sent[blocks_after[i].first];
    EXPECT_NE(ParseEnvelope(e.body)->payload_json.find(SyntheticBlockHash(n, n > fork ? 2 : 1)),
              std::string::npos)
        << "block " << n;
    if (n <= fork) {
      EXPECT_EQ(in_flight[SyntheticBlockHash(n, 1)].count(e.event_id), 1u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CursorLoweredOrNot, InFlightTest, ::testing::Values(12, 16));

}  // namespace
}  // namespace gapless::retraction_testing

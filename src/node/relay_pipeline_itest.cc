// The relay's pipelining (node/relay.h), against a real PostgreSQL and a Redis Streams bus (a
// private redis-server): while a batch waits for its confirmation the next is read, but the
// cursor moves only after each batch's confirmation, in order; a batch read ahead is dropped when
// the one before it fails or when a rollback commits before it is sent.
// Shared helpers in retraction_itest_util.h.
#include <gtest/gtest.h>

#include "node/retraction_itest_util.h"

namespace gapless::retraction_testing {
namespace {

// Pipelining: while batch n waits for its confirmation the relay reads batch n+1, but the cursor
// is never past where batch n starts, batch n+1 is not sent before batch n is confirmed, and each
// batch's advance follows its own confirmation (batch n-1's may still be running while batch n is
// sent: TheNextBatchIsPublishedWhileTheLastOnesCursorAdvanceWaits).
TEST_F(RetractionTest, TheCursorMovesOnlyAfterItsBatchIsConfirmedWhileTheNextIsReadAhead) {
  Write(SyntheticRange(0, 19, Small(1)));
  GatePublisher gate(publisher_.get());
  std::unique_ptr<RelayDuty> relay = Relay(5, &gate);
  StepThread step(*relay, gate);
  for (uint64_t batch = 0; batch < 4; ++batch) {
    std::optional<uint64_t> held = gate.WaitHeld();
    ASSERT_TRUE(held.has_value()) << "batch " << batch << " was not published";
    EXPECT_EQ(*held, 5 * batch);
    if (batch < 3) {
      EXPECT_TRUE(WaitFor([&] { return relay->batches_read() == batch + 2; }, 20'000))
          << "batch " << batch + 1 << " was not read while batch " << batch << " was in flight";
    }
    if (batch == 0) {
      std::optional<uint64_t> cursor = CursorNext();
      EXPECT_TRUE(!cursor.has_value() || *cursor == 0) << *cursor;
    } else {
      EXPECT_TRUE(
          WaitFor([&] { return CursorNext() == std::optional<uint64_t>(5 * batch); }, 20'000))
          << "the cursor lags a batch the broker has confirmed";
      EXPECT_EQ(CursorNext(), std::optional<uint64_t>(5 * batch))
          << "the cursor moved past a batch the broker has not confirmed";
    }
    EXPECT_EQ(gate.calls(), static_cast<int>(batch + 1))
        << "a batch was sent before the one before it was confirmed";
    gate.Release();
  }
  Status st = step.Join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(CursorNext(), std::optional<uint64_t>(20));
  EXPECT_EQ(PublishedBlocks(), Blocks(0, 20)) << "every block once, in order";
  EXPECT_EQ(relay->events_published(), publisher_->sent.size());
}

// A batch that fails to publish (broker down) ends the step, and the batch read ahead behind it
// is dropped unsent: the next step sends the failed batch first, the same events again.
TEST_F(RetractionTest, AFailedPublishDropsTheBatchReadAheadBehindIt) {
  Write(SyntheticRange(0, 9, Small(1)));
  GatePublisher gate(publisher_.get());
  std::unique_ptr<RelayDuty> relay = Relay(5, &gate);
  auto step = std::make_unique<StepThread>(*relay, gate);
  ASSERT_EQ(gate.WaitHeld(), std::optional<uint64_t>(0));
  EXPECT_TRUE(WaitFor([&] { return relay->batches_read() == 2; }, 20'000));
  gate.Release(Unavailable("the broker is down"));
  Status st = step->Join();
  step.reset();
  gate.set_open(false);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_EQ(gate.calls(), 1) << "the batch read ahead was sent after the one before it failed";
  EXPECT_TRUE(publisher_->sent.empty());
  std::optional<uint64_t> cursor = CursorNext();
  EXPECT_TRUE(!cursor.has_value() || *cursor == 0) << *cursor;

  StepThread again(*relay, gate);
  EXPECT_EQ(gate.WaitHeld(), std::optional<uint64_t>(0)) << "the failed batch must go first";
  gate.Release();
  EXPECT_EQ(gate.WaitHeld(), std::optional<uint64_t>(5));
  gate.Release();
  st = again.Join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(CursorNext(), std::optional<uint64_t>(10));
  EXPECT_EQ(PublishedBlocks(), Blocks(0, 10));
}

// The publishing thread is not kept waiting for the last batch's cursor advance (a PostgreSQL
// transaction with a commit): batch n+1 is handed to it once batch n is confirmed, while batch
// n's advance runs. Here the advance of 5..9 waits behind a lock on the bus's cursor row: 10..14
// must reach the broker meanwhile, and the cursor still moves only to where the broker confirmed.
TEST_F(RetractionTest, TheNextBatchIsPublishedWhileTheLastOnesCursorAdvanceWaits) {
  GatePublisher gate(publisher_.get());
  std::unique_ptr<RelayDuty> relay = Relay(5, &gate);
  HeldStep held;
  HoldTheSecondOfThreeBatches(*relay, gate, &held);
  if (HasFatalFailure()) return;
  auto locked = held.locker->Query("SELECT 1 FROM event_cursors WHERE bus = $1 FOR UPDATE",
                                   {publisher_->name()});
  ASSERT_TRUE(locked.ok() && locked->rows() == 1) << locked.status().ToString();
  gate.Release();
  EXPECT_EQ(gate.WaitHeld(), std::optional<uint64_t>(10))
      << "batch 10..14 waited for the cursor advance of 5..9";
  EXPECT_EQ(CursorNext(), std::optional<uint64_t>(5));
  ASSERT_TRUE(held.locker->Exec("COMMIT").ok());
  EXPECT_TRUE(WaitFor([&] { return CursorNext() == std::optional<uint64_t>(10); }, 20'000))
      << "the advance of 5..9 did not follow its confirmation";
  EXPECT_EQ(CursorNext(), std::optional<uint64_t>(10))
      << "the cursor moved past a batch the broker has not confirmed";
  gate.Release();
  Status st = held.step->Join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(CursorNext(), std::optional<uint64_t>(15));
  EXPECT_EQ(PublishedBlocks(), Blocks(0, 15)) << "every block once, in order";
}

// Batch n's advance refused (a newer leader epoch recorded for the bus) while batch n+1 is
// already being published: the step waits for n+1's confirmation before it returns (nothing is
// left in flight) and moves no cursor; n+1's events were sent, so a later leader sends them again
// (at least once, the same ids).
TEST_F(RetractionTest, AnAdvanceRefusedWhileTheNextBatchIsInFlightWaitsForItAndMovesNothing) {
  GatePublisher gate(publisher_.get());
  std::unique_ptr<RelayDuty> relay = Relay(5, &gate);
  HeldStep held;
  HoldTheSecondOfThreeBatches(*relay, gate, &held);
  if (HasFatalFailure()) return;
  auto deposed = held.locker->Query("UPDATE event_cursors SET leader_epoch = $2 WHERE bus = $1",
                                    {publisher_->name(), std::to_string(kEpoch + 1)});
  ASSERT_TRUE(deposed.ok()) << deposed.status().ToString();
  gate.Release();
  ASSERT_EQ(gate.WaitHeld(), std::optional<uint64_t>(10));
  ASSERT_TRUE(held.locker->Exec("COMMIT").ok());
  EXPECT_FALSE(held.step->EndsWithin(500)) << "the step returned with batch 10..14 in flight";
  gate.Release();
  Status st = held.step->Join();
  EXPECT_EQ(st.reason(), kStaleRelayEpochReason) << st.ToString();
  EXPECT_EQ(CursorNext(), std::optional<uint64_t>(5));
  EXPECT_EQ(gate.calls(), 2);
  EXPECT_EQ(PublishedBlocks(), Blocks(0, 15));
}

// Batch 10..14 is in flight and 15..19 read ahead when a rollback commits: the in-flight batch's
// advance is refused (the reorg generation moved), the batch read ahead is never sent, and the next
// steps retract every orphaned block before publishing from the cursor again. Fork 16 orphans
// only blocks of the batch read ahead; fork 12 those of the batch in flight too.
class ReadAheadTest : public RetractionTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(ReadAheadTest, ABatchReadAheadDoesNotOutliveARollback) {
  const uint64_t fork = GetParam();
  Write(SyntheticRange(0, 9, Small(1)));
  GatePublisher gate(publisher_.get());
  std::unique_ptr<RelayDuty> relay = Relay(5, &gate);
  gate.set_open(true);
  PublishUpTo(*relay, 10);
  if (HasFatalFailure()) return;
  gate.set_open(false);
  Write(SyntheticRange(10, 19, Small(1)));
  const size_t before = publisher_->sent.size();
  const uint64_t read_before = relay->batches_read();

  auto step = std::make_unique<StepThread>(*relay, gate);
  ASSERT_EQ(gate.WaitHeld(), std::optional<uint64_t>(10));
  EXPECT_TRUE(WaitFor([&] { return relay->batches_read() == read_before + 2; }, 20'000))
      << "15..19 was not read ahead";
  auto other = db().Connect();
  ASSERT_TRUE(other.ok());
  auto rb = RollBack(**other, {.fork_point = fork, .new_hashes = {}, .leader_epoch = kEpoch});
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  gate.Release();
  Status st = step->Join();
  step.reset();
  EXPECT_EQ(st.code(), Code::kAborted) << "the batch in flight moved the cursor: " << st.ToString();
  EXPECT_EQ(gate.calls(), 1) << "the batch read ahead was sent after the rollback";
  EXPECT_EQ(CursorNext(), std::optional<uint64_t>(10));
  for (size_t i = before; i < publisher_->sent.size(); ++i) {
    EXPECT_LT(BlockNumberOf(publisher_->sent[i]), 15u) << "an event of the batch read ahead";
  }

  gate.set_open(true);
  Write(NewFork(fork + 1, 19));
  const size_t after = publisher_->sent.size();
  PublishUpTo(*relay, 20);
  if (HasFatalFailure()) return;
  auto reverted = Positions(kBlockReverted, after);
  ASSERT_EQ(reverted.size(), 19 - fork);
  for (size_t i = 0; i < reverted.size(); ++i) EXPECT_EQ(reverted[i].second, 19 - i);
  auto blocks = Positions(kBlockNew, after);
  ASSERT_EQ(blocks.size(), 10u);
  EXPECT_GT(blocks.front().first, reverted.back().first)
      << "a block was published before the retractions";
  for (size_t i = 0; i < blocks.size(); ++i) {
    const uint64_t n = 10 + i;
    EXPECT_EQ(blocks[i].second, n);
    EXPECT_NE(ParseEnvelope(publisher_->sent[blocks[i].first].body)
                  ->payload_json.find(SyntheticBlockHash(n, n > fork ? 2 : 1)),
              std::string::npos)
        << "block " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(ForkInFlightOrReadAhead, ReadAheadTest, ::testing::Values(12, 16));

}  // namespace
}  // namespace gapless::retraction_testing

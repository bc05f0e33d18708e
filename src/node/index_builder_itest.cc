// The leader's index builder against a real PostgreSQL (node/index_builder.h): finished
// partitions first, the rest when the run nears its end; a standby builds nothing (and the
// metrics count what is due and each build); a stop cancels a build in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "core/metrics.h"
#include "node/index_builder.h"
#include "store/partition_indexes.h"
#include "store/partitions.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

class IndexBuilderTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(SetPartitionBlocks(conn(), 10).ok());
    Status st = WriteRange(conn(), SyntheticRange(0, 29,
                                                  {.transactions_per_block = 2,
                                                   .logs_per_block = 2,
                                                   .token_transfers_per_block = 1,
                                                   .withdrawals_per_block = 1,
                                                   .traces_per_block = 2}));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::unique_ptr<IndexBuilder> Builder(uint64_t near_head, std::optional<uint64_t> to) {
    IndexBuilderOptions options;
    options.near_head = near_head;
    options.to = to;
    options.tick_ms = 20;
    return std::make_unique<IndexBuilder>(db().url(), PgConnectOptions{}, options, &lease_,
                                          [this] { return frontier_.load(); });
  }

  // The partitions still lacking an index.
  std::vector<uint64_t> Missing() {
    auto missing = PartitionsMissingIndexes(conn());
    EXPECT_TRUE(missing.ok()) << missing.status().ToString();
    std::vector<uint64_t> out;
    if (missing.ok()) {
      for (const auto& p : *missing) out.push_back(p.start);
    }
    return out;
  }

  // A series' value in this process's /metrics text, -1 when it is not there.
  static double Metric(const std::string& series) {
    std::istringstream in(MetricsRegistry::Default().Render());
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return -1;
  }

  LocalLease lease_;
  std::atomic<uint64_t> frontier_{0};
};

TEST_F(IndexBuilderTest, FinishedPartitionsFirstThenTheRestAtTheEnd) {
  auto builder = Builder(/*near_head=*/0, /*to=*/29);
  frontier_ = 15;  // blocks 0..14 committed: only [0, 10) is finished
  ASSERT_TRUE(builder->Step(1).ok());
  EXPECT_EQ(Missing(), (std::vector<uint64_t>{10, 20}));
  ASSERT_TRUE(builder->Step(1).ok());
  EXPECT_EQ(Missing(), (std::vector<uint64_t>{10, 20}));  // nothing else is due
  EXPECT_EQ(builder->pending(), 0u);
  EXPECT_FALSE(builder->done());

  frontier_ = 30;  // the range is committed: both due, built in one step
  ASSERT_TRUE(builder->Step(1).ok());
  EXPECT_TRUE(Missing().empty());
  EXPECT_EQ(builder->pending(), 0u);
  EXPECT_TRUE(builder->done());
}

TEST_F(IndexBuilderTest, NearTheTargetThePartitionsBeingWrittenAreIndexedAtOnce) {
  auto builder = Builder(/*near_head=*/100, /*to=*/29);
  frontier_ = 5;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(builder->Step(1).ok());
  EXPECT_TRUE(Missing().empty());
  EXPECT_FALSE(builder->done());  // the range is not committed yet
}

TEST_F(IndexBuilderTest, FollowingWithoutAKnownHeadOnlyFinishedPartitionsAreDue) {
  auto builder = Builder(/*near_head=*/UINT64_MAX, /*to=*/std::nullopt);  // LocalLease: no head
  frontier_ = 25;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(builder->Step(1).ok());
  EXPECT_EQ(Missing(), (std::vector<uint64_t>{20}));
  EXPECT_FALSE(builder->done());  // following never ends
}

TEST_F(IndexBuilderTest, AStandbyBuildsNothingButSeesWhenTheRangeIsDone) {
  auto standby = Builder(/*near_head=*/0, /*to=*/29);
  frontier_ = 30;
  ASSERT_TRUE(standby->Standby().ok());
  EXPECT_EQ(Missing(), (std::vector<uint64_t>{0, 10, 20}));
  EXPECT_EQ(standby->pending(), 3u);
  EXPECT_FALSE(standby->done());
  EXPECT_EQ(Metric("gapless_partitions_awaiting_indexes"), 3);
  const double builds_before = Metric("gapless_partition_index_build_seconds_count");
  auto leader = Builder(/*near_head=*/0, /*to=*/29);
  std::atomic<bool> stop{false};
  ASSERT_TRUE(leader->Run(stop).ok());  // ends by itself once everything is built
  EXPECT_TRUE(leader->done());
  EXPECT_TRUE(Missing().empty());
  EXPECT_EQ(Metric("gapless_partitions_awaiting_indexes"), 0);
  EXPECT_EQ(Metric("gapless_partition_index_build_seconds_count") - std::max(builds_before, 0.0),
            3);
  ASSERT_TRUE(standby->Standby().ok());
  EXPECT_TRUE(standby->done());
}

TEST_F(IndexBuilderTest, AStopCancelsABuildInFlight) {
  auto writer = db().Connect();
  ASSERT_TRUE(writer.ok());
  // A writer's transaction open on a partition: a build of it waits.
  ASSERT_TRUE((*writer)->Exec("BEGIN; LOCK TABLE transactions_p20 IN ROW EXCLUSIVE MODE").ok());
  auto builder = Builder(/*near_head=*/0, /*to=*/29);
  frontier_ = 30;
  std::atomic<bool> stop{false};
  Status st = Internal("not returned");
  std::thread thread([&] { st = builder->Run(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto stopped_at = std::chrono::steady_clock::now();
  stop = true;
  thread.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  // Cancelled: it did not wait for the writer (which never ends here).
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, std::chrono::seconds(20));
  EXPECT_FALSE(builder->done());
  ASSERT_TRUE((*writer)->Exec("ROLLBACK").ok());
  EXPECT_EQ(Missing(), (std::vector<uint64_t>{0, 10, 20}));
}

}  // namespace
}  // namespace gapless

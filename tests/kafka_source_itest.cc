// Blocks from a Kafka stream, end to end (issue 9): a private anvil mines ~2,000 blocks with
// transactions, `gapless produce` puts them on a 4-partition topic of librdkafka's mock cluster
// (3 brokers, in a helper process), and Kafka workers (`gapless worker --source kafka`) index
// them under a leader (`gapless leader --source kafka`), with the same consumer code as against
// a real cluster. Asserted:
//  - three workers, one killed every few seconds and restarted, a broker set down once, and a
//    range re-published by the producer mid-run: the database equals a clean RPC run (table
//    checksums) and the leader finishes the fixed range (the frontier passed it: no gap);
//  - a worker killed after its commit and before its offset commit: the range is delivered again
//    and skipped by the completion check (its fence token in indexed_ranges is the first write's);
//  - a gap in the stream shows in `status` and is healed from RPC;
//  - `run --source kafka` (leader and Kafka workers in one process) finishes a fixed range.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <random>

#include "devnet_util.h"
#include "testing/free_port.h"
#include "testing/kafka_mock.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

using testing_util::NowMs;
using testing_util::WaitFor;

constexpr char kTopic[] = "blocks";
// The mock's group coordinator makes a new member wait out the session timeout: keep it short.
constexpr char kConsumerProps[] = "?session.timeout.ms=4500&heartbeat.interval.ms=1000";

class KafkaSourceTest : public DbRedisTest {
 protected:
  void SetUp() override {
    DbRedisTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ClearChainKeys(redis_url_, 31337);
    auto cluster = KafkaMockCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(cluster).value();
    ASSERT_TRUE(cluster_->CreateTopic(kTopic, 4, 3).ok());
  }

  std::vector<std::string> Leader(const PrivateChain& chain, uint64_t to) {
    return {GaplessBinary(), "leader",
            "--source",      "kafka",
            "--rpc",         chain.url,
            "--db",          db_.url(),
            "--redis",       redis_url_,
            "--from",        "0",
            "--to",          std::to_string(to),
            "--range-size",  "50",
            "--progress",    "off",
            "--log-level",   "warn"};
  }
  std::vector<std::string> Worker(uint64_t to, const std::string& group = "indexer") {
    return {GaplessBinary(),
            "worker",
            "--source",
            "kafka",
            "--brokers",
            cluster_->bootstrap() + kConsumerProps,
            "--topic",
            kTopic,
            "--group",
            group,
            "--db",
            db_.url(),
            "--redis",
            redis_url_,
            "--from",
            "0",
            "--to",
            std::to_string(to),
            "--range-size",
            "50",
            "--workers",
            "1",
            "--kafka-flush",
            "500",
            "--range-lock-ttl",
            "3000",
            "--progress",
            "off",
            "--log-level",
            "warn"};
  }
  std::vector<std::string> Produce(const PrivateChain& chain, uint64_t from, uint64_t to) {
    return {GaplessBinary(), "produce",
            "--rpc",         chain.url,
            "--brokers",     cluster_->bootstrap(),
            "--topic",       kTopic,
            "--from",        std::to_string(from),
            "--to",          std::to_string(to),
            "--batch",       "100",
            "--log-level",   "warn"};
  }

  // Every process a test started, killed when it ends (also after a failed assertion).
  pid_t Track(pid_t pid) {
    started_.push_back(pid);
    return pid;
  }
  void TearDown() override {
    for (pid_t pid : started_) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == 0) {  // still our running child (never a reused pid)
        kill(pid, SIGKILL);
        WaitForExit(pid, 10);
      }
    }
    DbRedisTest::TearDown();
  }

  std::unique_ptr<KafkaMockCluster> cluster_;
  std::vector<pid_t> started_;
};

TEST_F(KafkaSourceTest, ThreeWorkersUnderKillsABrokerDownAndDuplicatesEqualACleanRun) {
  constexpr uint64_t kTo = 2000;
  auto chain = StartPrivateChain(kTo);
  if (chain == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
  const std::string log = ::testing::TempDir() + "kafka-source-chaos.log";
  pid_t leader = Track(Spawn(Leader(*chain, kTo), log));
  std::vector<pid_t> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(Track(Spawn(Worker(kTo), log)));
  pid_t producer = Track(Spawn(Produce(*chain, 0, kTo), log));

  std::mt19937 rng(9);
  int kills = 0;
  bool broker_was_down = false, republished = false;
  const int64_t deadline = NowMs() + 300'000;
  int leader_exit = -2;
  while (NowMs() < deadline) {
    int status = 0;
    if (waitpid(leader, &status, WNOHANG) == leader) {
      leader_exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    if (kills < 6) {  // one worker killed mid-stream and restarted
      size_t victim = rng() % workers.size();
      kill(workers[victim], SIGKILL);
      WaitForExit(workers[victim], 10);
      workers[victim] = Track(Spawn(Worker(kTo), log));
      ++kills;
    }
    if (kills == 2 && !broker_was_down) {
      ASSERT_TRUE(cluster_->SetBrokerDown(2).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      ASSERT_TRUE(cluster_->SetBrokerUp(2).ok());
      broker_was_down = true;
    }
    if (kills == 3 && !republished) {
      // The producer re-publishes a range (as after a producer crash): duplicates everywhere.
      EXPECT_EQ(WaitForExit(producer, 120), 0) << "see " << log;
      producer = Track(Spawn(Produce(*chain, 500, 899), log));
      republished = true;
    }
  }
  EXPECT_EQ(WaitForExit(producer, 60), 0) << "see " << log;
  for (pid_t w : workers) {
    int code = WaitForExit(w, 30);
    EXPECT_EQ(code, 0) << "a worker did not stop by itself once the range was done; see " << log;
  }
  ASSERT_EQ(leader_exit, 0) << "the leader did not finish blocks 0.." << kTo << "; see " << log;
  EXPECT_GE(kills, 3);
  EXPECT_TRUE(broker_was_down);
  ExpectEqualsACleanRun(chain->devnet(), pool_.get(), kTo);
}

TEST_F(KafkaSourceTest, AWorkerKilledBetweenItsCommitAndItsOffsetCommitIsSkippedOnRedelivery) {
  constexpr uint64_t kTo = 199;
  auto chain = StartPrivateChain(kTo);
  if (chain == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
  const std::string log = ::testing::TempDir() + "kafka-source-ack.log";
  ASSERT_EQ(WaitForExit(Spawn(Produce(*chain, 0, kTo), log), 120), 0) << "see " << log;
  pid_t leader = Track(Spawn(Leader(*chain, kTo), log));
  // The first window it writes, it commits and then dies before acknowledging the messages.
  pid_t first = Track(Spawn(Worker(kTo), log, {"GAPLESS_FAILPOINTS=kafka-worker-exit-before-ack"}));
  EXPECT_EQ(WaitForExit(first, 120), -1) << "the failpoint should have killed it; see " << log;
  std::vector<std::pair<std::string, std::string>> before;
  {
    auto conn = pool_->Acquire();
    auto rows = conn->Query(
        "SELECT from_block || '-' || to_block, fence_token::text FROM "
        "indexed_ranges ORDER BY from_block");
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->rows(), 1) << "exactly the one window committed before the kill";
    before.emplace_back(std::string(rows->Get(0, 0)), std::string(rows->Get(0, 1)));
  }
  pid_t second = Track(Spawn(Worker(kTo), log));
  ASSERT_EQ(WaitForExit(leader, 120), 0) << "see " << log;
  EXPECT_EQ(WaitForExit(second, 30), 0) << "see " << log;
  auto conn = pool_->Acquire();
  auto rows = conn->Query(
      "SELECT fence_token::text FROM indexed_ranges WHERE from_block || '-' || to_block = $1",
      {before[0].first});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->rows(), 1);
  EXPECT_EQ(rows->Get(0, 0), before[0].second)
      << "window " << before[0].first << " was written again instead of skipped";
  ExpectEqualsACleanRun(chain->devnet(), pool_.get(), kTo);
}

// Blocks 100..149 never reach the stream: the leader reports the gap in `status` and, after
// --heal-gaps-after, queues it for the RPC worker a Kafka worker given --rpc runs.
TEST_F(KafkaSourceTest, AGapInTheStreamIsReportedAndHealedFromRpc) {
  constexpr uint64_t kTo = 199;
  auto chain = StartPrivateChain(kTo);
  if (chain == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
  const std::string log = ::testing::TempDir() + "kafka-source-gap.log";
  ASSERT_EQ(WaitForExit(Spawn(Produce(*chain, 0, 99), log), 120), 0) << "see " << log;
  ASSERT_EQ(WaitForExit(Spawn(Produce(*chain, 150, kTo), log), 120), 0) << "see " << log;
  std::vector<std::string> leader_args = Leader(*chain, kTo);
  leader_args.insert(leader_args.end(), {"--heal-gaps-after", "6000"});
  pid_t leader = Track(Spawn(leader_args, log));
  std::vector<std::string> worker_args = Worker(kTo);
  worker_args.insert(worker_args.end(), {"--rpc", chain->url});
  pid_t worker = Track(Spawn(worker_args, log));
  std::string shown;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [code, out] = RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis",
                                         redis_url_, "--log-level", "error"});
        shown = out;
        return out.find("blocks 100..149 missing from the stream") != std::string::npos;
      },
      60'000))
      << shown;
  EXPECT_NE(shown.find("WARNING"), std::string::npos) << shown;
  ASSERT_EQ(WaitForExit(leader, 120), 0) << "the gap was not healed; see " << log;
  EXPECT_EQ(WaitForExit(worker, 30), 0) << "see " << log;
  ExpectEqualsACleanRun(chain->devnet(), pool_.get(), kTo);
}

// `gapless run --source kafka`: the leader and two Kafka workers in one process (the
// single-machine form), finishing a fixed range with exit code 0.
TEST_F(KafkaSourceTest, RunWithKafkaWorkersInOneProcessFinishesTheRange) {
  constexpr uint64_t kTo = 149;
  auto chain = StartPrivateChain(kTo);
  if (chain == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
  const std::string log = ::testing::TempDir() + "kafka-source-run.log";
  ASSERT_EQ(WaitForExit(Spawn(Produce(*chain, 0, kTo), log), 120), 0) << "see " << log;
  std::vector<std::string> args = Leader(*chain, kTo);
  args[1] = "run";
  std::vector<std::string> worker = Worker(kTo);
  for (const char* flag : {"--brokers", "--topic", "--group", "--kafka-flush"}) {
    auto at = std::find(worker.begin(), worker.end(), flag);
    args.insert(args.end(), {*at, *(at + 1)});
  }
  args.insert(args.end(), {"--workers", "2"});
  ASSERT_EQ(WaitForExit(Track(Spawn(args, log)), 180), 0) << "see " << log;
  ExpectEqualsACleanRun(chain->devnet(), pool_.get(), kTo);
}

}  // namespace
}  // namespace gapless::e2e

// The HA leader as real processes: two `gapless leader` candidates and `gapless worker` processes
// index the devnet, coordinated through the test redis-server, with three private redis-servers
// as lock nodes (testing/redis_server.h). What an operator relies on:
//  - the leader killed with SIGKILL: the other candidate leads within the TTL (plus detection),
//    indexing completes with no gap and rows equal a clean run, and the head log holds one hash
//    per height, the chain's;
//  - the leader SIGSTOPped past its lease: the other takes over and writes; after SIGCONT the old
//    leader steps down and nothing it tries lands in the head log;
//  - SIGTERM (graceful stepdown): the other candidate takes over well before the TTL;
//  - `gapless status` shows the leader, every lock node's view and the head log.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "coord/election.h"
#include "coord/lock_nodes.h"
#include "devnet_util.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "store/queries.h"
#include "store/state.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

const std::string kAnvilUrl = GAPLESS_TEST_ANVIL_URL;
const std::string kManifest = GAPLESS_TEST_DEVNET_MANIFEST;
constexpr int64_t kTtlMs = 1'500;

using testing_util::NowMs;
using testing_util::WaitFor;

class LeaderTest : public DbRedisTest {
 protected:
  void SetUp() override {
    DbRedisTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    devnet_ = OpenDevnet(kAnvilUrl, kManifest);
    ClearChainKeys(redis_url_, devnet_.chain_id());
    for (int i = 0; i < 3; ++i) {
      auto s = RedisServer::Start();
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      urls_.push_back((*s)->url());
      servers_.push_back(std::move(*s));
    }
    keys_ = std::make_unique<Keys>(FleetKeys(pool_.get(), devnet_.chain_id()));
    auto nodes = LockNodes::Open(urls_);
    ASSERT_TRUE(nodes.ok());
    nodes_ = std::move(*nodes);
    view_ = std::make_unique<Election>(nodes_.get(), *keys_,
                                       ElectionOptions{"test-view", kTtlMs, 4096});
    log_prefix_ = std::string(GAPLESS_BINARY_DIR) + "/leader_itest-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-";
  }

  void TearDown() override {
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  std::string LockNodesFlag() const {
    std::string out;
    for (const auto& u : urls_) out += (out.empty() ? "" : ",") + u;
    return out;
  }

  std::vector<std::string> Command(const char* role, const char* workers) {
    FleetFlags flags;
    flags.range_size = "5";
    flags.workers = workers;
    flags.log_level = "info";
    flags.extra = {"--lock-nodes", LockNodesFlag(), "--lock-node-timeout", "300", "--batch", "1"};
    if (std::string(role) != "worker") {
      flags.extra.insert(flags.extra.end(), {"--leader-ttl", std::to_string(kTtlMs)});
    }
    return FleetCommand(role, devnet_, db_.url(), redis_url_, devnet_.last_block(), flags);
  }

  pid_t Start(const char* role, const char* workers, const std::string& log) {
    pid_t pid = Spawn(Command(role, workers), log_prefix_ + log);
    pids_.push_back(pid);
    return pid;
  }

  // The pid in the owner id ("host:pid:suffix") holding the lock on a quorum, or 0.
  pid_t LeaderPid() {
    std::map<std::string, int> holders;
    for (const auto& v : view_->Views()) {
      if (v.reachable && !v.holder.empty()) ++holders[v.holder];
    }
    for (const auto& [holder, n] : holders) {
      if (n < 2) continue;
      size_t last = holder.rfind(':');
      size_t mid = holder.rfind(':', last - 1);
      return static_cast<pid_t>(std::stol(holder.substr(mid + 1, last - mid - 1)));
    }
    return 0;
  }

  uint64_t MaxEpoch() {
    uint64_t e = 0;
    for (const auto& v : view_->Views()) e = std::max(e, v.epoch);
    return e;
  }

  void Forget(pid_t pid) { pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end()); }

  // Every block once, chained, rows equal a clean run; the head log committed every height with
  // the hash PostgreSQL holds, and no node holds two entries at a height.
  void ExpectCompleteAndLogConsistent(std::optional<uint64_t> up_to = std::nullopt) {
    const uint64_t last = up_to.value_or(devnet_.last_block());
    auto conn = pool_->Acquire();
    auto report = Verify(*conn, 0, last);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_TRUE(report->ok()) << report->Render();
    auto committed = view_->Committed(0, last);
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    EXPECT_EQ(committed->size(), last + 1);
    auto rows = conn->Query(
        "SELECT number, '0x' || encode(hash, 'hex') FROM blocks WHERE number <= $1 ORDER BY 1",
        {std::to_string(last)});
    ASSERT_TRUE(rows.ok());
    for (int i = 0; i < rows->rows(); ++i) {
      uint64_t n = std::stoull(std::string(rows->Get(i, 0)));
      auto it = committed->find(n);
      ASSERT_NE(it, committed->end()) << "height " << n << " is not in the head log";
      EXPECT_EQ(it->second.hash, std::string(rows->Get(i, 1))) << "height " << n;
    }
    for (const auto& s : servers_) {
      auto c = RedisConn::Connect(s->url());
      ASSERT_TRUE(c.ok());
      auto members = (*c)->Command({"ZRANGE", keys_->head_heights(), "0", "-1"});
      ASSERT_TRUE(members.ok());
      std::set<std::string> heights;
      for (const auto& m : members->elements) {
        EXPECT_TRUE(heights.insert(m.str.substr(0, m.str.find(':'))).second)
            << "two entries at one height on " << s->url() << ": " << m.str;
      }
    }
    ExpectEqualsACleanRun(devnet_, pool_.get(), last);
  }

  Devnet devnet_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::string> urls_;
  std::unique_ptr<Keys> keys_;
  std::unique_ptr<LockNodes> nodes_;
  std::unique_ptr<Election> view_;
  std::vector<pid_t> pids_;
  std::string log_prefix_;
};

TEST_F(LeaderTest, TheLeaderKilledWithSigkillIsReplacedWithinTheTtlAndTheRunCompletes) {
  pid_t a = Start("leader", "0", "a.log");
  ASSERT_TRUE(WaitFor([&] { return LeaderPid() == a; }, 20'000)) << "a never led";
  pid_t b = Start("leader", "0", "b.log");
  pid_t w1 = Start("worker", "1", "workers.log");
  pid_t w2 = Start("worker", "1", "workers.log");
  ASSERT_TRUE(WaitFor([&] { return CommittedRangeCount(pool_.get()) >= 2; }, 60'000));

  int64_t killed = NowMs();
  kill(a, SIGKILL);
  waitpid(a, nullptr, 0);
  Forget(a);
  ASSERT_TRUE(WaitFor([&] { return LeaderPid() == b; }, 10'000)) << "b never took over";
  int64_t takeover = NowMs() - killed;
  EXPECT_LE(takeover, kTtlMs + 1'500) << "takeover after SIGKILL took " << takeover << " ms";

  EXPECT_EQ(WaitForExit(b, 300), 0) << "the run did not finish; see " << log_prefix_ << "b.log";
  Forget(b);
  for (pid_t w : {w1, w2}) {
    kill(w, SIGTERM);
    WaitForExit(w, 30);
    Forget(w);
  }
  ExpectCompleteAndLogConsistent();
  auto conn = pool_->Acquire();
  EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(devnet_.last_block() + 1));
}

// Following the chain, so that there is new work for a paused leader to try: a is SIGSTOPped past
// its lease, b takes over, blocks are mined and b writes them; a is SIGCONTed and tries to write
// the same heights from its stale view: refused on every node, it steps down.
TEST_F(LeaderTest, ALeaderPausedPastItsLeaseStepsDownAndNothingItTriesLands) {
  JsonRpcClient rpc(std::make_unique<CurlTransport>(kAnvilUrl));
  auto head = rpc.BlockNumber();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  auto follow = [&](const char* role, const char* workers) {
    std::vector<std::string> args = Command(role, workers);
    if (std::string(role) != "worker") args.insert(args.end(), {"--to", "latest", "--follow"});
    return args;
  };
  auto start = [&](const char* role, const char* workers, const std::string& log) {
    pid_t pid = Spawn(follow(role, workers), log_prefix_ + log);
    pids_.push_back(pid);
    return pid;
  };
  pid_t a = start("leader", "0", "a.log");
  ASSERT_TRUE(WaitFor([&] { return LeaderPid() == a; }, 20'000)) << "a never led";
  uint64_t epoch_a = MaxEpoch();
  pid_t b = start("leader", "0", "b.log");
  pid_t w = start("worker", "1", "workers.log");
  ASSERT_TRUE(WaitFor([&] { return CommittedRangeCount(pool_.get()) >= 1; }, 60'000));

  kill(a, SIGSTOP);
  ASSERT_TRUE(WaitFor([&] { return LeaderPid() == b; }, 10'000)) << "b never took over";
  uint64_t epoch_b = MaxEpoch();
  ASSERT_GT(epoch_b, epoch_a);
  // New blocks, which b writes under its epoch while a sleeps.
  ASSERT_TRUE(rpc.Call("anvil_mine", "[\"0x5\"]").ok());
  const uint64_t mined = *head + 5;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto c = view_->Committed(mined, mined);
        return c.ok() && c->count(mined) && c->at(mined).epoch >= epoch_b;
      },
      10'000))
      << "b did not write the new blocks";
  kill(a, SIGCONT);
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(log_prefix_ + "a.log").find("stepping down") != std::string::npos; },
      10'000))
      << ReadFile(log_prefix_ + "a.log");
  ASSERT_TRUE(rpc.Call("anvil_mine", "[\"0x3\"]").ok());
  const uint64_t last = mined + 3;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto conn = pool_->Acquire();
        auto f = LoadFrontier(*conn);
        return f.ok() && f->has_value() && **f > last;
      },
      120'000))
      << "the fleet did not index the new blocks";
  EXPECT_EQ(LeaderPid(), b);
  for (pid_t pid : {a, b, w}) {
    kill(pid, SIGTERM);
    EXPECT_EQ(WaitForExit(pid, 30), 130);
    Forget(pid);
  }

  // Nothing a tried landed: on every node, once an entry of b's epoch (or later) arrived, no
  // entry of an older epoch followed it.
  for (const auto& s : servers_) {
    auto c = RedisConn::Connect(s->url());
    ASSERT_TRUE(c.ok());
    auto entries = (*c)->Command({"XRANGE", keys_->head_log(), "-", "+"});
    ASSERT_TRUE(entries.ok());
    bool newer_seen = false;
    for (const auto& e : entries->elements) {
      const auto& f = e.elements[1].elements;
      uint64_t epoch = 0;
      for (size_t k = 0; k + 1 < f.size(); k += 2) {
        if (f[k].str == "epoch") epoch = std::stoull(f[k + 1].str);
      }
      if (epoch >= epoch_b) newer_seen = true;
      EXPECT_FALSE(newer_seen && epoch < epoch_b)
          << "an entry of epoch " << epoch << " landed on " << s->url() << " after epoch "
          << epoch_b << " had written";
    }
  }
  // The leader-only scripts on the coordination Redis saw b's epoch (or a later one).
  auto redis = RedisConn::Connect(redis_url_);
  ASSERT_TRUE(redis.ok());
  auto seen = (*redis)->Command({"GET", keys_->leader_epoch()});
  ASSERT_TRUE(seen.ok());
  EXPECT_GE(std::stoull(seen->str), epoch_b);
  ExpectCompleteAndLogConsistent(last);
}

TEST_F(LeaderTest, AGracefulStepdownHandsOverWithoutWaitingForTheTtlAndStatusShowsTheLeader) {
  pid_t a = Start("leader", "0", "a.log");
  ASSERT_TRUE(WaitFor([&] { return LeaderPid() == a; }, 20'000)) << "a never led";
  pid_t b = Start("leader", "0", "b.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // b follows

  auto [code, status] = RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis",
                                      redis_url_, "--lock-nodes", LockNodesFlag()});
  EXPECT_EQ(code, 0) << status;
  EXPECT_NE(status.find("pid " + std::to_string(a)), std::string::npos) << status;
  EXPECT_NE(status.find("lock nodes (3, quorum 2)"), std::string::npos) << status;
  EXPECT_NE(status.find("head log               committed up to"), std::string::npos) << status;

  int64_t stopped = NowMs();
  kill(a, SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return LeaderPid() == b; }, 10'000)) << "b never took over";
  int64_t handover = NowMs() - stopped;
  EXPECT_LT(handover, kTtlMs / 2) << "takeover after SIGTERM took " << handover << " ms";
  EXPECT_EQ(WaitForExit(a, 30), 130);
  Forget(a);

  servers_[2]->Kill();  // one node down: status says so, the leader stays
  auto [code2, status2] = RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis",
                                        redis_url_, "--lock-nodes", LockNodesFlag()});
  EXPECT_EQ(code2, 0) << status2;
  EXPECT_NE(status2.find("unreachable"), std::string::npos) << status2;
  EXPECT_NE(status2.find("pid " + std::to_string(b)), std::string::npos) << status2;
}

}  // namespace
}  // namespace gapless::e2e

// The fleet under SIGKILL, at the size the issue names: four `gapless worker` processes index a
// 2,000-block devnet (chain 31338, its own CTest fixture `anvil_long`, with traffic of every
// transaction type and token standard) while the test SIGKILLs a random one of them every 1.5 s
// (or every 8 committed ranges, if that comes first) and starts it again. A `gapless run --workers
// 0` process holds the seeder/janitor/frontier role (it is killed too in devnet_itest's smaller
// chaos test). At the end:
//  - every block is committed exactly once (verify, and one row per block number),
//  - the rows equal a clean single-worker run (table checksums),
//  - the frontier persisted in PostgreSQL is the last block + 1,
//  - nothing was dead-lettered.
// The same run under the HA leader: three private lock nodes, two `gapless leader` candidates and
// three workers, killed at random (the leaders too), plus a fourth worker that SIGSTOPs itself
// right before its write (failpoint worker-stop-before-write) and is SIGCONTed after the run:
// its commit is refused by the fence, and everything above holds.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "coord/queue.h"
#include "devnet_util.h"
#include "store/state.h"
#include "testing/redis_server.h"

namespace gapless::e2e {
namespace {

const std::string kAnvilUrl = GAPLESS_TEST_ANVIL_LONG_URL;
const std::string kManifest = GAPLESS_TEST_DEVNET_LONG_MANIFEST;

using ChaosTest = DbRedisTest;

TEST_F(ChaosTest, FourWorkerProcessesKilledAtRandomIndex2000BlocksExactlyOnce) {
  const Devnet devnet = OpenDevnet(kAnvilUrl, kManifest);
  ASSERT_GE(devnet.last_block(), 2000u);
  ClearChainKeys(redis_url_, devnet.chain_id());
  const std::string to = std::to_string(devnet.last_block());
  auto command = [&](const char* role, const char* workers) {
    return FleetCommand(role, devnet, db_.url(), redis_url_, devnet.last_block(),
                        {.range_size = "20", .workers = workers, .rpc_timeout_ms = "2000"});
  };
  const std::string log_dir = std::string(GAPLESS_BINARY_DIR) + "/chaos_itest-";
  std::remove((log_dir + "run.log").c_str());
  std::remove((log_dir + "worker.log").c_str());
  pid_t leader = Spawn(command("run", "0"), log_dir + "run.log");
  std::vector<pid_t> workers;
  for (int i = 0; i < 4; ++i) {
    workers.push_back(Spawn(command("worker", "1"), log_dir + "worker.log"));
  }

  std::mt19937 rng(2000);
  int kills = 0;
  int leader_exit = -2;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  // A kill every 1.5 s, or sooner when another 8 of the ~100 ranges have committed since the last
  // one, so a fast build gets as much chaos per range as a slow one.
  auto next_kill = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  int64_t ranges_at_last_kill = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(leader, &status, WNOHANG) == leader) {
      leader_exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    bool worker_died = false;
    for (pid_t pid : workers) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        ADD_FAILURE() << "a worker exited by itself (status " << status << "); see " << log_dir
                      << "worker.log";
        worker_died = true;
      }
    }
    if (worker_died) break;
    int64_t ranges = CommittedRangeCount(pool_.get());
    if (std::chrono::steady_clock::now() >= next_kill || ranges >= ranges_at_last_kill + 8) {
      next_kill = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
      ranges_at_last_kill = ranges;
      size_t victim = rng() % workers.size();
      if (kill(workers[victim], SIGKILL) == 0) {
        waitpid(workers[victim], &status, 0);
        ++kills;
        workers[victim] = Spawn(command("worker", "1"), log_dir + "worker.log");
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t pid : workers) {
    kill(pid, SIGTERM);
    WaitForExit(pid, 30);
  }
  if (leader_exit == -2) {
    kill(leader, SIGKILL);
    waitpid(leader, nullptr, 0);
  }
  std::printf("chaos: %s blocks, %d worker processes killed with SIGKILL and restarted\n",
              to.c_str(), kills);
  ASSERT_EQ(leader_exit, 0) << "the run did not finish (" << kills << " kills); see " << log_dir
                            << "run.log";
  EXPECT_GE(kills, 8) << "the run finished before the chaos could matter";

  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << report->Render();
  auto blocks = conn->Query(
      "SELECT count(*), count(DISTINCT number), min(number), max(number) "
      "FROM blocks");
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(blocks->Get(0, 0), std::to_string(devnet.last_block() + 1));
  EXPECT_EQ(blocks->Get(0, 1), std::to_string(devnet.last_block() + 1));
  EXPECT_EQ(blocks->Get(0, 2), "0");
  EXPECT_EQ(blocks->Get(0, 3), to);
  EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(devnet.last_block() + 1));

  auto redis = RedisConn::Connect(redis_url_);
  ASSERT_TRUE(redis.ok());
  Queue queue(redis->get(), FleetKeys(pool_.get(), devnet.chain_id()));
  auto depths = queue.Depths();
  ASSERT_TRUE(depths.ok());
  EXPECT_EQ(depths->dlq, 0) << "a range was dead-lettered";

  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

TEST_F(ChaosTest, TheHaLeaderAndWorkersKilledAtRandomAndAWorkerPausedPastItsLease) {
  const Devnet devnet = OpenDevnet(kAnvilUrl, kManifest);
  ASSERT_GE(devnet.last_block(), 2000u);
  ClearChainKeys(redis_url_, devnet.chain_id());
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::string lock_nodes;
  for (int i = 0; i < 3; ++i) {
    auto n = RedisServer::Start();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    lock_nodes += (lock_nodes.empty() ? "" : ",") + (*n)->url();
    nodes.push_back(std::move(*n));
  }
  auto command = [&](const char* role, const char* workers) {
    FleetFlags flags;
    flags.range_size = "20";
    flags.workers = workers;
    flags.rpc_timeout_ms = "2000";
    flags.log_level = "info";
    flags.extra = {"--lock-nodes", lock_nodes, "--lock-node-timeout", "300"};
    if (std::string(role) == "leader") {
      flags.extra.insert(flags.extra.end(), {"--leader-ttl", "1500"});
    }
    return FleetCommand(role, devnet, db_.url(), redis_url_, devnet.last_block(), flags);
  };
  const std::string log_dir = std::string(GAPLESS_BINARY_DIR) + "/chaos_itest-ha-";
  for (const char* f : {"leader.log", "worker.log", "stopped.log"}) {
    std::remove((log_dir + f).c_str());
  }
  // The worker that stops before its first write, waiting for work as the run starts.
  pid_t stopped = Spawn(command("worker", "1"), log_dir + "stopped.log",
                        {"GAPLESS_FAILPOINTS=worker-stop-before-write"});
  // pids[0..1]: candidates, pids[2..4]: workers.
  std::vector<std::vector<std::string>> commands = {command("leader", "0"), command("leader", "0"),
                                                    command("worker", "1"), command("worker", "1"),
                                                    command("worker", "1")};
  std::vector<pid_t> pids;
  for (size_t i = 0; i < commands.size(); ++i) {
    pids.push_back(Spawn(commands[i], log_dir + (i < 2 ? "leader.log" : "worker.log")));
  }
  auto frontier = [&] {
    auto conn = pool_->Acquire();
    auto f = LoadFrontier(*conn);
    return f.ok() && f->has_value() ? **f : 0;
  };
  std::mt19937 rng(4000);
  int kills = 0, leader_kills = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  // A kill every second, or every 6 committed ranges if that comes first; every third kill hits a
  // leader candidate (the leader itself half of the time).
  auto next_kill = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
  int64_t ranges_at_last_kill = 0;
  while (frontier() <= devnet.last_block() && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        // A candidate exits 0 once the range is done; anything else is a failure.
        ASSERT_TRUE(i < 2 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "process " << i << " exited by itself (status " << status << "); see " << log_dir;
        pids[i] = -1;
      }
    }
    int64_t ranges = CommittedRangeCount(pool_.get());
    if (std::chrono::steady_clock::now() >= next_kill || ranges >= ranges_at_last_kill + 6) {
      next_kill = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
      ranges_at_last_kill = ranges;
      size_t victim = kills % 3 == 0 ? rng() % 2 : 2 + rng() % 3;
      if (pids[victim] > 0 && kill(pids[victim], SIGKILL) == 0) {
        waitpid(pids[victim], &status, 0);
        ++kills;
        if (victim < 2) ++leader_kills;
        pids[victim] =
            Spawn(commands[victim], log_dir + (victim < 2 ? "leader.log" : "worker.log"));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t pid : pids) {
    if (pid <= 0) continue;
    kill(pid, SIGTERM);
    WaitForExit(pid, 30);
  }
  std::printf("ha chaos: %d processes killed (%d leader candidates), frontier %llu\n", kills,
              leader_kills, static_cast<unsigned long long>(frontier()));
  ASSERT_GT(frontier(), devnet.last_block()) << "the run did not finish; see " << log_dir;
  EXPECT_GE(kills, 8) << "the run finished before the chaos could matter";
  EXPECT_GE(leader_kills, 3);

  // Resume the paused worker: its write carries a token the fence has seen superseded.
  ASSERT_EQ(ProcessState(stopped), 'T') << "the worker never reached its write:\n"
                                        << ReadFile(log_dir + "stopped.log");
  ASSERT_EQ(kill(stopped, SIGCONT), 0);
  std::string log;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    log = ReadFile(log_dir + "stopped.log");
    if (log.find("lost, dropping it") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(stopped, SIGTERM);
  WaitForExit(stopped, 30);
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(stale fence token (\d+): the range was already )"
                                                R"(written with token (\d+))")))
      << "the resumed worker's write was not refused by the fence:\n"
      << log;

  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << report->Render();
  auto blocks = conn->Query("SELECT count(*), count(DISTINCT number) FROM blocks");
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(blocks->Get(0, 0), std::to_string(devnet.last_block() + 1));
  EXPECT_EQ(blocks->Get(0, 1), std::to_string(devnet.last_block() + 1));
  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

}  // namespace
}  // namespace gapless::e2e

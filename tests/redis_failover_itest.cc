// The fleet follows a manual failover of its coordination Redis, end to end, without Sentinel.
// A private primary P and a real replica R (REPLICAOF); `gapless run` and a `gapless worker`
// index the devnet with --redis redis://R,P: the replica listed first, so every connect asks it
// ROLE and passes it over (the lock node is the same URL). Mid-run R is paused with SIGSTOP, so
// it lags: `gapless status` shows the lag with its warning while the fleet goes on writing P.
// Then R resumes and is promoted, and P is demoted, the way Sentinel does it
// (testing/redis_failover.h). What an operator relies on:
//  - the run finishes with every block present exactly once: rows equal a clean run;
//  - the coordination keys are on the new primary (the frontier at the last block);
//  - coordination never read the replica: before its promotion R served no GET, EVALSHA, HGETALL,
//    LLEN or ZRANGE (only ROLE probes and P's replication stream), and after its demotion P
//    served none either.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "devnet_util.h"
#include "testing/redis_failover.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

const std::string kAnvilUrl = GAPLESS_TEST_ANVIL_URL;
const std::string kManifest = GAPLESS_TEST_DEVNET_MANIFEST;

using testing_util::WaitFor;

// Commands that read coordination state: none of them may reach a replica.
const std::vector<std::string> kReads = {"get",  "evalsha", "eval",   "hgetall", "hget",
                                         "llen", "lrange",  "zrange", "exists",  "xrange"};

TEST_F(DbTest, TheFleetFollowsAManualRedisFailoverWithNoGapAndNoDuplicate) {
  const Devnet devnet = OpenDevnet(kAnvilUrl, kManifest);
  auto p = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto r = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  RedisServer& primary = **p;
  RedisServer& replica = **r;
  RedisOptions any;
  any.require_primary = false;
  auto p_conn = RedisConn::Connect(primary.url(), any);
  auto r_conn = RedisConn::Connect(replica.url(), any);
  ASSERT_TRUE(p_conn.ok() && r_conn.ok());
  RedisConn& p_admin = **p_conn;
  RedisConn& r_admin = **r_conn;
  ASSERT_TRUE(r_admin.Command({"REPLICAOF", "127.0.0.1", std::to_string(primary.port())}).ok());
  ASSERT_TRUE(WaitForReplicaLink(r_admin, 10'000).ok());
  ASSERT_TRUE(r_admin.Command({"CONFIG", "RESETSTAT"}).ok());

  const std::string p_addr = "127.0.0.1:" + std::to_string(primary.port());
  const std::string r_addr = "127.0.0.1:" + std::to_string(replica.port());
  const std::string fleet_url = "redis://" + r_addr + "," + p_addr;
  FleetFlags flags;
  flags.workers = "2";
  flags.log_level = "warn";
  flags.extra = {"--batch", "1", "--rate-limit", "8"};  // a run of ~20 s
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/redis_failover_itest.log";
  std::remove(log.c_str());
  pid_t run =
      Spawn(FleetCommand("run", devnet, db_.url(), fleet_url, devnet.last_block(), flags), log);
  FleetFlags worker_flags = flags;
  worker_flags.workers = "1";
  pid_t worker = Spawn(
      FleetCommand("worker", devnet, db_.url(), fleet_url, devnet.last_block(), worker_flags), log);
  auto stop_all = [&] {
    for (pid_t pid : {run, worker}) {
      if (pid > 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
    }
  };
  const int64_t total_ranges = static_cast<int64_t>(devnet.last_block() / 2 + 1);
  if (!WaitFor([&] { return CommittedRangeCount(pool_.get()) >= 5; }, 60'000)) {
    stop_all();
    FAIL() << "the fleet committed nothing; see " << log;
  }

  // The replica paused: it stops acknowledging, the fleet goes on through P, and status warns.
  replica.Pause();
  const int64_t at_pause = CommittedRangeCount(pool_.get());
  auto status = [&] {
    return RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis",
                         "redis://" + p_addr + "," + r_addr, "--log-level", "warn"});
  };
  std::string lagging;
  bool warned = WaitFor(
      [&] {
        auto [code, out] = status();
        lagging = out;
        return code == 0 && out.find("WARNING: lagging more than 5 s") != std::string::npos;
      },
      20'000);
  const int64_t during_pause = CommittedRangeCount(pool_.get());
  replica.Resume();
  EXPECT_TRUE(warned) << lagging;
  EXPECT_NE(lagging.find("replica " + r_addr), std::string::npos) << lagging;
  EXPECT_NE(lagging.find("redis primary          " + p_addr), std::string::npos) << lagging;
  EXPECT_GT(during_pause, at_pause) << "the fleet stalled while the replica was paused";

  // Before the failover: the replica was asked ROLE (it is listed first) and read nothing.
  EXPECT_GE(CommandStat(r_admin, "role", "calls"), 1) << "the replica was never probed";
  for (const std::string& command : kReads) {
    EXPECT_EQ(CommandStat(r_admin, command, "calls"), 0) << command << " on the replica";
  }

  // The failover, mid-run: R promoted, P demoted and its clients closed.
  Status st = ManualFailover(p_admin, r_admin, "127.0.0.1", replica.port());
  const int64_t at_failover = CommittedRangeCount(pool_.get());
  if (!st.ok()) {
    stop_all();
    FAIL() << st.ToString();
  }
  EXPECT_LT(at_failover, total_ranges) << "the run was over before the failover";

  const int run_exit = WaitForExit(run, 180);
  run = -1;
  kill(worker, SIGTERM);
  WaitForExit(worker, 30);
  worker = -1;
  ASSERT_EQ(run_exit, 0) << "the run failed or did not finish; see " << log;
  EXPECT_GT(CommittedRangeCount(pool_.get()), at_failover);

  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
  EXPECT_EQ(LoadFrontier(*conn).value(), std::optional<uint64_t>(devnet.last_block() + 1));

  // The coordination state lives on the new primary, and the demoted one was not read.
  EXPECT_EQ(InfoField(r_admin, "replication", "role"), "master");
  EXPECT_EQ(InfoField(p_admin, "replication", "role"), "slave");
  const Keys keys = FleetKeys(pool_.get(), devnet.chain_id());
  auto frontier = r_admin.Command({"GET", keys.frontier()});
  ASSERT_TRUE(frontier.ok());
  EXPECT_EQ(frontier->str, std::to_string(devnet.last_block() + 1));
  EXPECT_GT(CommandStat(r_admin, "evalsha", "calls"), 0) << "coordination moved to the new primary";
  for (const std::string& command : kReads) {
    EXPECT_EQ(CommandStat(p_admin, command, "calls"), 0) << command << " on the demoted server";
  }
  std::printf("redis failover: %lld of %lld ranges committed at the pause, %lld at the failover\n",
              static_cast<long long>(at_pause), static_cast<long long>(total_ranges),
              static_cast<long long>(at_failover));

  ExpectEqualsACleanRun(devnet, pool_.get(), devnet.last_block());
}

// A fleet process (re)started while its coordination Redis is down (restarting, failing over)
// waits for it instead of exiting (chaos seed 170: a worker restarted during a Redis restart
// exited twice). `gapless run` is started with the server killed; it is still running 3 s
// later, and once the server is back on its port the run indexes the whole range.
TEST_F(DbTest, AFleetProcessStartedWhileRedisIsDownWaitsForIt) {
  const Devnet devnet = OpenDevnet(kAnvilUrl, kManifest);
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->Kill();
  FleetFlags flags;
  flags.log_level = "warn";
  const std::string log = std::string(GAPLESS_BINARY_DIR) + "/redis_down_at_start_itest.log";
  std::remove(log.c_str());
  pid_t run = Spawn(
      FleetCommand("run", devnet, db_.url(), (*server)->url(), devnet.last_block(), flags), log);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  int status = 0;
  const pid_t exited = waitpid(run, &status, WNOHANG);
  if (exited == run) {
    FAIL() << "the run exited while Redis was down (status " << status << "); see " << log;
  }
  Status restarted = (*server)->Restart();
  if (!restarted.ok()) {
    kill(run, SIGKILL);
    waitpid(run, nullptr, 0);
    FAIL() << restarted.ToString();
  }
  ASSERT_EQ(WaitForExit(run, 180), 0) << "the run failed or did not finish; see " << log;
  auto conn = pool_->Acquire();
  auto report = Verify(*conn, 0, devnet.last_block());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->Render();
}

}  // namespace
}  // namespace gapless::e2e

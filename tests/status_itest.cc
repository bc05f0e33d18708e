// `gapless status` on the coordination Redis itself: key count and memory, and a replica's
// replication lag as the primary sees it, with a warning once it lags more than 5 s (a real
// replica started by the test with REPLICAOF, then paused with SIGSTOP).
#include <gtest/gtest.h>

#include "coord/redis.h"
#include "devnet_util.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

using testing_util::WaitFor;

TEST_F(DbTest, StatusShowsRedisMemoryAndWarnsAboutALaggingReplica) {
  auto primary = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(primary.ok()) << primary.status().ToString();
  auto replica = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  RedisOptions any;
  any.require_primary = false;
  auto admin = RedisConn::Connect((*replica)->url(), any);
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE(
      (*admin)->Command({"REPLICAOF", "127.0.0.1", std::to_string((*primary)->port())}).ok());
  auto status = [&] {
    return RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis", (*primary)->url(),
                         "--chain-id", "1", "--log-level", "warn"});
  };
  const std::string replica_line = "replica 127.0.0.1:" + std::to_string((*replica)->port());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [code, out] = status();
        return code == 0 && out.find(replica_line + "  online") != std::string::npos;
      },
      10'000));
  auto [code, out] = status();
  EXPECT_NE(out.find("redis                  "), std::string::npos) << out;
  EXPECT_NE(out.find(" keys, "), std::string::npos) << out;
  EXPECT_EQ(out.find("WARNING"), std::string::npos) << out;

  // Paused, the replica stops acknowledging: after 5 s status warns.
  (*replica)->Pause();
  auto writer = RedisConn::Connect((*primary)->url());
  ASSERT_TRUE(writer.ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*writer)->Command({"SET", "k" + std::to_string(i), "v"}).ok());
  }
  bool warned = WaitFor(
      [&] {
        auto [c, o] = status();
        return o.find("WARNING: lagging more than 5 s") != std::string::npos;
      },
      15'000);
  (*replica)->Resume();
  EXPECT_TRUE(warned) << status().second;
}

}  // namespace
}  // namespace gapless::e2e

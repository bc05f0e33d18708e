// `gapless status` on the coordination Redis itself: key count and memory, a replica's
// replication lag as the primary sees it, with a warning once it lags more than 5 s (a real
// replica started by the test with REPLICAOF, then paused with SIGSTOP); display data read from a
// --redis-replica; the warning when the key count keeps growing (a fabricated history); the
// partitions still waiting for their secondary indexes; committed blocks lacking a dataset.
#include <gtest/gtest.h>

#include "coord/key_watch.h"
#include "coord/redis.h"
#include "coord/registry.h"
#include "devnet_util.h"
#include "node/app.h"
#include "store/datasets.h"
#include "store/partition_indexes.h"
#include "store/partitions.h"
#include "testing/redis_failover.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

using testing_util::WaitFor;

// `gapless status` (--json) over the database and the coordination Redis: (exit code, output).
auto StatusOutput(const std::string& db, const std::string& redis, bool json) {
  std::vector<std::string> args = {GaplessBinary(), "status", "--db",       db,
                                   "--redis",       redis,    "--chain-id", "1",
                                   "--log-level",   "warn"};
  if (json) args.push_back("--json");
  return RunForOutput(args);
}

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

// The backfill index strategy is visible: partitions made with their primary key only (as the
// leader makes those far behind the head) are counted, with the lowest one, in the text and JSON
// reports until their secondary indexes are built.
TEST_F(DbTest, StatusShowsPartitionsWaitingForTheirIndexes) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  auto pool = OpenDatabase(db_.url(), 1, 10);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto conn = (*pool)->Acquire();
  ASSERT_TRUE(EnsurePartitions(*conn, 0, 25).ok());  // [0,10), [10,20), [20,30)
  auto status = [&](bool json) { return StatusOutput(db_.url(), (*redis)->url(), json); };
  auto [code, out] = status(false);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("indexes                3 partitions without their lookup indexes yet (the "
                     "lowest at block 0)"),
            std::string::npos)
      << out;
  auto [json_code, json] = status(true);
  ASSERT_EQ(json_code, 0) << json;
  EXPECT_NE(json.find("\"indexes\":{\"partitions_unindexed\":3,\"lowest_unindexed\":0}"),
            std::string::npos)
      << json;
  for (uint64_t start : {0, 10, 20}) {
    auto built = BuildPartitionIndexes(*conn, start);
    ASSERT_TRUE(built.ok() && *built) << start;
  }
  auto [after_code, after] = status(false);
  EXPECT_NE(after.find("indexes                every partition indexed"), std::string::npos)
      << after;
}

// Committed blocks without a dataset a run asked for over them (a `--traces` run stopped before
// its backfill was done): status names them and the `index` run that writes them, as verify does.
TEST_F(DbTest, StatusNamesCommittedBlocksLackingADatasetARunAskedFor) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  auto pool = OpenDatabase(db_.url(), 1, 10);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto conn = (*pool)->Acquire();
  ASSERT_TRUE(conn->Exec("INSERT INTO indexed_ranges (from_block, to_block, datasets) VALUES "
                         "(0, 9, '{blocks,traces}'), (10, 19, '{blocks}')")
                  .ok());
  ASSERT_TRUE(RecordDatasetRequest(*conn, Datasets().Add(kTracesDataset), 0, 19).ok());
  auto status = [&](bool json) { return StatusOutput(db_.url(), (*redis)->url(), json); };
  auto [code, out] = status(false);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("datasets               blocks 10-19 lack traces: runs asked for them; "
                     "`gapless index --from 10 --to 19 --traces` writes them"),
            std::string::npos)
      << out;
  auto [json_code, json] = status(true);
  ASSERT_EQ(json_code, 0) << json;
  EXPECT_NE(json.find("\"missing_datasets\":[{\"dataset\":\"traces\",\"from\":10,\"to\":19}]"),
            std::string::npos)
      << json;
  ASSERT_TRUE(
      conn->Exec("UPDATE indexed_ranges SET datasets = '{blocks,traces}' WHERE from_block = 10")
          .ok());
  auto [after_code, after] = status(false);
  EXPECT_NE(after.find("datasets               every dataset a run asked for is written"),
            std::string::npos)
      << after;
}

// A replica given with --redis-replica serves the display data: the workers, the queue, the Redis
// frontier, the key count are read there (its command counters move, the primary's do not),
// with a line naming it and its lag. A replica that does not answer (paused) or follows another
// primary is named in a warning, and status still finishes.
TEST_F(DbTest, StatusReadsDisplayDataFromTheRedisReplica) {
  auto primary = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(primary.ok()) << primary.status().ToString();
  auto replica = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  RedisOptions any;
  any.require_primary = false;
  auto p_admin = RedisConn::Connect((*primary)->url(), any);
  auto r_admin = RedisConn::Connect((*replica)->url(), any);
  ASSERT_TRUE(p_admin.ok() && r_admin.ok());
  ASSERT_TRUE(
      (*r_admin)->Command({"REPLICAOF", "127.0.0.1", std::to_string((*primary)->port())}).ok());
  ASSERT_TRUE(WaitForReplicaLink(**r_admin, 10'000).ok());
  // What the fleet would have written: a live worker and a frontier.
  const Keys keys = FleetKeys(pool_.get(), 1);
  Registry registry(p_admin->get(), &keys);
  ASSERT_TRUE(registry.Beat({"worker-7", "host-a", 4242, "100-199", 3.5, 0}, 60'000).ok());
  ASSERT_TRUE((*p_admin)->Command({"SET", keys.frontier(), "100"}).ok());
  auto synced = (*p_admin)->Command({"WAIT", "1", "5000"});
  ASSERT_TRUE(synced.ok());
  ASSERT_EQ(synced->integer, 1);
  ASSERT_TRUE((*p_admin)->Command({"CONFIG", "RESETSTAT"}).ok());
  ASSERT_TRUE((*r_admin)->Command({"CONFIG", "RESETSTAT"}).ok());

  auto status = [&] {
    return RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis", (*primary)->url(),
                         "--redis-replica", (*replica)->url(), "--chain-id", "1", "--log-level",
                         "warn"});
  };
  const std::string replica_addr = "127.0.0.1:" + std::to_string((*replica)->port());
  auto [code, out] = status();
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("display data           from replica " + replica_addr +
                     " (--redis-replica): link up, "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("keys, "), std::string::npos) << out;
  EXPECT_NE(out.find("on the replica " + replica_addr), std::string::npos) << out;
  EXPECT_NE(out.find("worker-7"), std::string::npos) << out;
  EXPECT_NE(out.find("frontier (Redis)       block 99"), std::string::npos) << out;
  EXPECT_EQ(out.find("WARNING"), std::string::npos) << out;
  // Read on the replica, not on the primary.
  EXPECT_GE(CommandStat(**r_admin, "hgetall", "calls"), 1) << "workers";
  EXPECT_GE(CommandStat(**r_admin, "llen", "calls"), 2) << "queue depths";
  EXPECT_GE(CommandStat(**r_admin, "get", "calls"), 1) << "frontier";
  EXPECT_GE(CommandStat(**r_admin, "dbsize", "calls"), 1) << "key count";
  EXPECT_EQ(CommandStat(**p_admin, "hgetall", "calls"), 0);
  EXPECT_EQ(CommandStat(**p_admin, "llen", "calls"), 0);
  // (GET is not compared: the leader's section reads the lock node, here the primary, with GET.)
  EXPECT_EQ(CommandStat(**r_admin, "evalsha", "rejected_calls"), 0);
  EXPECT_EQ(CommandStat(**r_admin, "hdel", "rejected_calls"), 0) << "nothing written there";

  // Paused: status falls back to the primary, says so, and does not hang.
  (*replica)->Pause();
  const int64_t started = testing_util::NowMs();
  auto [paused_code, paused_out] = status();
  const int64_t took_ms = testing_util::NowMs() - started;
  (*replica)->Resume();
  EXPECT_EQ(paused_code, 0) << paused_out;
  EXPECT_NE(paused_out.find("display data           from the primary: --redis-replica "
                            "unavailable"),
            std::string::npos)
      << paused_out;
  EXPECT_NE(paused_out.find("worker-7"), std::string::npos) << paused_out;
  EXPECT_LT(took_ms, 10'000);

  // Following another primary (none at that port): a warning naming it.
  auto gone = RedisServer::Start();  // a port where nothing listens once it is killed
  ASSERT_TRUE(gone.ok());
  const int gone_port = (*gone)->port();
  (*gone)->Kill();
  ASSERT_TRUE((*r_admin)->Command({"REPLICAOF", "127.0.0.1", std::to_string(gone_port)}).ok());
  auto [other_code, other_out] = status();
  EXPECT_EQ(other_code, 0) << other_out;
  EXPECT_NE(other_out.find("link down"), std::string::npos) << other_out;
  EXPECT_NE(other_out.find("WARNING: the primary 127.0.0.1:" + std::to_string((*primary)->port()) +
                           " lists no replica at this port (this one follows 127.0.0.1:" +
                           std::to_string(gone_port) + ")"),
            std::string::npos)
      << other_out;
}

// The key-count history: each status run adds a sample (at most one a minute). A history that
// rose at every one of its last 6 samples over >= 10 minutes gets a warning naming the prefix
// that holds the keys and how many of them lack a TTL; a history that fell does not.
TEST_F(DbTest, StatusWarnsWhenTheKeyCountKeepsGrowing) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto redis = RedisConn::Connect((*server)->url());
  ASSERT_TRUE(redis.ok());
  const Keys keys = FleetKeys(pool_.get(), 1);
  auto time = (*redis)->Command({"TIME"});
  ASSERT_TRUE(time.ok());
  const int64_t now_ms = std::stoll(time->elements[0].str) * 1000;
  auto status = [&] {
    return RunForOutput({GaplessBinary(), "status", "--db", db_.url(), "--redis", (*server)->url(),
                         "--chain-id", "1", "--log-level", "warn"});
  };
  // Five samples of the last 50 minutes, falling: no warning, whatever this run adds.
  for (int i = 5; i >= 1; --i) {
    ASSERT_TRUE(
        (*redis)
            ->Command({"LPUSH", keys.key_count_samples(),
                       std::to_string(now_ms - i * 10 * 60'000) + ":" + std::to_string(10'000 - i)})
            .ok());
  }
  auto [code, out] = status();
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("key count history    6 samples over 50."), std::string::npos) << out;
  EXPECT_NE(out.find("no steady growth"), std::string::npos) << out;
  EXPECT_EQ(out.find("WARNING"), std::string::npos) << out;

  // A leak: 300 keys without a TTL, and a history that rose at every sample before it.
  ASSERT_TRUE((*redis)->Command({"DEL", keys.key_count_samples()}).ok());
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE((*redis)->Command({"SET", "leaky:" + std::to_string(i), "v"}).ok());
  }
  for (int i = 5; i >= 1; --i) {
    ASSERT_TRUE((*redis)
                    ->Command({"LPUSH", keys.key_count_samples(),
                               std::to_string(now_ms - i * 10 * 60'000) + ":" +
                                   std::to_string(100 - i * 10)})
                    .ok());
  }
  auto [grew_code, grew] = status();
  ASSERT_EQ(grew_code, 0) << grew;
  EXPECT_NE(grew.find("WARNING: the key count rose at each of the last 6 samples over 50."),
            std::string::npos)
      << grew;
  EXPECT_NE(grew.find(", 50 -> 30"), std::string::npos) << grew << " (300 keys and the list)";
  EXPECT_NE(grew.find("leaky:*"), std::string::npos) << grew;
  EXPECT_NE(grew.find("20 of 20 sampled without a TTL"), std::string::npos) << grew;
  // The history stays bounded: one more run within the minute adds nothing.
  EXPECT_EQ(status().first, 0);
  auto len = (*redis)->Command({"LLEN", keys.key_count_samples()});
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(len->integer, 6);
}

}  // namespace
}  // namespace gapless::e2e

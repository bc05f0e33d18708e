// Unit tests of the coordination layer that need no server: key layout, SHA1, embedded scripts,
// URL errors.
#include "coord/redis.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "coord/keys.h"
#include "coord/lock_nodes.h"

namespace gapless {
namespace {

// Every key of one chain and database shares one hash tag (one cluster slot); another database of
// the same chain gets another one.
TEST(KeysTest, OneHashTagPerChainAndDatabase) {
  Keys a(1, "0a1b2c3d4e5f");
  Keys b(1, "ffffffffffff");
  EXPECT_EQ(a.prefix(), "gapless:{chain-1-db-0a1b2c3d4e5f}:");
  EXPECT_NE(a.prefix(), b.prefix());
  EXPECT_EQ(Keys(1).prefix(), "gapless:{chain-1}:");
  for (const std::string& key :
       {a.pending(), a.processing(), a.leases(), a.fence_counter(), a.fence_dataset(),
        a.completed(), a.frontier(), a.dlq(), a.expiries(), a.election_lock(), a.leader_epoch(),
        a.leader_term(), a.head_log(), a.registry(), a.registry_expiries(), a.rate_limit("rpc")}) {
    EXPECT_EQ(key.rfind(a.prefix(), 0), 0u) << key;
  }
}

TEST(Sha1Test, KnownVectors) {
  EXPECT_EQ(Sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(Sha1Hex(std::string(1'000'000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // 55, 56 and 64 bytes: the padding edge cases.
  EXPECT_EQ(Sha1Hex(std::string(55, 'a')), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  EXPECT_EQ(Sha1Hex(std::string(56, 'a')), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  EXPECT_EQ(Sha1Hex(std::string(64, 'a')), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

TEST(RedisScriptTest, EmbeddedScriptsAreFoundWithTheirSha) {
  const RedisScript& s = LoadScript("queue_claim.lua");
  EXPECT_EQ(s.name(), "queue_claim.lua");
  EXPECT_NE(s.source().find("KEYS[1]"), std::string::npos);
  EXPECT_EQ(s.sha1(), Sha1Hex(s.source()));
  EXPECT_EQ(&s, &LoadScript("queue_claim.lua"));  // one instance per process
}

TEST(RedisScriptDeathTest, MissingScriptAborts) {
  EXPECT_DEATH(LoadScript("no_such_script.lua"), "no embedded Lua script");
}

TEST(RedisConnTest, BadUrlsAreFailedPrecondition) {
  for (const char* url :
       {"http://127.0.0.1:6379", "redis://", "redis://host:notaport", "redis://host:70000",
        "redis://host:6379/x", "redis://[::1", "redis://a:1,,b:2", "redis://a:1,", "redis://,a:1",
        "redis://a:1,b:notaport", "redis://[::1]x", "redis://host?cacertfile=/ca.pem",
        "rediss://host?verify=no", "rediss://host?password=x", "rediss://host?keyfile=/k.pem"}) {
    auto c = RedisConn::Connect(url);
    ASSERT_FALSE(c.ok()) << url;
    EXPECT_EQ(c.status().code(), Code::kFailedPrecondition) << url << ": " << c.status().ToString();
  }
}

TEST(RedisUrlTest, OneServer) {
  auto u = ParseRedisUrl("redis://user:p%40ss@redis.example:6380/3");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->user, "user");
  EXPECT_EQ(u->password, "p@ss");
  ASSERT_EQ(u->hosts.size(), 1u);
  EXPECT_EQ(u->hosts[0].host, "redis.example");
  EXPECT_EQ(u->hosts[0].port, 6380);
  EXPECT_EQ(u->db, 3);
  EXPECT_EQ(u->Describe(), "redis.example:6380");
  auto plain = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->Describe(), "localhost:6379");
  EXPECT_EQ(plain->db, 0);
}

// rediss://: TLS, its settings in the query (amqps:// names), for every server of the URL; the
// certificate verified unless verify=verify_none.
TEST(RedisUrlTest, RedissTakesTlsSettingsFromTheQuery) {
  auto plain = ParseRedisUrl("redis://h:6379/1");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls.enabled);
  auto bare = ParseRedisUrl("rediss://:pw@redis.example:6380");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_TRUE(bare->tls.enabled);
  EXPECT_TRUE(bare->tls.verify);
  EXPECT_EQ(bare->tls.cacertfile, "");  // the system's CAs
  EXPECT_EQ(bare->password, "pw");
  EXPECT_EQ(bare->hosts[0].port, 6380);
  auto full = ParseRedisUrl(
      "rediss://u:p%3Fw@a:1,b:2/3?cacertfile=/etc/ca%20dir/ca.pem&certfile=/c.pem&keyfile=/k.pem"
      "&verify=verify_none");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->password, "p?w");
  EXPECT_EQ(full->db, 3);
  ASSERT_EQ(full->hosts.size(), 2u);
  EXPECT_EQ(full->hosts[1].port, 2);
  EXPECT_EQ(full->tls.cacertfile, "/etc/ca dir/ca.pem");
  EXPECT_EQ(full->tls.certfile, "/c.pem");
  EXPECT_EQ(full->tls.keyfile, "/k.pem");
  EXPECT_FALSE(full->tls.verify);
  auto unknown = ParseRedisUrl("rediss://h?sslmode=require");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("sslmode"), std::string::npos)
      << unknown.status().ToString();
}

// A primary and its replica in one URL (failover without Sentinel): every server with its own
// port (6379 when left out, IPv6 in brackets), one set of credentials and one db for all.
TEST(RedisUrlTest, SeveralServersShareCredentialsAndDb) {
  auto u = ParseRedisUrl("redis://:secret@10.0.0.1:6379,10.0.0.2,[::1]:6390/2");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->password, "secret");
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->db, 2);
  ASSERT_EQ(u->hosts.size(), 3u);
  EXPECT_EQ(u->hosts[0].host, "10.0.0.1");
  EXPECT_EQ(u->hosts[0].port, 6379);
  EXPECT_EQ(u->hosts[1].host, "10.0.0.2");
  EXPECT_EQ(u->hosts[1].port, 6379);
  EXPECT_EQ(u->hosts[2].host, "::1");
  EXPECT_EQ(u->hosts[2].port, 6390);
  EXPECT_EQ(u->Describe(), "10.0.0.1:6379,10.0.0.2:6379,[::1]:6390");
}

// What gapless prints about a URL (logs, status, a bus's name) never carries its password, with
// one server or several; the connection names the server in use apart from the whole list.
TEST(RedisUrlTest, DescribeNeverShowsThePassword) {
  for (const char* url : {"redis://admin:hunter2@h1:1,h2:2/1", "redis://hunter2@h1:1"}) {
    auto c = RedisConn::Connect(url, {}, /*connect_now=*/false);
    ASSERT_TRUE(c.ok()) << url;
    EXPECT_EQ((*c)->Describe().find("hunter2"), std::string::npos) << (*c)->Describe();
    EXPECT_EQ((*c)->Describe().find("admin"), std::string::npos) << (*c)->Describe();
  }
  auto c = RedisConn::Connect("redis://admin:hunter2@h1:1,h2:2/1", {}, /*connect_now=*/false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Describe(), "h1:1,h2:2");
  EXPECT_EQ((*c)->DescribeCurrent(), "h1:1") << "the first server until another one answers";
}

// An operation is code of the caller's, which may refer to the caller's locals. A node that
// answers late must therefore neither start an operation after its caller stopped waiting nor
// leave one running when All returns (chaos seeds 201 and CI's seed 1: a head-log write that ran
// after WriteHead returned read freed arguments, and the leader aborted in vector::reserve).
TEST(LockNodesTest, AnOperationNeverRunsAfterItsCallerStoppedWaiting) {
  LockNodesOptions options;
  options.node_timeout_ms = 100;
  auto nodes = LockNodes::Open({"redis://127.0.0.1:1"}, options);  // the ops use no connection
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  std::atomic<bool> late_ran{false};
  auto slow_started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration slow_took{};
  std::thread slow([&] {
    (*nodes)->All([](RedisConn&) -> Result<RedisReply> {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      return RedisReply{};
    });
    slow_took = std::chrono::steady_clock::now() - slow_started;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    // Queued behind the slow one (busy for less than the timeout yet): not started in time.
    auto answers = (*nodes)->All([&](RedisConn&) -> Result<RedisReply> {
      late_ran = true;
      return RedisReply{};
    });
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0].status().code(), Code::kUnavailable);
  }
  slow.join();
  // Past the slow operation's end, when a queued one would run.
  std::this_thread::sleep_until(slow_started + std::chrono::milliseconds(600));
  EXPECT_FALSE(late_ran.load()) << "an operation ran after its caller had returned";
  EXPECT_GE(slow_took, std::chrono::milliseconds(400))
      << "All returned while its operation was still running";
}

}  // namespace
}  // namespace gapless

namespace gapless {
namespace {

TEST(SplitUrlListTest, SplitsOnCommasAndKeepsMultiHostUrlsWhole) {
  EXPECT_EQ(SplitUrlList("redis://a:1, redis://b:2"),
            (std::vector<std::string>{"redis://a:1", "redis://b:2"}));
  EXPECT_EQ(SplitUrlList("kafka://h1:9092,h2:9092,redis://r:6379"),
            (std::vector<std::string>{"kafka://h1:9092,h2:9092", "redis://r:6379"}));
  EXPECT_TRUE(SplitUrlList("").empty());
  // --lock-nodes / --events: a lock node (or a bus) that is a primary with its replica.
  EXPECT_EQ(SplitUrlList("redis://:pw@p:6379,r:6380/2, redis://n2:6379,redis://n3:6379"),
            (std::vector<std::string>{"redis://:pw@p:6379,r:6380/2", "redis://n2:6379",
                                      "redis://n3:6379"}));
  EXPECT_EQ(SplitUrlList("redis://p:6379,r:6380"),
            (std::vector<std::string>{"redis://p:6379,r:6380"}));
}

// One server must not count twice towards the lock-node quorum, also when a node is given as a
// primary with its replicas.
TEST(LockNodesTest, AServerInTwoNodesIsRefused) {
  auto nodes = LockNodes::Open({"redis://a:1,b:2", "redis://c:3", "redis://b:2"});
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(nodes.status().message().find("b:2 is given twice"), std::string::npos)
      << nodes.status().ToString();
  auto fine = LockNodes::Open({"redis://a:1,b:2", "redis://c:3", "redis://d:4"});
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ((*fine)->describe(0), "a:1,b:2");
}

}  // namespace
}  // namespace gapless

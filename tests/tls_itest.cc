// TLS to the servers gapless talks to, each a real server started by the test with TLS only and
// a throwaway CA (testing/tls_certs.h). PostgreSQL: a plain connection is refused by the server,
// sslmode=verify-full with another CA is refused by gapless (libpq), and with the right CA a
// whole `gapless index` of the devnet runs over TLS. Then a whole `gapless run` with events, with
// every server TLS only: PostgreSQL, the coordination Redis and three lock nodes (rediss://), and
// two buses, RabbitMQ (amqps://) and Redis Streams (rediss://), after which gapless refuses each
// of those servers presented with another CA. And verification on by default: a PostgreSQL URL
// without sslmode to a server off the loopback is verified against the system's CAs. (RabbitMQ's
// and Redis's own TLS checks, at the library, are in amqp_bus_itest and coord/redis_itest.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "devnet_util.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "fake_node.h"
#include "store/pg.h"
#include "testing/pg_server.h"
#include "testing/rabbitmq_server.h"
#include "testing/redis_server.h"
#include "testing/tls_certs.h"

namespace gapless::e2e {
namespace {

TEST(TlsTest, PostgresqlOverTlsOnlyWithVerifyFull) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/tls_itest-certs";
  std::filesystem::remove_all(dir);
  auto certs = MakeTlsCertificates(dir);
  ASSERT_TRUE(certs.ok()) << certs.status().ToString();
  auto server = PgServer::StartTls(*certs);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string base = (*server)->url("postgres");
  const std::string verified = base + "?sslmode=verify-full&sslrootcert=" + certs->ca;

  // The server takes TLS only.
  auto plain = PgConn::Connect(base + "?sslmode=disable");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("no encryption"), std::string::npos)
      << plain.status().ToString();
  // A certificate that does not verify is refused.
  auto other = PgConn::Connect(base + "?sslmode=verify-full&sslrootcert=" + certs->other_ca);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("certificate verify failed"), std::string::npos)
      << other.status().ToString();
  // The right CA: connected, and the connection is encrypted.
  auto conn = PgConn::Connect(verified);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto ssl = (*conn)->Query("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
  ASSERT_TRUE(ssl.ok()) << ssl.status().ToString();
  EXPECT_EQ(ssl->Get(0, 0), "true");

  // A whole index run over it.
  const std::string to = "20";
  auto [code, out] = RunAll({"index", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", verified, "--from",
                             "0", "--to", to, "--progress", "off"});
  ASSERT_EQ(code, 0) << out;
  auto blocks = (*conn)->Query("SELECT count(*) FROM blocks");
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(blocks->Get(0, 0), "21");
  // gapless refuses a server whose certificate does not verify.
  auto [refused, why] =
      RunAll({"verify", "--db", base + "?sslmode=verify-full&sslrootcert=" + certs->other_ca});
  EXPECT_NE(refused, 0) << why;
  EXPECT_NE(why.find("certificate verify failed"), std::string::npos) << why;
}

// An IPv4 address of this machine off the loopback (an interface that is up), or "" if none.
std::string AddressOffTheLoopback() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) found = text;
  }
  freeifaddrs(all);
  return found;
}

// Certificate verification is on by default: a PostgreSQL URL without sslmode, to a server off
// the loopback, is verified (verify-full) against the system's CAs, which do not hold the test
// CA: refused, by gapless too, with what to do. Naming the CA connects; sslmode=require is the
// opt-out. (A loopback server keeps libpq's default, prefer: TLS when offered, unverified.)
TEST(TlsTest, APostgresqlServerOffTheLoopbackIsVerifiedByDefault) {
  const std::string ip = AddressOffTheLoopback();
  if (ip.empty()) GTEST_SKIP() << "this machine has no IPv4 address off the loopback";
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/tls_itest-default-certs";
  std::filesystem::remove_all(dir);
  auto certs = MakeTlsCertificates(dir, "", ip);
  ASSERT_TRUE(certs.ok()) << certs.status().ToString();
  auto server = PgServer::StartTls(*certs, ip);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string remote =
      "postgresql://gapless@" + ip + ":" + std::to_string((*server)->port()) + "/postgres";
  auto encrypted = [](PgConn& conn) {
    auto ssl = conn.Query("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
    return ssl.ok() ? std::string(ssl->Get(0, 0)) : ssl.status().ToString();
  };

  auto refused = PgConn::Connect(remote);
  ASSERT_FALSE(refused.ok()) << "connected to a server whose certificate no system CA signed";
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("certificate verify failed"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("sslrootcert=PATH"), std::string::npos)
      << "the error says how to name the CA: " << refused.status().ToString();
  auto [code, out] = RunAll({"verify", "--db", remote});
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("certificate verify failed"), std::string::npos) << out;

  auto named = PgConn::Connect(remote + "?sslrootcert=" + certs->ca);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(encrypted(**named), "true");
  auto opted_out = PgConn::Connect(remote + "?sslmode=require");
  ASSERT_TRUE(opted_out.ok()) << opted_out.status().ToString();
  EXPECT_EQ(encrypted(**opted_out), "true");
  auto loopback = PgConn::Connect((*server)->url("postgres"));
  ASSERT_TRUE(loopback.ok()) << "the loopback keeps libpq's prefer: "
                             << loopback.status().ToString();
}

// The heights of the block.new events a subscriber receives within 30 s (acked).
std::set<std::string> BlockNewHeights(Subscriber& sub, size_t want) {
  std::set<std::string> heights;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (heights.size() < want && std::chrono::steady_clock::now() < end) {
    auto got = sub.Poll(500, 100);
    if (!got.ok()) continue;
    for (const Delivery& d : *got) {
      const std::string key = "\"block_number\":";
      const size_t at = d.body.find(key);
      if (at != std::string::npos) {
        const size_t from = at + key.size();
        heights.insert(d.body.substr(from, d.body.find_first_of(",}", from) - from));
      }
      EXPECT_TRUE(sub.Ack(d).ok());
    }
  }
  return heights;
}

// Composed: a whole fleet run (a leader candidate and workers, events on) with every server TLS
// only and verified: PostgreSQL; the coordination Redis (with a password, and a client
// certificate it checks) and three lock nodes over rediss://; events on RabbitMQ over amqps://
// and on Redis Streams over rediss://. The chain's blocks are all committed, every block.new is
// received on both buses, and the Redis password is in no output.
TEST(TlsTest, AWholeRunWithEveryServerOverTls) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/tls_itest-run-certs";
  std::filesystem::remove_all(dir);
  auto certs = MakeTlsCertificates(dir);
  ASSERT_TRUE(certs.ok()) << certs.status().ToString();
  auto pg = PgServer::StartTls(*certs);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  auto mq = RabbitMqServer::StartTls(*certs);
  if (!mq.ok() && mq.status().code() == Code::kFailedPrecondition) {
    GTEST_SKIP() << mq.status().ToString();
  }
  ASSERT_TRUE(mq.ok()) << mq.status().ToString();
  constexpr const char* kPassword = "Tls0nlyRedisPassw0rd";
  auto redis =
      RedisServer::StartTls(*certs, /*require_client_cert=*/true, {"--requirepass", kPassword});
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  std::string coordination = (*redis)->url();
  coordination.insert(std::string("rediss://").size(), std::string(":") + kPassword + "@");
  std::string lock_nodes;
  std::vector<std::unique_ptr<RedisServer>> nodes;
  for (int i = 0; i < 3; ++i) {
    auto node = RedisServer::StartTls(*certs);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    lock_nodes += (lock_nodes.empty() ? "" : ",") + (*node)->url();
    nodes.push_back(std::move(node).value());
  }
  auto streams = RedisServer::StartTls(*certs);
  ASSERT_TRUE(streams.ok()) << streams.status().ToString();
  const std::string db = (*pg)->url("postgres") + "?sslmode=verify-full&sslrootcert=" + certs->ca;
  const std::string amqps =
      "amqps://guest:guest@localhost:" + std::to_string((*mq)->port()) + "?cacertfile=" + certs->ca;
  const std::string rediss = (*streams)->url();
  constexpr uint64_t kChain = 31337, kTo = 20;
  SubscribeOptions options;
  options.group = "tls-check";
  options.topics = {EventTopic(kBlockNew, kChain)};
  auto on_amqp = OpenSubscriber(amqps, options);
  ASSERT_TRUE(on_amqp.ok()) << on_amqp.status().ToString();
  auto on_redis = OpenSubscriber(rediss, options);
  ASSERT_TRUE(on_redis.ok()) << on_redis.status().ToString();
  auto [code, out] = RunAll({"run",
                             "--rpc",
                             GAPLESS_TEST_ANVIL_URL,
                             "--db",
                             db,
                             "--redis",
                             coordination,
                             "--lock-nodes",
                             lock_nodes,
                             "--events",
                             amqps + "," + rediss,
                             "--from",
                             "0",
                             "--to",
                             std::to_string(kTo),
                             "--workers",
                             "2",
                             "--range-size",
                             "5",
                             "--progress",
                             "off"},
                            120'000);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.find(kPassword), std::string::npos) << "the Redis password is in the output";
  auto conn = PgConn::Connect(db);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto blocks = (*conn)->Query("SELECT count(*) FROM blocks");
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(blocks->Get(0, 0), std::to_string(kTo + 1));
  EXPECT_EQ(BlockNewHeights(**on_amqp, kTo + 1).size(), kTo + 1)
      << "block.new over amqps:// for every block";
  EXPECT_EQ(BlockNewHeights(**on_redis, kTo + 1).size(), kTo + 1)
      << "block.new over rediss:// for every block";
  // The leader held its term on the TLS lock nodes: each holds the head log.
  for (const auto& node : nodes) {
    auto c = RedisConn::Connect(node->url());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto keys = (*c)->Command({"DBSIZE"});
    ASSERT_TRUE(keys.ok()) << keys.status().ToString();
    EXPECT_GT(keys->integer, 0) << "lock node " << node->port() << " holds nothing";
  }

  // gapless itself refuses a Redis or RabbitMQ server whose certificate does not verify (another
  // CA), as a fatal error naming it, not one to wait out.
  auto other_ca = [&](std::string url) {
    const size_t at = url.find(certs->ca);
    if (at != std::string::npos) url.replace(at, certs->ca.size(), certs->other_ca);
    return url;
  };
  auto [refused, why] = RunAll(
      {"run", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", db, "--redis", other_ca(coordination),
       "--lock-nodes", lock_nodes, "--from", "0", "--to", std::to_string(kTo), "--progress", "off"},
      60'000);
  EXPECT_NE(refused, 0) << why;
  EXPECT_NE(why.find("does not verify"), std::string::npos) << why;
  for (const std::string& bus : {other_ca(amqps), other_ca(rediss)}) {
    auto [published, said] =
        RunAll({"events", "publish", "--bus", bus, "--chain-id", std::to_string(kChain), "--type",
                "contract.verified", "--identity", "0x01", "--payload", "{}"},
               60'000);
    EXPECT_NE(published, 0) << bus << ": " << said;
    EXPECT_NE(said.find("does not verify"), std::string::npos) << bus << ": " << said;
  }
}

}  // namespace
}  // namespace gapless::e2e

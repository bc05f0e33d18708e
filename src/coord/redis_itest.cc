// RedisConn against real servers: the shared test redis-server (GAPLESS_TEST_REDIS_URL), a
// private redis-server for server-wide changes, and raw TCP sockets that refuse or never answer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "coord/queue.h"
#include "coord/redis.h"
#include "testing/redis_failover.h"
#include "testing/redis_server.h"
#include "testing/redis_test_db.h"
#include "testing/tcp_proxy.h"
#include "testing/tls_certs.h"

namespace gapless {
namespace {

// A TCP socket bound to 127.0.0.1 on a free port. listening=true: the kernel completes
// handshakes (backlog) but nobody ever reads or answers — a half-open server.
class RawSocket {
 public:
  explicit RawSocket(bool listening) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (listening) {
      listen(fd_, 16);
    } else {
      close(fd_);  // nothing listens on the port any more: connections are refused
      fd_ = -1;
    }
  }
  ~RawSocket() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(RedisConnItest, ConnectRefusedIsUnavailableNamingTheAddress) {
  RawSocket closed(false);
  auto c = RedisConn::Connect("redis://127.0.0.1:" + std::to_string(closed.port()));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_NE(c.status().message().find("127.0.0.1:" + std::to_string(closed.port())),
            std::string::npos)
      << c.status().ToString();
}

TEST(RedisConnItest, SilentServerTimesOutInsteadOfHanging) {
  RawSocket silent(true);
  SimEnv env;
  RedisOptions options;
  options.command_timeout_ms = 200;
  options.max_attempts = 2;
  options.env = &env;  // backoff sleeps are virtual
  const std::string url = "redis://127.0.0.1:" + std::to_string(silent.port());
  // The connect's own ROLE check times out already.
  auto checked = RedisConn::Connect(url, options);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), Code::kUnavailable) << checked.status().ToString();
  // Without it, the first command does.
  options.require_primary = false;
  auto c = RedisConn::Connect(url, options);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto start = std::chrono::steady_clock::now();
  auto r = (*c)->Command({"PING"});
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos) << r.status().ToString();
  EXPECT_LT(elapsed, std::chrono::seconds(3));
  EXPECT_GT(env.slept_micros(), 0);  // it backed off before the second attempt
}

TEST(RedisConnItest, AuthAgainstServerWithoutPasswordIsFailedPrecondition) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  std::string url = db.url();
  url.insert(std::string("redis://").size(), "nobody:wrong@");
  auto c = RedisConn::Connect(url);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kFailedPrecondition) << c.status().ToString();
  EXPECT_EQ(c.status().message().find("wrong"), std::string::npos) << "leaks the password";
}

TEST(RedisConnItest, RepliesAreConverted) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RedisConn& c = *db.conn();
  std::string k = db.keys().prefix() + "t";
  auto set = c.Command({"SET", k, std::string("a\0b", 3)});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->type, RedisReply::Type::kStatus);
  EXPECT_EQ(set->str, "OK");
  auto get = c.Command({"GET", k});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->type, RedisReply::Type::kString);
  EXPECT_EQ(get->str, std::string("a\0b", 3));  // binary-safe
  auto missing = c.Command({"GET", k + "-missing"});
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->is_nil());
  auto wrong = c.Command({"LPUSH", k, "x"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Code::kInternal);
  EXPECT_NE(wrong.status().message().find("WRONGTYPE"), std::string::npos);
  auto n = c.Command({"RPUSH", k + "l", "a", "b"});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->type, RedisReply::Type::kInteger);
  EXPECT_EQ(n->integer, 2);
  auto range = c.Command({"LRANGE", k + "l", "0", "-1"});
  ASSERT_TRUE(range.ok());
  ASSERT_EQ(range->elements.size(), 2u);
  EXPECT_EQ(range->elements[1].str, "b");
}

TEST(RedisConnItest, ReconnectsAfterClientKillForIdempotentCommandsOnly) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  SimEnv env;
  RedisOptions options;
  options.env = &env;
  auto victim = db.Connect(options);
  ASSERT_TRUE(victim.ok());
  auto kill_victim = [&] {
    auto id = (*victim)->Command({"CLIENT", "ID"});
    ASSERT_TRUE(id.ok());
    auto killed = db.conn()->Command({"CLIENT", "KILL", "ID", std::to_string(id->integer)});
    ASSERT_TRUE(killed.ok()) << killed.status().ToString();
    ASSERT_EQ(killed->integer, 1);
  };
  kill_victim();
  auto pong = (*victim)->Command({"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->str, "PONG");

  // A non-idempotent command is not resent: it may have run.
  kill_victim();
  std::string k = db.keys().prefix() + "counter";
  auto incr = (*victim)->Command({"INCR", k}, /*idempotent=*/false);
  ASSERT_FALSE(incr.ok());
  EXPECT_EQ(incr.status().code(), Code::kUnavailable) << incr.status().ToString();
  // The next call reconnects.
  auto again = (*victim)->Command({"INCR", k}, /*idempotent=*/false);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->integer, 1);
}

TEST(RedisConnItest, EvalReloadsTheScriptAfterScriptFlush) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RedisConn& c = *db.conn();
  const RedisScript& s = LoadScript("queue_fence_floor.lua");
  const std::vector<std::string> keys = {db.keys().fence_counter(), db.keys().fence_dataset()};
  auto r = c.Eval(s, keys, {"7", "always"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->elements.at(0).integer, 7);
  ASSERT_TRUE(c.Command({"SCRIPT", "FLUSH"}).ok());
  auto exists = c.Command({"SCRIPT", "EXISTS", s.sha1()});
  ASSERT_TRUE(exists.ok());
  ASSERT_EQ(exists->elements.at(0).integer, 0);
  r = c.Eval(s, keys, {"9", "always"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->elements.at(0).integer, 9);
  exists = c.Command({"SCRIPT", "EXISTS", s.sha1()});
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(exists->elements.at(0).integer, 1);  // the locally computed SHA1 is Redis's
}

TEST(RedisConnItest, LuaErrorIsInternalNamingTheScript) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  auto r = db.conn()->Eval(LoadScript("queue_fence_floor.lua"), {db.keys().fence_counter()},
                           {"not-a-number"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_NE(r.status().message().find("queue_fence_floor.lua"), std::string::npos);
  EXPECT_NE(r.status().message().find("bad floor"), std::string::npos) << r.status().ToString();
}

TEST(RedisConnItest, CheckNoEvictionRefusesAnEvictingPolicy) {
  auto started_server = RedisServer::Start();
  ASSERT_TRUE(started_server.ok()) << started_server.status().ToString();
  RedisServer& server = **started_server;
  auto c = RedisConn::Connect(server.url());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->CheckNoEviction().ok());
  for (const char* policy : {"allkeys-lru", "volatile-ttl"}) {
    ASSERT_TRUE((*c)->Command({"CONFIG", "SET", "maxmemory-policy", policy}).ok());
    Status st = (*c)->CheckNoEviction();
    EXPECT_EQ(st.code(), Code::kFailedPrecondition) << policy;
    EXPECT_NE(st.message().find(policy), std::string::npos) << st.ToString();
  }
}

// FLUSHALL on a private server: the fencing counter restarts at 1 (below tokens PostgreSQL
// already recorded), which is why reconciliation floors it from PostgreSQL before any claim.
TEST(RedisConnItest, FlushAllRestartsTheFenceCounter) {
  auto started_server = RedisServer::Start();
  ASSERT_TRUE(started_server.ok()) << started_server.status().ToString();
  RedisServer& server = **started_server;
  auto c = RedisConn::Connect(server.url());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Queue q(c->get(), Keys(1));
  ASSERT_TRUE(q.Push(SplitRange(0, 299, 100)).ok());
  int64_t last = 0;
  for (int i = 0; i < 3; ++i) last = (**q.Claim("w", 60'000)).token;
  ASSERT_EQ(last, 3);
  ASSERT_TRUE((*c)->Command({"FLUSHALL"}).ok());
  ASSERT_TRUE((*c)->Command({"SCRIPT", "FLUSH"}).ok());  // as after a restart
  ASSERT_TRUE(q.Push(SplitRange(0, 99, 100)).ok());
  EXPECT_EQ((**q.Claim("w", 60'000)).token, 1);
  ASSERT_TRUE(q.FloorFenceCounter(last).ok());
  ASSERT_TRUE(q.Push(SplitRange(100, 199, 100)).ok());
  EXPECT_EQ((**q.Claim("w", 60'000)).token, last + 1);
}

// CONFIG renamed away (as on some managed services): the policy cannot be checked, and gapless
// refuses to run rather than risk evicted leases (DESIGN: refuse to run otherwise).
TEST(RedisConnItest, CheckNoEvictionRefusesWhenConfigIsUnavailable) {
  auto started_server = RedisServer::Start({"--rename-command", "CONFIG", ""});
  ASSERT_TRUE(started_server.ok()) << started_server.status().ToString();
  RedisServer& server = **started_server;
  auto c = RedisConn::Connect(server.url());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_FALSE((*c)->Command({"CONFIG", "GET", "maxmemory-policy"}).ok()) << "CONFIG is renamed";
  Status st = (*c)->CheckNoEviction();
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("127.0.0.1:" + std::to_string(server.port())), std::string::npos)
      << "names the server: " << st.ToString();
  EXPECT_NE(st.message().find("maxmemory-policy noeviction"), std::string::npos)
      << "says what to do: " << st.ToString();
}

// Error replies carry their error code as a typed reason; the code, not the message text, decides.
TEST(RedisConnItest, ErrorRepliesCarryTheirCodeAsReason) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  RedisConn& c = *db.conn();
  std::string k = db.keys().prefix() + "t";
  ASSERT_TRUE(c.Command({"SET", k, "x"}).ok());
  auto wrong = c.Command({"LPUSH", k, "y"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Code::kInternal);
  EXPECT_EQ(wrong.status().reason(), RedisErrorReason("WRONGTYPE"));

  // A script's refusal of corrupt state is DataLoss, whatever the rest of its text says.
  RedisScript corrupt("corrupt_test.lua",
                      "return redis.error_reply('CORRUPT corrupt_test: bad member x-y')");
  auto r = c.Eval(corrupt, {k}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), RedisErrorReason(kCorruptStateError));
  EXPECT_NE(r.status().message().find("bad member x-y"), std::string::npos);

  // An error that merely mentions READONLY or CORRUPT in its text is neither.
  RedisScript mentions("mentions_test.lua",
                       "return redis.error_reply('ERR READONLY CORRUPT are just words here')");
  SimEnv env;
  RedisOptions options;
  options.env = &env;
  auto fresh = db.Connect(options);
  ASSERT_TRUE(fresh.ok());
  r = (*fresh)->Eval(mentions, {k}, {}, /*idempotent=*/true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), RedisErrorReason("ERR"));
  EXPECT_EQ(env.slept_micros(), 0) << "not retried";
}

// Two private servers, B a replica of A (no delay before the full sync: the default waits 5 s for
// more replicas), with an admin connection to each that works whatever their roles.
struct ReplicatedPair {
  std::unique_ptr<RedisServer> a_server, b_server;
  std::unique_ptr<RedisConn> a_admin, b_admin;
};
void StartReplicatedPair(ReplicatedPair* pair) {
  auto a = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  pair->a_server = std::move(a).value();
  pair->b_server = std::move(b).value();
  RedisOptions any;  // the admin connections outlive role changes
  any.require_primary = false;
  auto admin_a = RedisConn::Connect(pair->a_server->url(), any);
  auto admin_b = RedisConn::Connect(pair->b_server->url(), any);
  ASSERT_TRUE(admin_a.ok() && admin_b.ok());
  pair->a_admin = std::move(admin_a).value();
  pair->b_admin = std::move(admin_b).value();
  ASSERT_TRUE(
      pair->b_admin->Command({"REPLICAOF", "127.0.0.1", std::to_string(pair->a_server->port())})
          .ok());
}

// The issue's test: "A redis-server promoted to primary while gapless is connected to the old one
// (REPLICAOF): gapless reconnects and writes only to the primary". Two private servers, A primary
// and B its replica; gapless reaches A through a proxy (the stable address of the fleet's Redis).
// The failover promotes B, demotes A to B's replica and points the address at B. gapless's open
// connection still leads to A, which answers the next write with READONLY; that must make it
// reconnect, through the proxy, to B, and write there.
TEST(RedisFailoverItest, AfterReplicaofGaplessReconnectsAndWritesOnlyToThePrimary) {
  ReplicatedPair pair;
  StartReplicatedPair(&pair);
  if (HasFatalFailure()) return;
  RedisServer& a = *pair.a_server;
  RedisServer& b = *pair.b_server;
  std::unique_ptr<RedisConn>* admin_a = &pair.a_admin;
  std::unique_ptr<RedisConn>* admin_b = &pair.b_admin;
  for (int i = 0; i < 200 && InfoField(**admin_b, "replication", "master_link_status") != "up";
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(InfoField(**admin_b, "replication", "master_link_status"), "up");

  TcpProxy proxy("127.0.0.1", a.port());
  SimEnv env;  // the reconnect backoff sleeps are virtual
  RedisOptions options;
  options.env = &env;
  auto conn = RedisConn::Connect("redis://127.0.0.1:" + std::to_string(proxy.port()), options);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto first = (*conn)->Command({"RPUSH", "writes", "before"}, /*idempotent=*/false);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto on_a = (*admin_a)->Command({"LRANGE", "writes", "0", "-1"});
  ASSERT_TRUE(on_a.ok());
  ASSERT_EQ(on_a->elements.size(), 1u) << "the first write went to A";
  auto acked = (*admin_a)->Command({"WAIT", "1", "5000"});  // B has it too
  ASSERT_TRUE(acked.ok());
  ASSERT_EQ(acked->integer, 1);

  // Fail over.
  ASSERT_TRUE((*admin_b)->Command({"REPLICAOF", "NO", "ONE"}).ok());
  ASSERT_TRUE((*admin_a)->Command({"REPLICAOF", "127.0.0.1", std::to_string(b.port())}).ok());
  proxy.SetTarget("127.0.0.1", b.port());
  ASSERT_EQ(InfoField(**admin_a, "replication", "role"), "slave");
  ASSERT_EQ(InfoField(**admin_b, "replication", "role"), "master");
  const int64_t rejected_before =
      std::max<int64_t>(0, CommandStat(**admin_a, "rpush", "rejected_calls"));

  // Not idempotent on purpose: a READONLY write did not run, so resending it is safe.
  for (int i = 0; i < 5; ++i) {
    auto r = (*conn)->Command({"RPUSH", "writes", "after-" + std::to_string(i)},
                              /*idempotent=*/false);
    ASSERT_TRUE(r.ok()) << "write " << i << ": " << r.status().ToString();
    EXPECT_EQ(r->integer, i + 2) << "each write lands once, after the ones before it";
  }
  auto on_b = (*admin_b)->Command({"LRANGE", "writes", "0", "-1"});
  ASSERT_TRUE(on_b.ok());
  std::vector<std::string> got;
  for (const auto& e : on_b->elements) got.push_back(e.str);
  EXPECT_EQ(got, (std::vector<std::string>{"before", "after-0", "after-1", "after-2", "after-3",
                                           "after-4"}));
  // A saw exactly one of them, on the old connection, and refused it; the client then connected
  // anew (a second connection through the proxy), which reached B.
  EXPECT_EQ(CommandStat(**admin_a, "rpush", "rejected_calls") - rejected_before, 1);
  EXPECT_EQ(proxy.connections_accepted(), 2);
  EXPECT_EQ(proxy.open_connections(), 1) << "the connection to A was closed";
}

// Coordination never talks to a replica: a connect (the first, or a reconnect after a failover
// moved the address) to a replica is refused with a typed reason, reads included, until the
// server is a primary again.
TEST(RedisFailoverItest, AReplicaIsRefusedAtConnectAndAtEveryReconnect) {
  ReplicatedPair pair;
  StartReplicatedPair(&pair);
  if (HasFatalFailure()) return;
  RedisServer& a = *pair.a_server;
  RedisServer& b = *pair.b_server;
  std::unique_ptr<RedisConn>* admin_a = &pair.a_admin;
  std::unique_ptr<RedisConn>* admin_b = &pair.b_admin;

  auto to_replica = RedisConn::Connect(b.url());
  ASSERT_FALSE(to_replica.ok());
  EXPECT_EQ(to_replica.status().code(), Code::kUnavailable);
  EXPECT_EQ(to_replica.status().reason(), ReplicaReason());
  EXPECT_NE(to_replica.status().message().find("replica"), std::string::npos);
  RedisOptions any;
  any.require_primary = false;
  EXPECT_TRUE(RedisConn::Connect(b.url(), any).ok()) << "tools may still read a replica";

  // Connected to A, which is then demoted: a read (GET is not refused by a replica) after the
  // connection broke reconnects, finds a replica and fails instead of reading it.
  SimEnv env;
  RedisOptions options;
  options.env = &env;
  options.max_attempts = 2;
  auto conn = RedisConn::Connect(a.url(), options);
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)->Command({"SET", "k", "v"}).ok());
  ASSERT_TRUE((*admin_b)->Command({"REPLICAOF", "NO", "ONE"}).ok());
  ASSERT_TRUE((*admin_a)->Command({"REPLICAOF", "127.0.0.1", std::to_string(b.port())}).ok());
  ASSERT_TRUE((*admin_a)->Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).ok());
  auto read = (*conn)->Command({"GET", "k"});
  ASSERT_FALSE(read.ok()) << "read from a replica";
  EXPECT_EQ(read.status().reason(), ReplicaReason()) << read.status().ToString();
  // Promoted again: the same connection object works.
  auto admin_a2 = RedisConn::Connect(a.url(), any);
  ASSERT_TRUE(admin_a2.ok());
  ASSERT_TRUE((*admin_a2)->Command({"REPLICAOF", "NO", "ONE"}).ok());
  auto again = (*conn)->Command({"GET", "k"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
}

// Failover without Sentinel: the URL names both servers, the replica first. Every connect takes
// the primary; after a manual failover the same RedisConn follows the new primary at its next
// reconnect, whether the demoted server answers its next write with READONLY or closes its
// clients (Sentinel's way), and nothing is read from or written to the demoted server.
TEST(RedisFailoverItest, AMultiServerUrlFollowsManualFailoversBothWays) {
  ReplicatedPair pair;
  StartReplicatedPair(&pair);
  if (HasFatalFailure()) return;
  RedisServer& a = *pair.a_server;
  RedisServer& b = *pair.b_server;
  RedisConn& admin_a = *pair.a_admin;
  RedisConn& admin_b = *pair.b_admin;
  ASSERT_TRUE(WaitForReplicaLink(admin_b, 10'000).ok());
  const std::string a_addr = "127.0.0.1:" + std::to_string(a.port());
  const std::string b_addr = "127.0.0.1:" + std::to_string(b.port());

  // No primary among the servers named (the replica under two names): a replica, as with one.
  auto replicas_only =
      RedisConn::Connect("redis://" + b_addr + ",localhost:" + std::to_string(b.port()));
  ASSERT_FALSE(replicas_only.ok());
  EXPECT_EQ(replicas_only.status().code(), Code::kUnavailable);
  EXPECT_EQ(replicas_only.status().reason(), ReplicaReason()) << replicas_only.status().ToString();

  SimEnv env;  // the reconnect backoff sleeps are virtual
  RedisOptions options;
  options.env = &env;
  auto connected = RedisConn::Connect("redis://" + b_addr + "," + a_addr, options);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  RedisConn& conn = **connected;
  EXPECT_EQ(conn.DescribeCurrent(), a_addr) << "the replica listed first is passed over";
  EXPECT_EQ(conn.Describe(), b_addr + "," + a_addr);
  ASSERT_TRUE(admin_b.Command({"CONFIG", "RESETSTAT"}).ok());
  auto list = [&] {
    auto r = conn.Command({"LRANGE", "writes", "0", "-1"});
    std::vector<std::string> out;
    if (r.ok()) {
      for (const auto& e : r->elements) out.push_back(e.str);
    }
    return out;
  };
  auto first = conn.Command({"RPUSH", "writes", "before"}, /*idempotent=*/false);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(list(), std::vector<std::string>{"before"});
  EXPECT_EQ(CommandStat(admin_b, "lrange", "calls"), 0) << "read from the replica";
  EXPECT_EQ(CommandStat(admin_b, "rpush", "rejected_calls"), 0) << "wrote to the replica";
  EXPECT_EQ(CommandStat(admin_b, "role", "calls"), 0);

  // 1. B promoted, A demoted; A keeps its clients, and answers the next write with READONLY.
  Status st = ManualFailover(admin_a, admin_b, "127.0.0.1", b.port(), /*close_clients=*/false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(InfoField(admin_a, "replication", "role"), "slave");
  ASSERT_EQ(InfoField(admin_b, "replication", "role"), "master");
  // Not idempotent on purpose: a READONLY write did not run, so resending it is safe.
  for (int i = 0; i < 5; ++i) {
    auto r = conn.Command({"RPUSH", "writes", "after-" + std::to_string(i)}, /*idempotent=*/false);
    ASSERT_TRUE(r.ok()) << "write " << i << ": " << r.status().ToString();
    EXPECT_EQ(r->integer, i + 2) << "each write lands once, after the ones before it";
  }
  EXPECT_EQ(conn.DescribeCurrent(), b_addr);
  const std::vector<std::string> six = {"before",  "after-0", "after-1",
                                        "after-2", "after-3", "after-4"};
  EXPECT_EQ(list(), six);
  auto on_b = admin_b.Command({"LLEN", "writes"});
  ASSERT_TRUE(on_b.ok());
  EXPECT_EQ(on_b->integer, 6) << "the writes are on the new primary";
  // The demoted A (its stats reset at the demotion) refused the first write and saw nothing else
  // from gapless (its rpush "calls" are B's writes, replicated to it).
  EXPECT_EQ(CommandStat(admin_a, "rpush", "rejected_calls"), 1);
  EXPECT_EQ(CommandStat(admin_a, "lrange", "calls"), 0) << "read from the demoted server";

  // 2. And back, Sentinel's way: A promoted, B demoted and its clients closed. The next command
  // is a read: it must reconnect (B, the server that answered last, is passed over) and read A.
  st = ManualFailover(admin_b, admin_a, "127.0.0.1", a.port(), /*close_clients=*/true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(InfoField(admin_b, "replication", "role"), "slave");
  ASSERT_EQ(InfoField(admin_a, "replication", "role"), "master");
  EXPECT_EQ(list(), six);
  EXPECT_EQ(conn.DescribeCurrent(), a_addr);
  auto last = conn.Command({"RPUSH", "writes", "after-failback"}, /*idempotent=*/false);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last->integer, 7);
  EXPECT_EQ(CommandStat(admin_b, "lrange", "calls"), 0) << "read from the demoted server";
  EXPECT_EQ(CommandStat(admin_b, "rpush", "rejected_calls"), 0);
  EXPECT_EQ(CommandStat(admin_b, "role", "calls"), 1) << "one reconnect probed it and moved on";
}

// rediss:// against redis-server's TLS-only port (issue 17), with a throwaway CA: the same
// RedisSocket carries both transports, so the tests above cover the plain one.
class RedisTlsItest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gapless-redis-tls-XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = new std::string(tmpl);
    auto made = MakeTlsCertificates(*dir_);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    certs_ = new TlsCertificates(std::move(made).value());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_, ec);
    delete dir_;
    delete certs_;
  }
  static std::string Url(const std::string& host, int port, const std::string& query) {
    return "rediss://" + host + ":" + std::to_string(port) + (query.empty() ? "" : "?" + query);
  }
  static const TlsCertificates& certs() { return *certs_; }

 private:
  static std::string* dir_;
  static TlsCertificates* certs_;
};
std::string* RedisTlsItest::dir_ = nullptr;
TlsCertificates* RedisTlsItest::certs_ = nullptr;

TEST_F(RedisTlsItest, RedissCarriesCommandsScriptsAndSubscriptions) {
  auto server = RedisServer::StartTls(certs());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  auto c = RedisConn::Connect((*server)->url());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  RedisConn& conn = **c;
  // A value of 3 MiB crosses many TLS records both ways, and many partial reads.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 3);
  ASSERT_TRUE(conn.Command({"SET", "big", big}).ok());
  auto got = conn.Command({"GET", "big"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->str == big) << "the value came back changed (" << got->str.size() << " bytes)";
  // A script: EVALSHA answers NOSCRIPT, the source is loaded, the script runs.
  RedisScript echo("echo.lua", "return {KEYS[1], ARGV[1]}");
  auto r = conn.Eval(echo, {"k"}, {"v"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->elements.size(), 2u);
  EXPECT_EQ(r->elements[1].str, "v");
  // Pub/sub: a pushed message, read with a timeout; none -> nullopt, not an error.
  auto sub = RedisConn::Connect((*server)->url());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE((*sub)->Command({"SUBSCRIBE", "news"}).ok());
  auto nothing = (*sub)->ReadPushed(100);
  ASSERT_TRUE(nothing.ok()) << nothing.status().ToString();
  EXPECT_FALSE(nothing->has_value());
  ASSERT_TRUE(conn.Command({"PUBLISH", "news", "hello"}).ok());
  auto pushed = (*sub)->ReadPushed(5'000);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  ASSERT_TRUE(pushed->has_value());
  ASSERT_EQ((*pushed)->elements.size(), 3u);
  EXPECT_EQ((*pushed)->elements[2].str, "hello");
  // By name: the certificate names localhost too (resolved to ::1 first, where nothing listens,
  // then 127.0.0.1).
  auto by_name = RedisConn::Connect(Url("localhost", port, "cacertfile=" + certs().ca));
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_TRUE((*by_name)->Command({"PING"}).ok());
}

// A client that does not speak TLS to the TLS port, or TLS to a plain port, fails like a server
// that is down (Unavailable, retried), naming the address, and never hangs.
TEST_F(RedisTlsItest, TheWrongTransportIsUnavailableNamingTheServer) {
  auto tls_server = RedisServer::StartTls(certs());
  ASSERT_TRUE(tls_server.ok()) << tls_server.status().ToString();
  auto plain_server = RedisServer::Start();
  ASSERT_TRUE(plain_server.ok()) << plain_server.status().ToString();
  RedisOptions options;
  options.max_attempts = 1;
  options.command_timeout_ms = 2'000;
  const int tls_port = (*tls_server)->port();
  auto plain_to_tls = RedisConn::Connect("redis://127.0.0.1:" + std::to_string(tls_port), options);
  ASSERT_FALSE(plain_to_tls.ok());
  EXPECT_EQ(plain_to_tls.status().code(), Code::kUnavailable) << plain_to_tls.status().ToString();
  EXPECT_NE(plain_to_tls.status().message().find(std::to_string(tls_port)), std::string::npos)
      << plain_to_tls.status().ToString();
  const int plain_port = (*plain_server)->port();
  auto tls_to_plain =
      RedisConn::Connect(Url("127.0.0.1", plain_port, "cacertfile=" + certs().ca), options);
  ASSERT_FALSE(tls_to_plain.ok());
  EXPECT_EQ(tls_to_plain.status().code(), Code::kUnavailable) << tls_to_plain.status().ToString();
  EXPECT_NE(tls_to_plain.status().message().find("TLS"), std::string::npos)
      << tls_to_plain.status().ToString();
}

// Verification is on by default: a certificate from another CA, or for another host, is a
// configuration error (FailedPrecondition, not retried), and verify=verify_none is the only way
// past it.
TEST_F(RedisTlsItest, ACertificateThatDoesNotVerifyIsRefusedAndNotRetried) {
  // Listening on 127.0.0.2 too, an address the certificate does not name.
  auto server = RedisServer::StartTls(certs(), false, {"--bind", "127.0.0.1", "127.0.0.2"});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  SimEnv env;
  RedisOptions options;
  options.env = &env;  // a retry would sleep (virtually) first
  struct Case {
    std::string url, expect;
  };
  for (const Case& c :
       {Case{Url("127.0.0.1", port, "cacertfile=" + certs().other_ca), "verify"},
        Case{Url("127.0.0.1", port, ""), "verify"},  // the system's CAs
        Case{Url("127.0.0.2", port, "cacertfile=" + certs().ca), "mismatch"},
        Case{Url("127.0.0.1", port, "cacertfile=/nonexistent/ca.pem"), "cacertfile"}}) {
    auto conn = RedisConn::Connect(c.url, options, /*connect_now=*/false);
    ASSERT_TRUE(conn.ok()) << c.url;
    auto r = (*conn)->Command({"PING"});
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), Code::kFailedPrecondition)
        << c.url << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.url << ": " << r.status().ToString();
    EXPECT_EQ(env.slept_micros(), 0) << c.url << ": retried a configuration error";
  }
  auto unchecked = RedisConn::Connect(
      Url("127.0.0.2", port, "cacertfile=" + certs().other_ca + "&verify=verify_none"), options);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().ToString();
  EXPECT_TRUE((*unchecked)->Command({"PING"}).ok());
}

// tls-auth-clients yes: without a client certificate the server refuses the connection (after
// the handshake, with TLS 1.3); with one signed by its CA, commands go through.
TEST_F(RedisTlsItest, AServerThatChecksClientCertificatesGetsOne) {
  auto server = RedisServer::StartTls(certs(), /*require_client_cert=*/true);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  SimEnv env;
  RedisOptions options;
  options.env = &env;
  auto without = RedisConn::Connect(Url("127.0.0.1", port, "cacertfile=" + certs().ca), options);
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().code(), Code::kFailedPrecondition) << without.status().ToString();
  EXPECT_NE(without.status().message().find("certificate"), std::string::npos)
      << without.status().ToString();
  EXPECT_EQ(env.slept_micros(), 0) << "retried a configuration error";
  auto with = RedisConn::Connect((*server)->url(), options);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_TRUE((*with)->Command({"PING"}).ok());
  EXPECT_NE((*server)->url().find("certfile="), std::string::npos);
}

TEST(RedisConnItest, SharedTestServerIsNoEviction) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  EXPECT_TRUE(db.conn()->CheckNoEviction().ok());
}

}  // namespace
}  // namespace gapless

// RedisConn against real servers: the shared test redis-server (GAPLESS_TEST_REDIS_URL), a
// private redis-server for server-wide changes, and raw TCP sockets that refuse or never answer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "coord/queue.h"
#include "coord/redis.h"
#include "testing/redis_test_db.h"

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

// A redis-server of this test's own, for changes that would disturb other tests on the shared
// server (CONFIG SET maxmemory-policy, FLUSHALL). Stopped (by its pid) in the destructor.
class PrivateRedis {
 public:
  PrivateRedis() {
    port_ = RawSocket(false).port();
    pid_ = fork();
    if (pid_ == 0) {
      std::string port = std::to_string(port_);
      execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", port.c_str(),
             "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction", "--dir",
             "/tmp", "--loglevel", "warning", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      auto c = RedisConn::Connect(url());
      if (c.ok() && (*c)->Command({"PING"}).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~PrivateRedis() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
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
  auto c = RedisConn::Connect("redis://127.0.0.1:" + std::to_string(silent.port()), options);
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
  auto r = c.Eval(s, {db.keys().fence_counter()}, {"7"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->integer, 7);
  ASSERT_TRUE(c.Command({"SCRIPT", "FLUSH"}).ok());
  auto exists = c.Command({"SCRIPT", "EXISTS", s.sha1()});
  ASSERT_TRUE(exists.ok());
  ASSERT_EQ(exists->elements.at(0).integer, 0);
  r = c.Eval(s, {db.keys().fence_counter()}, {"9"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->integer, 9);
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
  PrivateRedis server;
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
  PrivateRedis server;
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

TEST(RedisConnItest, SharedTestServerIsNoEviction) {
  GAPLESS_REDIS_TEST_DB_OR_SKIP(db);
  EXPECT_TRUE(db.conn()->CheckNoEviction().ok());
}

}  // namespace
}  // namespace gapless

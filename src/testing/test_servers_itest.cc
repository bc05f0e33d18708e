// The private test servers' starts (testing/redis_server.h) against a real redis-server: a start
// whose first port is taken (by a suite running beside it) still starts on the next, and one that
// cannot start at all says why the first attempt failed. Needs redis-server on PATH, no fixture.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "coord/redis.h"
#include "store/pg.h"
#include "testing/free_port.h"
#include "testing/pg_server.h"
#include "testing/redis_server.h"
#include "testing/tls_certs.h"

namespace gapless {
namespace {

// A port this test listens on, as another suite's server would.
class TakenPort {
 public:
  TakenPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(StablePort()));
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd_, 1) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~TakenPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

bool Answers(const RedisServer& server) {
  auto conn = RedisConn::Connect(server.url());
  return conn.ok() && (*conn)->Command({"PING"}).ok();
}

TEST(RedisServerTest, AFirstPortTakenStartsOnTheNext) {
  TakenPort taken;
  ASSERT_GT(taken.port(), 0);
  int picks = 0;
  auto server = RedisServer::Start({}, [&] { return ++picks == 1 ? taken.port() : StablePort(); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(picks, 2);
  EXPECT_NE((*server)->port(), taken.port());
  EXPECT_TRUE(Answers(**server));
  // A restart (a lock-node fault's heal) finds its directory still there.
  (*server)->Kill();
  Status restarted = (*server)->Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  EXPECT_TRUE(Answers(**server));
}

TEST(RedisServerTest, AStartThatFailsSaysWhyTheFirstAttemptFailed) {
  TakenPort taken;
  ASSERT_GT(taken.port(), 0);
  auto server = RedisServer::Start({}, [&] { return taken.port(); });
  ASSERT_FALSE(server.ok());
  const std::string message = server.status().message();
  // redis-server's own words for the first attempt, not "No such file or directory".
  EXPECT_NE(message.find("the first: redis-server on port " + std::to_string(taken.port())),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("in use"), std::string::npos) << message;
  EXPECT_EQ(message.find("No such file"), std::string::npos) << message;
}

// gapless-chaos's default --work-dir is relative ("chaos-runs"), and its TLS seeds make their
// certificates under it; redis-server changes into its own --dir before it loads them. Every path
// handed to a server is absolute, so a relative one works from wherever the test runs.
TEST(RedisServerTest, CertificatesMadeUnderARelativeDirectoryLoad) {
  const std::filesystem::path cwd = std::filesystem::current_path();
  const std::filesystem::path here =
      std::filesystem::temp_directory_path() / ("gapless-relative-" + std::to_string(getpid()));
  std::filesystem::create_directories(here);
  std::filesystem::current_path(here);
  auto certs = MakeTlsCertificates("chaos-runs/seed-2/tls");
  ASSERT_TRUE(certs.ok()) << certs.status().ToString();
  for (const std::string& path : {certs->dir, certs->ca, certs->server_cert, certs->server_key,
                                  certs->client_cert, certs->client_key}) {
    EXPECT_TRUE(std::filesystem::path(path).is_absolute()) << path;
  }
  // Certificates given by relative paths (a caller that made them by hand) load too.
  TlsCertificates relative = *certs;
  relative.ca = "chaos-runs/seed-2/tls/ca.pem";
  relative.server_cert = "chaos-runs/seed-2/tls/server.pem";
  relative.server_key = "chaos-runs/seed-2/tls/server-key.pem";
  for (const TlsCertificates& tls : {*certs, relative}) {
    auto server = RedisServer::StartTls(tls);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    auto conn = RedisConn::Connect((*server)->url());
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    EXPECT_TRUE((*conn)->Command({"PING"}).ok());
  }
  std::filesystem::current_path(cwd);
  std::filesystem::remove_all(here);
}

TEST(PgServerTest, AFirstPortTakenStartsOnTheNext) {
  TakenPort taken;
  ASSERT_GT(taken.port(), 0);
  int picks = 0;
  auto server = PgServer::Start([&] { return ++picks == 1 ? taken.port() : StablePort(); });
  if (!server.ok() && server.status().code() == Code::kFailedPrecondition) {
    GTEST_SKIP() << server.status().ToString();
  }
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(picks, 2);
  EXPECT_NE((*server)->port(), taken.port());
  auto conn = PgConn::Connect((*server)->url());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_TRUE((*conn)->Exec("SELECT 1").ok());
}

}  // namespace
}  // namespace gapless

// No secret in any output: a secret placed in the user info, the query and the path of every URL
// gapless takes (--rpc, --db, --redis, --lock-nodes, --events) never appears in a log line, an
// error or status output of a run that fails in each way the bad-input tests know: a node that is
// down, answers 401 echoing the key, 429, 500, a malformed block or another chain; a database, a
// Redis, lock nodes or event buses that are down or refuse the password. And secrets read from a
// file (--db-file, --rpc @PATH) are not in the process's command line, where `ps` shows them.
//
// Servers: the test PostgreSQL (trust auth: a password in its URL is ignored, so a run succeeds
// with one) and the test Redis (no password: AUTH fails), plus an HTTP node of the test's own.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "devnet_util.h"
#include "fake_node.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

class SecretsTest : public DbRedisTest {
 protected:
  std::string SecretDbUrl() const { return WithDbSecrets(db_.url()); }
  // The test Redis with a password it does not have: AUTH fails.
  std::string SecretRedisUrl(const std::string& password) const {
    return "redis://:" + password + "@" + redis_url_.substr(redis_url_.find("//") + 2);
  }
  void ExpectNoSecret(const std::string& what, const std::pair<int, std::string>& run) {
    SCOPED_TRACE(what);
    EXPECT_NE(run.first, 0) << "expected this run to fail:\n" << run.second;
    EXPECT_FALSE(run.second.empty()) << "expected an error message";
    EXPECT_EQ(FindSecret(run.second), "") << run.second;
    if (std::getenv("SECRETS_ITEST_SHOW")) std::cerr << "---- " << what << "\n" << run.second;
  }
};

TEST_F(SecretsTest, ANodeThatFailsInEveryWayNeverShowsTheKey) {
  FakeNode node;
  const std::vector<std::string> common = {
      "index", "--rpc", node.SecretUrl(), "--db", SecretDbUrl(), "--from", "0",
      "--to",  "0",     "--max-attempts", "2",    "--progress",  "off"};
  node.Set(FakeNode::Mode::kUnauthorized);
  auto run = RunAll(common);
  ExpectNoSecret("401", run);
  EXPECT_NE(run.second.find("HTTP 401"), std::string::npos) << run.second;
  EXPECT_NE(run.second.find("127.0.0.1"), std::string::npos) << "the host is still named";
  node.Set(FakeNode::Mode::kTooManyRequests);
  ExpectNoSecret("429", RunAll(common));
  node.Set(FakeNode::Mode::kServerError);
  ExpectNoSecret("502", RunAll(common));
  node.Set(FakeNode::Mode::kOtherChain);
  auto chain = common;
  chain.insert(chain.end(), {"--chain-id", "1"});
  ExpectNoSecret("another chain", RunAll(chain));
  node.Set(FakeNode::Mode::kMalformedBlock);
  ExpectNoSecret("malformed block", RunAll(common));
}

TEST_F(SecretsTest, ServersThatAreDownOrRefuseThePasswordNeverShowIt) {
  FakeNode node;
  node.Set(FakeNode::Mode::kProxy);
  // Nothing listens on port 9.
  ExpectNoSecret("node down", RunAll({"index", "--rpc",
                                      "https://RPCUSER1:RPCPASSW0RD@127.0.0.1:9/v2/"
                                      "APIKEY123?key=QKEY0SECRET",
                                      "--db", SecretDbUrl(), "--max-attempts", "1"}));
  ExpectNoSecret("database down",
                 RunAll({"verify", "--db",
                         "postgresql://gapless:PGPASSW0RD@127.0.0.1:9/x?password=PGQUERY5ECRET"}));
  ExpectNoSecret("database as key=value",
                 RunAll({"verify", "--db", "host=127.0.0.1 port=9 password=PGPASSW0RD dbname=x"}));
  const std::string lock_nodes =
      "redis://:L0CKPASS@127.0.0.1:9,redis://:L0CKPASS@127.0.0.1:10,redis://:L0CKPASS@127.0.0.1:11";
  ExpectNoSecret("redis refuses the password",
                 RunAll({"run", "--rpc", node.SecretUrl(), "--db", SecretDbUrl(), "--redis",
                         SecretRedisUrl("R3DISPASS"), "--to", "0", "--progress", "off"},
                        5'000));
  ExpectNoSecret("status: redis refuses the password",
                 RunAll({"status", "--db", SecretDbUrl(), "--redis", SecretRedisUrl("R3DISPASS"),
                         "--rpc", node.SecretUrl(), "--chain-id", "1"}));
  // The coordination Redis answers; the lock nodes and the event buses do not.
  auto down =
      RunAll({"run", "--rpc", node.SecretUrl(), "--db", SecretDbUrl(), "--redis", redis_url_,
              "--lock-nodes", lock_nodes, "--events",
              "redis://:BU5PASS@127.0.0.1:9,amqp://u:AMQPPASS7@127.0.0.1:9/v,kafka://127.0.0.1:9"
              "?sasl.password=KAFKA5ASL",
              "--to", "0", "--progress", "off", "--log-level", "debug"},
             8'000);
  ExpectNoSecret("lock nodes and buses down", down);
  EXPECT_NE(down.second.find("0 of 3 lock nodes answered"), std::string::npos)
      << "the lock nodes were tried";
}

TEST_F(SecretsTest, SecretsReadFromFilesStayOutOfTheCommandLine) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/secrets_itest";
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  FakeNode node;
  node.Set(FakeNode::Mode::kServerError);  // keeps the worker retrying while we look
  std::ofstream(dir + "/db") << SecretDbUrl() << "\n";
  std::ofstream(dir + "/rpc") << node.SecretUrl() << "\n";
  std::ofstream(dir + "/redis") << SecretRedisUrl("R3DISPASS");
  std::vector<std::string> args = {
      GaplessBinary(),    "index",      "--db-file", dir + "/db",      "--rpc",
      "@" + dir + "/rpc", "--progress", "off",       "--max-attempts", "100"};
  pid_t pid = Spawn(args, dir + "/index.log");
  ASSERT_GT(pid, 0);
  std::string cmdline;
  // The process got the secrets: it reached the node and keeps retrying its 502s.
  ASSERT_TRUE(testing_util::WaitFor(
      [&] { return ReadIfThere(dir + "/index.log").find("HTTP 502") != std::string::npos; },
      10'000))
      << ReadFile(dir + "/index.log");
  cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");  // gapless's own, after exec
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(FindSecret(cmdline), "") << cmdline;
  EXPECT_NE(cmdline.find(dir + "/db"), std::string::npos);
  EXPECT_EQ(FindSecret(ReadFile(dir + "/index.log")), "") << ReadFile(dir + "/index.log");

  // A file that is not there: the error names the option and the path.
  auto missing = RunAll({"verify", "--db-file", dir + "/nope"});
  EXPECT_EQ(missing.first, 2) << missing.second;
  EXPECT_NE(missing.second.find("--db-file"), std::string::npos) << missing.second;
  EXPECT_NE(missing.second.find(dir + "/nope"), std::string::npos) << missing.second;
}

}  // namespace
}  // namespace gapless::e2e

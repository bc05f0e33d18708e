// No secret in any output: a secret placed in the user info, the query and the path of every URL
// gapless takes (--rpc, --db, --redis, --lock-nodes, --events), where the URL's form has room for
// one, never appears in a log line, an error, status output, /metrics, /readyz or /status.json of
// a run that fails in each way the bad-input tests know: a node that is down, answers 401 echoing
// the key, 429, 500, a malformed block or another chain; a database, a Redis, lock nodes or event
// buses that are down or refuse the password; a misspelt config key, a bad value, a partition
// size that contradicts the database. And secrets read from a file (--db-file, --rpc @PATH) are
// not in the process's command line, where `ps` shows them. (A redis:// URL's path is a database
// number and its query only rediss:// TLS file names; an amqp:// path is the vhost, shown on
// purpose: docs/operations.md "Nothing shows them".)
//
// Servers: the test PostgreSQL (trust auth: a password in its URL is ignored, so a run succeeds
// with one) and the test Redis (no password: AUTH fails), plus an HTTP node of the test's own.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "devnet_util.h"
#include "fake_node.h"
#include "testing/free_port.h"
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

// A fleet process failing while it runs (the node answers 502 with the key in its body, the lock
// nodes and the event buses are down), scraped as Prometheus and a browser would: its /metrics
// (the errors by reason), /readyz (the failing dependencies, each named by its redacted URL:
// the node's error text included), /status.json (lock nodes, the head's error) and the page never
// hold a secret.
TEST_F(SecretsTest, AFailingFleetRunServesNoSecretOnItsEndpoints) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/secrets_itest-ops";
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  FakeNode node;
  node.Set(FakeNode::Mode::kProxy);  // past the start's chain check, then failing
  const int port = FreePort();
  const std::vector<std::string> args = {
      GaplessBinary(),
      "run",
      "--rpc",
      node.SecretUrl(),
      "--db",
      SecretDbUrl(),
      "--redis",
      redis_url_,
      "--lock-nodes",
      "redis://:L0CKPASS@127.0.0.1:9,redis://:L0CKPASS@127.0.0.1:10,redis://:L0CKPASS@127.0.0.1:11",
      "--events",
      "redis://:BU5PASS@127.0.0.1:9,amqp://u:AMQPPASS7@127.0.0.1:9/v,kafka://127.0.0.1:9"
      "?sasl.password=KAFKA5ASL",
      "--to",
      "5",
      "--max-attempts",
      "100",
      "--progress",
      "off",
      "--metrics-addr",
      "127.0.0.1:" + std::to_string(port)};
  const std::string log = dir + "/run.log";
  pid_t pid = Spawn(args, log);
  ASSERT_GT(pid, 0);
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1);
  client.set_read_timeout(5);
  // Until readiness has probed every dependency (the lock nodes fail), then until the node's
  // 502s are counted.
  std::string metrics;
  const bool started = testing_util::WaitFor(
      [&] {
        auto ready = client.Get("/readyz");
        return ready && ready->status == 503 && ready->body.find("FAILED") != std::string::npos &&
               ready->body.find("not probed") == std::string::npos;
      },
      30'000);
  node.Set(FakeNode::Mode::kServerError);
  const bool failing = started && testing_util::WaitFor(
                                      [&] {
                                        auto res = client.Get("/metrics");
                                        if (!res || res->status != 200) return false;
                                        metrics = res->body;
                                        return metrics.find("http:502") != std::string::npos;
                                      },
                                      30'000);
  std::map<std::string, std::string> served = {{"/metrics", metrics}};
  for (const char* path : {"/readyz", "/status.json", "/"}) {
    auto res = client.Get(path);
    served[path] = res ? res->body : "(no answer)";
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(failing) << metrics << "\n" << ReadIfThere(log);
  for (const auto& [path, body] : served) {
    EXPECT_FALSE(body.empty()) << path;
    EXPECT_EQ(FindSecret(body), "") << path << ":\n" << body;
  }
  EXPECT_NE(served["/readyz"].find("FAILED"), std::string::npos) << served["/readyz"];
  EXPECT_NE(served["/readyz"].find("127.0.0.1"), std::string::npos)
      << "the failing servers are still named: " << served["/readyz"];
  if (std::getenv("SECRETS_ITEST_SHOW")) {
    for (const auto& [path, body] : served) std::cerr << "---- " << path << "\n" << body << "\n";
  }
  EXPECT_EQ(FindSecret(ReadFile(log)), "") << ReadFile(log);
}

// Bad configuration, with a secret in every URL: a key misspelt in the config file, a value that
// is not a number, and a partition size that contradicts the database.
TEST_F(SecretsTest, RefusedConfigurationNeverShowsTheSecrets) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/secrets_itest-config";
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  FakeNode node;
  node.Set(FakeNode::Mode::kProxy);
  std::ofstream(dir + "/gapless.conf")
      << "rpc = " << node.SecretUrl() << "\ndb = " << SecretDbUrl() << "\nconcurency = 4\n";
  auto typo = RunAll({"index", "--config", dir + "/gapless.conf"});
  ExpectNoSecret("config typo", typo);
  EXPECT_NE(typo.second.find("concurency"), std::string::npos) << typo.second;
  ExpectNoSecret("not a number", RunAll({"index", "--rpc", node.SecretUrl(), "--db", SecretDbUrl(),
                                         "--range-size", "zero"}));
  const std::vector<std::string> index = {
      "index", "--rpc", node.SecretUrl(), "--db", SecretDbUrl(), "--from", "0",
      "--to",  "0",     "--progress",     "off"};
  auto first = index;
  first.insert(first.end(), {"--partition-blocks", "10"});
  auto made = RunAll(first, 60'000);
  ASSERT_EQ(made.first, 0) << made.second;
  EXPECT_EQ(FindSecret(made.second), "") << made.second;
  auto other = index;
  other.insert(other.end(), {"--partition-blocks", "20"});
  auto refused = RunAll(other, 60'000);
  ExpectNoSecret("partition size", refused);
  EXPECT_NE(refused.second.find("--partition-blocks 20"), std::string::npos) << refused.second;
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

// Input that does not parse, with a secret in it (issue 35, item 10): a config line without `=`, a
// password with a raw '@', a URL without a scheme or with one the option does not take, two URLs
// without the comma between them, a misspelt flag, given as flags, GAPLESS_* variables or config
// lines. Each is refused at once (exit 2) naming the option, and no secret is in the whole output.
TEST_F(SecretsTest, MalformedInputIsRefusedWithoutShowingTheSecret) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/secrets_itest-malformed";
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  FakeNode node;
  node.Set(FakeNode::Mode::kProxy);
  const std::string rpc = node.SecretUrl();
  const std::string db = SecretDbUrl();
  const std::string raw_at = "postgresql://gapless:PGPASSW0RD@R3DISPASS@127.0.0.1:9/x";
  auto config = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  struct Case {
    std::string what;
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string names;  // the refusal names this (the option, and where its value came from)
  };
  const std::vector<Case> cases = {
      {"config line without =",
       {"verify", "--config",
        config("colon.conf", "db: postgresql://gapless:PGPASSW0RD@127.0.0.1:9/x\n")},
       {},
       "line 1"},
      {"config: --rpc without a scheme",
       {"index", "--db", db, "--config",
        config("noscheme.conf", "rpc = 127.0.0.1:9/v2/APIKEY123?key=QKEY0SECRET\n")},
       {},
       "noscheme.conf line 1"},
      {"flag: a raw @ in the password", {"verify", "--db", raw_at}, {}, "percent-encode"},
      {"env: a raw @ in the password", {"verify"}, {"GAPLESS_DB=" + raw_at}, "GAPLESS_DB"},
      {"flag: an event bus URL with one slash",
       {"index", "--rpc", rpc, "--db", db, "--events", "redis:/:BU5PASS@127.0.0.1:9"},
       {},
       "--events"},
      {"env: an RPC URL without a scheme",
       {"index", "--db", db},
       {"GAPLESS_RPC=RPCUSER1:RPCPASSW0RD@127.0.0.1:9/v2/APIKEY123?key=QKEY0SECRET"},
       "GAPLESS_RPC"},
      {"flag: a WebSocket RPC URL",
       {"index", "--db", db, "--rpc", "wss://RPCUSER1:RPCPASSW0RD@127.0.0.1:9/v2/APIKEY123"},
       {},
       "--rpc"},
      {"flag: two RPC URLs without a comma",
       {"index", "--db", db, "--rpc",
        "http://127.0.0.1:9/v2/APIKEY123 http://127.0.0.1:10/v2/QKEY0SECRET"},
       {},
       "--rpc"},
      {"flag: misspelt, its URL taken for an argument",
       {"index", "--rpc", rpc, "--db", db, "--dbb", db},
       {},
       "not expected"},
      {"flag: a MySQL URL",
       {"verify", "--db", "mysql://root:PGPASSW0RD@127.0.0.1:9/x"},
       {},
       "mysql://"},
      {"flag: a Redis port above 65535",
       {"run", "--rpc", rpc, "--db", db, "--redis", "redis://:R3DISPASS@127.0.0.1:99999"},
       {},
       "65535"},
      {"env: a lock node without a scheme",
       {"run", "--rpc", rpc, "--db", db, "--redis", redis_url_},
       {"GAPLESS_LOCK_NODES=:L0CKPASS@127.0.0.1:9"},
       "GAPLESS_LOCK_NODES"},
      {"status: an RPC URL without a scheme",
       {"status", "--db", db, "--redis", redis_url_, "--rpc", "127.0.0.1:9/v2/APIKEY123"},
       {},
       "--rpc"},
  };
  for (const Case& c : cases) {
    auto run = RunAll(c.args, 10'000, c.env);
    ExpectNoSecret(c.what, run);
    EXPECT_EQ(run.first, 2) << c.what << ": bad input, refused at once\n" << run.second;
    EXPECT_NE(run.second.find(c.names), std::string::npos) << c.what << "\n" << run.second;
  }
}

}  // namespace
}  // namespace gapless::e2e

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
#include <mutex>
#include <string>
#include <vector>

#include "devnet_util.h"
#include "rpc/curl_transport.h"
#include "testing/http_test_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

// Every secret the URLs below carry. Each is 8+ characters with a digit, so it is unlikely to turn
// up in output by chance.
const std::vector<std::string> kSecrets = {
    "RPCUSER1",  "RPCPASSW0RD", "APIKEY123", "QKEY0SECRET", "PGPASSW0RD", "PGQUERY5ECRET",
    "R3DISPASS", "L0CKPASS",    "BU5PASS",   "AMQPPASS7",   "KAFKA5ASL",  "RPCFRAG9MENT"};

// Runs gapless with stdout and stderr together, sending SIGINT after timeout_ms (a fleet process
// that keeps retrying an unreachable server). Returns the exit code (-1: killed) and the output.
std::pair<int, std::string> RunAll(std::vector<std::string> args, int timeout_ms = 20'000) {
  args.insert(args.begin(), GaplessBinary());
  int fds[2];
  if (pipe(fds) != 0) return {-1, ""};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool interrupted = false;
  int status = 0;
  while (true) {
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (waitpid(pid, &status, WNOHANG) == pid) {
      while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
      break;
    }
    if (std::chrono::steady_clock::now() > deadline && !interrupted) {
      kill(pid, SIGINT);
      interrupted = true;
    }
    usleep(20'000);
  }
  close(fds[0]);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string ReadIfThere(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The secret of kSecrets found in text, or "".
std::string FindSecret(const std::string& text) {
  for (const auto& s : kSecrets) {
    if (text.find(s) != std::string::npos) return s;
  }
  return "";
}

// A JSON-RPC node of the test's own whose behaviour the test switches.
class FakeNode {
 public:
  enum class Mode {
    kUnauthorized,
    kTooManyRequests,
    kServerError,
    kMalformedBlock,
    kOtherChain,
    kProxy,  // forwards every request to the test devnet (anvil answers on "/" only)
  };
  FakeNode()
      : server_([this](const HttpTestServer::Request& r) { return Answer(r); }),
        devnet_(GAPLESS_TEST_ANVIL_URL) {}
  void Set(Mode mode) { mode_ = mode; }
  // The node's URL with a secret in each part: user info, path (the API key, as Alchemy puts it),
  // query and fragment.
  std::string SecretUrl() const {
    return "http://RPCUSER1:RPCPASSW0RD@127.0.0.1:" + std::to_string(server_.port()) +
           "/v2/APIKEY123?key=QKEY0SECRET#RPCFRAG9MENT";
  }

 private:
  HttpTestServer::Response Answer(const HttpTestServer::Request& r) {
    auto id_of = [&] {
      size_t at = r.body.find("\"id\":");
      size_t end = r.body.find(',', at);
      return r.body.substr(at + 5, end - at - 5);
    };
    auto result = [&](const std::string& json) {
      return HttpTestServer::Response::Json(R"({"jsonrpc":"2.0","id":)" + id_of() +
                                            R"(,"result":)" + json + "}");
    };
    switch (mode_.load()) {
      case Mode::kUnauthorized:
        // Providers echo the key they were given.
        return HttpTestServer::Response::Json(
            R"({"error":"invalid API key APIKEY123 for user RPCUSER1"})", 401);
      case Mode::kTooManyRequests: {
        auto res = HttpTestServer::Response::Json(R"({"error":"rate limited: APIKEY123"})", 429);
        res.headers.push_back({"Retry-After", "0"});
        return res;
      }
      case Mode::kServerError:
        return HttpTestServer::Response::Json("upstream APIKEY123 failed", 502);
      case Mode::kOtherChain:
        return result("\"0x5\"");
      case Mode::kProxy: {
        std::lock_guard<std::mutex> lock(devnet_mu_);
        auto answer = devnet_.Post(r.body);
        if (!answer.ok()) return HttpTestServer::Response::Json("devnet down", 502);
        return HttpTestServer::Response::Json(answer->body, static_cast<int>(answer->status));
      }
      case Mode::kMalformedBlock:
        if (r.body.find("eth_chainId") != std::string::npos) return result("\"0x1\"");
        if (r.body.find("eth_blockNumber") != std::string::npos) return result("\"0x10\"");
        // A batch: answer each call with a block whose hash is not hex.
        return HttpTestServer::Response::Json(
            R"([{"jsonrpc":"2.0","id":0,"result":{"number":"0x0","hash":"0xAPIKEY123"}}])");
    }
    return HttpTestServer::Response::Json("{}", 500);
  }

  std::atomic<Mode> mode_{Mode::kUnauthorized};
  HttpTestServer server_;
  std::mutex devnet_mu_;
  CurlTransport devnet_;
};

class SecretsTest : public DbRedisTest {
 protected:
  // The test database's URL with a password in the user info and in the query (trust auth
  // ignores both).
  std::string SecretDbUrl() const {
    std::string url = db_.url();  // postgresql://gapless@127.0.0.1:PORT/DB
    url.insert(url.find('@'), ":PGPASSW0RD");
    return url + (url.find('?') == std::string::npos ? "?" : "&") +
           "password=PGQUERY5ECRET&application_name=gapless";
  }
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

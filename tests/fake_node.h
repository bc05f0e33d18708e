// Test helpers shared by secrets_itest and ops_itest: a JSON-RPC node of the test's own (behind
// a URL with secrets in every part), the secrets it uses, and running gapless with its whole
// output.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <mutex>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "devnet_util.h"
#include "rpc/curl_transport.h"
#include "testing/http_test_server.h"

namespace gapless::e2e {

// Every secret the URLs below carry. Each is 8+ characters with a digit, so it is unlikely to turn
// up in output by chance.
inline const std::vector<std::string> kSecrets = {
    "RPCUSER1",  "RPCPASSW0RD", "APIKEY123", "QKEY0SECRET", "PGPASSW0RD", "PGQUERY5ECRET",
    "R3DISPASS", "L0CKPASS",    "BU5PASS",   "AMQPPASS7",   "KAFKA5ASL",  "RPCFRAG9MENT"};

// Runs gapless with stdout and stderr together, sending SIGINT after timeout_ms (a fleet process
// that keeps retrying an unreachable server), with `env` ("NAME=value") added to the environment.
// Returns the exit code (-1: killed) and the output.
inline std::pair<int, std::string> RunAll(std::vector<std::string> args, int timeout_ms = 20'000,
                                          std::vector<std::string> env = {}) {
  args.insert(args.begin(), GaplessBinary());
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);  // the added ones first win
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
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
    execve(argv[0], argv.data(), envp.data());
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

inline std::string ReadIfThere(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The secret of kSecrets found in text, or "".
inline std::string FindSecret(const std::string& text) {
  for (const auto& s : kSecrets) {
    if (text.find(s) != std::string::npos) return s;
  }
  return "";
}

// A PostgreSQL URL with a password in the user info and in the query: the test server's trust
// auth ignores both, so a run with it succeeds.
inline std::string WithDbSecrets(std::string url) {  // postgresql://gapless@127.0.0.1:PORT/DB
  url.insert(url.find('@'), ":PGPASSW0RD");
  return url + (url.find('?') == std::string::npos ? "?" : "&") +
         "password=PGQUERY5ECRET&application_name=gapless";
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
    // kProxy, but a node without trace_block (geth): each trace_block call in a batch is answered
    // "method not found", so a client falls back to debug_traceBlockByNumber.
    kProxyWithoutTraceBlock,
    // kProxy, but a node with no tracing API at all (neither trace_block nor the debug tracer).
    kProxyWithoutTracing,
    // kProxy, but its first trace_block answer with a transaction's trace is another fork's
    // block at those heights (a backend behind the same URL, or a re-org between the block and
    // its traces): the same top-level frames, one more internal call (under the first
    // transaction, carrying value) and another blockHash on every trace. Then it answers right.
    kProxyOtherForkTracesOnce,
  };
  FakeNode()
      : server_([this](const HttpTestServer::Request& r) { return Answer(r); }),
        devnet_(GAPLESS_TEST_ANVIL_URL) {}
  void Set(Mode mode) { mode_ = mode; }
  // Answers kProxyOtherForkTracesOnce changed; JSON-RPC methods asked, in order of first use.
  int forked_answers() const { return forked_answers_; }
  std::vector<std::string> methods() const {
    std::lock_guard<std::mutex> lock(devnet_mu_);
    return methods_;
  }
  // The blockHash every trace of the other fork's answer states.
  static std::string OtherForkHash() { return "0x" + std::string(64, 'e'); }
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
    {
      std::lock_guard<std::mutex> lock(devnet_mu_);
      std::regex method(R"re("method":"([A-Za-z0-9_]+)")re");
      for (auto it = std::sregex_iterator(r.body.begin(), r.body.end(), method);
           it != std::sregex_iterator(); ++it) {
        if (std::find(methods_.begin(), methods_.end(), (*it)[1].str()) == methods_.end()) {
          methods_.push_back((*it)[1].str());
        }
      }
    }
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
      case Mode::kProxyWithoutTraceBlock:
      case Mode::kProxyWithoutTracing:
        if (r.body.find("\"trace_block\"") != std::string::npos ||
            (mode_.load() == Mode::kProxyWithoutTracing &&
             (r.body.find("\"debug_traceBlockByNumber\"") != std::string::npos ||
              r.body.find("\"debug_traceBlockByHash\"") != std::string::npos))) {
          std::string errors = "[";
          std::regex id(R"re("id":(\d+))re");
          for (auto it = std::sregex_iterator(r.body.begin(), r.body.end(), id);
               it != std::sregex_iterator(); ++it) {
            if (errors.size() > 1) errors += ",";
            errors += R"({"jsonrpc":"2.0","id":)" + (*it)[1].str() +
                      R"(,"error":{"code":-32601,"message":"the method does not exist"}})";
          }
          return HttpTestServer::Response::Json(errors + "]");
        }
        [[fallthrough]];
      case Mode::kProxy:
      case Mode::kProxyOtherForkTracesOnce: {
        std::lock_guard<std::mutex> lock(devnet_mu_);
        auto answer = devnet_.Post(r.body);
        if (!answer.ok()) return HttpTestServer::Response::Json("devnet down", 502);
        if (mode_.load() == Mode::kProxyOtherForkTracesOnce && forked_answers_ == 0 &&
            r.body.find("\"trace_block\"") != std::string::npos && OtherFork(&answer->body)) {
          ++forked_answers_;
        }
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

  // A trace_block answer made another fork's (see kProxyOtherForkTracesOnce); false when it has
  // no transaction's trace to copy.
  static bool OtherFork(std::string* body) {
    // anvil writes each trace as {"action":{..},"blockHash":..,..,"traceAddress":[..],
    // "transactionHash":..,"transactionPosition":N,"type":".."}.
    size_t top = body->find(R"("traceAddress":[])");
    if (top == std::string::npos) return false;
    size_t begin = body->rfind(R"({"action")", top);
    size_t end = body->find(R"("type":")", top);
    if (begin == std::string::npos || end == std::string::npos) return false;
    end = body->find('}', end) + 1;
    // An internal call of the same transaction, moving value to an address of its own.
    std::string internal = body->substr(begin, end - begin);
    internal.replace(internal.find(R"("traceAddress":[])"), 17, R"("traceAddress":[999])");
    internal = std::regex_replace(internal, std::regex(R"re("to":"0x[0-9a-f]{40}")re"),
                                  R"("to":"0x00000000000000000000000000000000000e1e1e")");
    internal = std::regex_replace(internal, std::regex(R"re("value":"0x[0-9a-f]+")re"),
                                  R"("value":"0x7")");
    body->insert(end, "," + internal);
    *body = std::regex_replace(*body, std::regex(R"re("blockHash":"0x[0-9a-f]{64}")re"),
                               R"("blockHash":")" + OtherForkHash() + "\"");
    return true;
  }

  std::atomic<Mode> mode_{Mode::kUnauthorized};
  HttpTestServer server_;
  mutable std::mutex devnet_mu_;
  CurlTransport devnet_;
  std::atomic<int> forked_answers_{0};
  std::vector<std::string> methods_;  // guarded by devnet_mu_
};

}  // namespace gapless::e2e

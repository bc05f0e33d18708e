#include "testing/redis_server.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "coord/redis.h"
#include "testing/free_port.h"

namespace gapless {

Result<std::unique_ptr<RedisServer>> RedisServer::Start(std::vector<std::string> extra,
                                                        PortPicker pick_port) {
  return StartWith(std::move(extra), nullptr, false, pick_port);
}

Result<std::unique_ptr<RedisServer>> RedisServer::StartTls(const TlsCertificates& tls,
                                                           bool require_client_cert,
                                                           std::vector<std::string> extra) {
  return StartWith(std::move(extra), &tls, require_client_cert, nullptr);
}

Result<std::unique_ptr<RedisServer>> RedisServer::StartWith(std::vector<std::string> extra,
                                                            const TlsCertificates* tls,
                                                            bool require_client_cert,
                                                            const PortPicker& pick_port) {
  constexpr int kAttempts = 5;
  Status first;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    // A directory of this attempt's own: a failed attempt's server removes its directory when
    // it goes, and redis-server cannot start in (or log to) a directory that is gone.
    std::string dir = (std::filesystem::temp_directory_path() / "gapless-redis-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) return Internal("RedisServer: mkdtemp failed");
    const int port = pick_port ? pick_port() : StablePort();  // Restart binds it again
    if (port <= 0) return Internal("RedisServer: no free port");
    std::unique_ptr<RedisServer> server(new RedisServer(port, extra, dir));
    if (tls != nullptr) server->tls_ = *tls;
    server->require_client_cert_ = require_client_cert;
    Status st = server->Spawn();
    if (st.ok()) return server;
    if (first.ok()) first = st;
  }
  return Status(first.code(), fmt::format("RedisServer: redis-server did not start in {} attempts "
                                          "(is it installed?); the first: {}",
                                          kAttempts, first.message()));
}

RedisServer::RedisServer(int port, std::vector<std::string> extra, std::string dir)
    : port_(port), extra_(std::move(extra)), dir_(std::move(dir)) {}

std::string RedisServer::url() const {
  if (!tls_.has_value()) return "redis://127.0.0.1:" + std::to_string(port_);
  std::string url = "rediss://127.0.0.1:" + std::to_string(port_) + "?cacertfile=" + tls_->ca;
  if (require_client_cert_) {
    url += "&certfile=" + tls_->client_cert + "&keyfile=" + tls_->client_key;
  }
  return url;
}

RedisServer::~RedisServer() {
  Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status RedisServer::Spawn() {
  std::vector<std::string> args = {"redis-server",
                                   "--bind",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(port_),
                                   "--dir",
                                   dir_,
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--maxmemory-policy",
                                   "noeviction",
                                   "--notify-keyspace-events",
                                   "Egx",
                                   "--logfile",
                                   dir_ + "/redis-" + std::to_string(port_) + ".log"};
  if (tls_.has_value()) {
    // TLS only: the plain port off, the same port number for TLS. The files by absolute paths:
    // redis-server changes into its --dir before it loads them.
    args[4] = "0";
    auto absolute = [](const std::string& path) {
      return std::filesystem::absolute(path).string();
    };
    for (const std::string& a :
         {std::string("--tls-port"), std::to_string(port_), std::string("--tls-cert-file"),
          absolute(tls_->server_cert), std::string("--tls-key-file"), absolute(tls_->server_key),
          std::string("--tls-ca-cert-file"), absolute(tls_->ca), std::string("--tls-auth-clients"),
          std::string(require_client_cert_ ? "yes" : "no")}) {
      args.push_back(a);
    }
  }
  args.insert(args.end(), extra_.begin(), extra_.end());
  pid_t pid = fork();
  if (pid < 0) return Internal("RedisServer: fork failed");
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("redis-server", argv.data());
    _exit(127);
  }
  pid_ = pid;
  RedisOptions options;
  options.connect_timeout_ms = 200;
  options.max_attempts = 1;
  options.require_primary = false;
  for (int i = 0; i < 200; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Unavailable(
          fmt::format("redis-server on port {} exited at start: {}", port_, LogTail()));
    }
    auto conn = RedisConn::Connect(url(), options);
    if (conn.ok()) {
      // Up: PING answered, or refused for want of the password `extra` set (--requirepass).
      auto pong = (*conn)->Command({"PING"});
      if (pong.ok() || pong.status().reason() == RedisErrorReason("NOAUTH")) return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  Kill();
  return Unavailable(fmt::format("redis-server did not answer on port {}: {}", port_, LogTail()));
}

std::string RedisServer::LogTail() const {
  std::ifstream in(dir_ + "/redis-" + std::to_string(port_) + ".log");
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(line);
    if (lines.size() > 3) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out.empty() ? "(no log)" : out;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

Status RedisServer::Restart() {
  Kill();
  return Spawn();
}

}  // namespace gapless

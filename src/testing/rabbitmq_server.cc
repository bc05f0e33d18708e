#include "testing/rabbitmq_server.h"

#include <netinet/in.h>
#include <pwd.h>
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
#include <vector>

#include "testing/free_port.h"

namespace gapless {
namespace {

constexpr const char* kServer = "/usr/lib/rabbitmq/bin/rabbitmq-server";

bool PortAnswers(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// The process exists and is not a zombie (a detached node is not our child; its reaper may be
// slow).
bool Alive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
  }
  return true;
}

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid)) return -1;
  return static_cast<pid_t>(pid);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Hands the directory tree to user rabbitmq when we are root (the node runs as rabbitmq).
void ChownToRabbit(const std::string& dir) {
  if (geteuid() != 0) return;
  passwd* pw = getpwnam("rabbitmq");
  if (pw == nullptr) return;
  std::error_code ec;
  (void)chown(dir.c_str(), pw->pw_uid, pw->pw_gid);
  for (auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
    (void)chown(entry.path().c_str(), pw->pw_uid, pw->pw_gid);
  }
}

}  // namespace

Result<std::unique_ptr<RabbitMqServer>> RabbitMqServer::Start() { return StartWith(nullptr); }

Result<std::unique_ptr<RabbitMqServer>> RabbitMqServer::StartTls(const TlsCertificates& tls) {
  return StartWith(&tls);
}

Result<std::unique_ptr<RabbitMqServer>> RabbitMqServer::StartWith(const TlsCertificates* tls) {
  if (access(kServer, X_OK) != 0) {
    return FailedPrecondition("RabbitMqServer: rabbitmq-server is not installed");
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "gapless-rabbitmq-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return Internal("RabbitMqServer: mkdtemp failed");
  // The error is the first attempt's: a later one may only repeat it, or hide it.
  Status first;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int port = StablePort();  // Restart binds them again
    int dist_port = StablePort();
    if (port <= 0 || dist_port <= 0 || port == dist_port) {
      if (first.ok()) first = Unavailable("RabbitMqServer: no free port");
      continue;
    }
    std::unique_ptr<RabbitMqServer> server(new RabbitMqServer(port, dist_port, tmpl));
    if (tls != nullptr) server->tls_ = *tls;
    Status st = server->Spawn();
    if (st.ok()) return server;
    if (first.ok()) first = st;
    server->dir_.clear();  // keep the directory for the next attempt
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  return first.WithContext("RabbitMqServer: no start in 3 attempts; the first");
}

RabbitMqServer::RabbitMqServer(int port, int dist_port, std::string dir)
    : port_(port), dist_port_(dist_port), dir_(std::move(dir)) {}

RabbitMqServer::~RabbitMqServer() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

Status RabbitMqServer::Spawn() {
  std::string p = std::to_string(port_);
  std::string node = "gapless-amqp-test-" + p + "@localhost";
  std::string pid_file = dir_ + "/pid";
  std::filesystem::create_directories(dir_ + "/log");
  std::filesystem::create_directories(dir_ + "/mnesia");
  if (tls_.has_value()) {
    // The node's own copies (it runs as rabbitmq), and AMQPS only.
    for (const auto& [from, name] :
         {std::pair{tls_->ca, "ca.pem"}, std::pair{tls_->server_cert, "server.pem"},
          std::pair{tls_->server_key, "server-key.pem"}}) {
      std::error_code ec;
      std::filesystem::copy_file(from, dir_ + "/" + name,
                                 std::filesystem::copy_options::overwrite_existing, ec);
    }
    WriteFile(dir_ + "/rabbitmq.conf",
              "listeners.tcp = none\nlisteners.ssl.1 = 127.0.0.1:" + p +
                  "\nssl_options.cacertfile = " + dir_ + "/ca.pem\nssl_options.certfile = " + dir_ +
                  "/server.pem\nssl_options.keyfile = " + dir_ +
                  "/server-key.pem\nssl_options.verify = verify_none\n"
                  "ssl_options.fail_if_no_peer_cert = false\nloopback_users = none\n"
                  "log.console = false\n");
  } else {
    WriteFile(dir_ + "/rabbitmq.conf", "listeners.tcp.1 = 127.0.0.1:" + p +
                                           "\nloopback_users = none\nlog.console = false\n");
  }
  WriteFile(dir_ + "/enabled_plugins", "[].\n");
  WriteFile(dir_ + "/rabbitmq-env.conf", "");
  std::filesystem::remove(pid_file);
  ChownToRabbit(dir_);

  std::vector<std::string> args;
  if (geteuid() == 0) args = {"runuser", "-u", "rabbitmq", "--"};
  std::vector<std::string> rest = {"env",
                                   "HOME=" + dir_,
                                   "RABBITMQ_CONF_ENV_FILE=" + dir_ + "/rabbitmq-env.conf",
                                   "RABBITMQ_CONFIG_FILE=" + dir_ + "/rabbitmq.conf",
                                   "RABBITMQ_ADVANCED_CONFIG_FILE=" + dir_ + "/advanced.config",
                                   "RABBITMQ_ENABLED_PLUGINS_FILE=" + dir_ + "/enabled_plugins",
                                   "RABBITMQ_NODENAME=" + node,
                                   "RABBITMQ_DIST_PORT=" + std::to_string(dist_port_),
                                   "RABBITMQ_MNESIA_BASE=" + dir_ + "/mnesia",
                                   "RABBITMQ_LOG_BASE=" + dir_ + "/log",
                                   "RABBITMQ_PID_FILE=" + pid_file,
                                   kServer,
                                   "-detached"};
  if (!tls_.has_value()) {
    // The plain listener (the TLS node's listeners are all in its config file).
    rest.insert(rest.begin() + 1,
                {"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1", "RABBITMQ_NODE_PORT=" + p});
  }
  args.insert(args.end(), rest.begin(), rest.end());

  pid_t launcher = fork();
  if (launcher < 0) return Internal("RabbitMqServer: fork failed");
  if (launcher == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(launcher, &status, 0);  // -detached: returns once the node is forked off
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Unavailable("RabbitMqServer: the launcher failed (exit " +
                       std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) {
    if (pid_ <= 0) pid_ = ReadPid(pid_file);
    if (pid_ > 0 && !Alive(pid_)) {
      pid_ = -1;
      return Unavailable("RabbitMqServer: the node exited at start: " + LogTail());
    }
    if (pid_ > 0 && PortAnswers(port_)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Stop();
  return Unavailable("RabbitMqServer: no answer on port " + p + " within 60 s: " + LogTail());
}

std::string RabbitMqServer::LogTail() const {
  std::ifstream in(dir_ + "/log/gapless-amqp-test-" + std::to_string(port_) + "@localhost.log");
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > 10) lines.pop_front();
  }
  std::string out;
  for (auto& l : lines) out += "\n  " + l;
  return out.empty() ? "(no log)" : out;
}

void RabbitMqServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Alive(pid_) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (Alive(pid_)) {
    kill(pid_, SIGKILL);
    while (Alive(pid_)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
}

Status RabbitMqServer::Restart() {
  Stop();
  return Spawn();
}

}  // namespace gapless

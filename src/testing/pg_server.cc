#include "testing/pg_server.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "testing/child_process.h"
#include "testing/free_port.h"

namespace gapless {
namespace {

constexpr const char* kBin = "/usr/lib/postgresql/15/bin";

}  // namespace

Result<std::unique_ptr<PgServer>> PgServer::Start(std::function<int()> pick_port) {
  return StartWith(nullptr, "", pick_port);
}

Result<std::unique_ptr<PgServer>> PgServer::StartTls(const TlsCertificates& tls,
                                                     const std::string& also_listen) {
  return StartWith(&tls, also_listen, nullptr);
}

Result<std::unique_ptr<PgServer>> PgServer::StartWith(const TlsCertificates* tls,
                                                      const std::string& also_listen,
                                                      const std::function<int()>& pick_port) {
  if (access((std::string(kBin) + "/pg_ctl").c_str(), X_OK) != 0) {
    return FailedPrecondition(std::string("PgServer: PostgreSQL 15 is not installed (") + kBin +
                              "/pg_ctl); run scripts/setup.sh");
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "gapless-pg-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return Internal("PgServer: mkdtemp failed");
  std::unique_ptr<PgServer> server(new PgServer(0, tmpl));
  if (getuid() == 0) {
    const passwd* pg = getpwnam("postgres");
    if (pg == nullptr) return FailedPrecondition("PgServer: no postgres user to run the server as");
    if (chown(tmpl.c_str(), pg->pw_uid, pg->pw_gid) != 0) {
      return Internal("PgServer: cannot hand " + tmpl + " to the postgres user");
    }
  }
  const std::string data = tmpl + "/data";
  GAPLESS_RETURN_IF_ERROR(server->Run("initdb", {"initdb", "-D", data, "-U", "gapless", "-A",
                                                 "trust", "-E", "UTF8", "--locale=C.UTF-8"}));
  std::string tls_options;
  if (tls != nullptr) {
    // The server's own copies (the postgres user must own the key, mode 0600), and TCP over TLS
    // only: hostssl, no host line.
    for (const auto& [from, to] : {std::pair{tls->server_cert, tmpl + "/server.pem"},
                                   std::pair{tls->server_key, tmpl + "/server-key.pem"}}) {
      std::error_code ec;
      std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) return Internal("PgServer: cannot copy " + from + ": " + ec.message());
      if (getuid() == 0) {
        const passwd* pg = getpwnam("postgres");
        if (pg == nullptr || chown(to.c_str(), pg->pw_uid, pg->pw_gid) != 0) {
          return Internal("PgServer: cannot hand " + to + " to the postgres user");
        }
      }
      chmod(to.c_str(), 0600);
    }
    std::ofstream hba(data + "/pg_hba.conf", std::ios::trunc);
    hba << "local all all trust\nhostssl all all 127.0.0.1/32 trust\n";
    if (!also_listen.empty()) hba << "hostssl all all " << also_listen << "/32 trust\n";
    tls_options = " -c ssl=on -c ssl_cert_file=" + tmpl + "/server.pem -c ssl_key_file=" + tmpl +
                  "/server-key.pem";
  }
  // The port is picked right before the start, and picked again when another process took it
  // meanwhile (a suite running beside this one); the error is the first attempt's.
  constexpr int kAttempts = 3;
  Status first;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    server->port_ = pick_port ? pick_port() : StablePort();  // a restart binds it again
    if (server->port_ <= 0) return Internal("PgServer: no free port");
    Status st = server->Run(
        "start",
        {"pg_ctl", "-D", data, "-l", tmpl + "/server.log", "-w", "-t", "60", "start", "-o",
         "-p " + std::to_string(server->port_) + " -k " + tmpl + " -c listen_addresses=127.0.0.1" +
             (also_listen.empty() ? "" : "," + also_listen) +
             " -c max_connections=300 -c fsync=off" + tls_options});
    if (st.ok()) {
      server->started_ = true;
      return server;
    }
    if (first.ok()) first = st;
  }
  return first.WithContext("PgServer: no start in " + std::to_string(kAttempts) +
                           " attempts; the first");
}

PgServer::~PgServer() {
  if (started_) {
    (void)Run("stop",
              {"pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "-t", "30", "stop"});
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string PgServer::url(const std::string& database) const {
  return "postgresql://gapless@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

Status PgServer::Restart() {
  return Run("restart", {"pg_ctl", "-D", dir_ + "/data", "-m", "fast", "-w", "-t", "60", "-l",
                         dir_ + "/server.log", "restart"});
}

Status PgServer::Run(const std::string& what, std::vector<std::string> args) {
  args[0] = std::string(kBin) + "/" + args[0];
  if (getuid() == 0) args.insert(args.begin(), {"/usr/sbin/runuser", "-u", "postgres", "--"});
  // stdout and stderr both to the log (initdb and pg_ctl report progress on stdout).
  const std::string log = dir_ + "/pg_ctl.log";
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const int code = pid < 0 ? -1 : WaitForExit(pid, 120);
  if (code != 0) {
    return Unavailable("PgServer: " + what + " failed (exit " + std::to_string(code) +
                       "): " + LogTail());
  }
  return Status::Ok();
}

std::string PgServer::LogTail() const {
  std::string tail;
  for (const char* name : {"/pg_ctl.log", "/server.log"}) {
    std::ifstream in(dir_ + name);
    std::stringstream s;
    s << in.rdbuf();
    std::string text = s.str();
    if (text.size() > 1500) text = text.substr(text.size() - 1500);
    tail += text;
  }
  return tail;
}

}  // namespace gapless

// PgServer: a private PostgreSQL 15 server of one test or chaos scenario, for what restarts the
// server (the chaos harness's pg-restart fault) and so cannot use the shared fixture server of
// scripts/pg.sh.
//
// Start() creates a data directory under the system's temporary directory (reachable by the
// postgres user), runs initdb there (superuser "gapless", trust authentication, loopback only)
// and starts the server on a free port of 127.0.0.1 (another, up to 3 times, when the port was
// taken meanwhile; the error is the first attempt's). PostgreSQL refuses to run as root: as root
// every command runs as the postgres user (runuser), which then owns the directory, as
// scripts/pg.sh does. Restart() is a fast restart (every connection cut, the data kept: what a
// crash-free restart by an operator or an orchestrator looks like to clients). The destructor
// stops the server immediately and removes the directory. Starting takes a few seconds (initdb).
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "testing/tls_certs.h"

namespace gapless {

class PgServer {
 public:
  // Unavailable (with the log's tail) when initdb or the start fails; FailedPrecondition when
  // PostgreSQL 15 is not installed (/usr/lib/postgresql/15/bin).
  // `pick_port`: where each start attempt listens (StablePort() unless a test hands out ports of
  // its own, a taken one to see the next attempt start).
  static Result<std::unique_ptr<PgServer>> Start(std::function<int()> pick_port = nullptr);
  // TLS only: the server presents `tls`'s server certificate and accepts TCP connections over
  // TLS only (pg_hba hostssl; a plain connection is refused). The files are copied next to the
  // data directory, for the postgres user. `also_listen`: one more address of this machine to
  // listen on and take TLS connections from (besides 127.0.0.1).
  static Result<std::unique_ptr<PgServer>> StartTls(const TlsCertificates& tls,
                                                    const std::string& also_listen = "");
  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  int port() const { return port_; }
  // postgresql://gapless@127.0.0.1:<port>/<database>
  std::string url(const std::string& database = "postgres") const;

  // pg_ctl restart -m fast, waiting until the server accepts connections again.
  Status Restart();

 private:
  PgServer(int port, std::string dir) : port_(port), dir_(std::move(dir)) {}
  static Result<std::unique_ptr<PgServer>> StartWith(const TlsCertificates* tls,
                                                     const std::string& also_listen,
                                                     const std::function<int()>& pick_port);
  // Runs a PostgreSQL program (as postgres when root) and waits; its output goes to log.
  Status Run(const std::string& what, std::vector<std::string> args);
  std::string LogTail() const;

  int port_;
  std::string dir_;  // holds data/ and the logs
  bool started_ = false;
};

}  // namespace gapless

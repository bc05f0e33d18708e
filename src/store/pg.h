// pg: a small RAII wrapper over libpq: connections, queries, COPY FROM STDIN, and a fixed pool.
//
// Every libpq failure becomes a Status whose code carries the retry policy:
//   Unavailable         the server is unreachable or the connection was lost (retry the call; the
//                       connection reconnects by itself at its next use), or it is starting up,
//                       shutting down, out of connections, or cancelled the statement
//   Aborted             serialization_failure (40001), deadlock_detected (40P01),
//                       lock_not_available (55P03): redo the unit of work
//   InvalidData         a data exception (SQLSTATE class 22): the rows we sent were malformed
//   FailedPrecondition  a bad URL, authentication failure, unknown database (fix the config)
//   Internal            everything else, e.g. unique_violation
// A server error's SQLSTATE is both in the message and, for code, in Status::reason() as
// PgSqlStateReason(state), e.g. "sqlstate:23505".
// Messages name host:port and database but never the password.
//
// Thread-safety: a PgConn is used by one thread at a time (like a PGconn). PgPool is thread-safe;
// a connection leased from it belongs to the leasing thread until the lease is destroyed.
// libpq types stay out of this header.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

struct pg_conn;
struct pg_result;
struct pg_cancel;

namespace gapless {

struct PgConnectOptions {
  // Passed as libpq's connect_timeout unless the URL sets its own. Bounds each connect attempt.
  int connect_timeout_seconds = 10;
  // TCP keepalives, so a half-open connection (server gone after a failover) is noticed instead
  // of hanging a worker forever. The URL can override each of them.
  int keepalives_idle_seconds = 30;
  int keepalives_interval_seconds = 10;
  int keepalives_count = 3;
  std::string application_name = "gapless";
  // Every session of the connection is read-only (default_transaction_read_only=on, sent as a
  // startup option with the URL's own `options`), the first and each one after a reconnect
  // (PQreset keeps the startup options), so nothing run on it can write: verify and export.
  bool read_only = false;
};

// TLS settings gapless adds to a connection whose URL gives no `sslmode` (nor PGSSLMODE): a server
// off this machine (any host but a Unix socket, localhost, 127.0.0.0/8 or ::1) has its certificate
// verified, `sslmode=verify-full`, against `sslrootcert` when the URL or PGSSLROOTCERT names one,
// else ~/.postgresql/root.crt when it exists, else the system's CAs (`system_cas`, Debian's
// bundle). Loopback servers keep libpq's default (`prefer`). Empty when nothing is added; the
// URL's own values win over these. FailedPrecondition if the URL does not parse.
inline constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";
Result<std::vector<std::pair<std::string, std::string>>> PgTlsDefaults(
    const std::string& url, const std::string& system_cas = kSystemCaBundle);

// `url` pointing at database `dbname` instead (same host, user, options). FailedPrecondition if
// the URL does not parse.
Result<std::string> PgUrlWithDatabase(const std::string& url, const std::string& dbname);

// The Status::reason() of a server error with this SQLSTATE ("sqlstate:" + state).
inline std::string PgSqlStateReason(std::string_view state) {
  return "sqlstate:" + std::string(state);
}
inline constexpr std::string_view kPgUniqueViolation = "23505";

// Quotes an identifier for SQL ("a""b"). For the few places that build SQL with names.
std::string PgQuoteIdent(std::string_view ident);

// A query result. Owns its PGresult. Row and column indexes are zero-based and must be in range.
class PgResult {
 public:
  explicit PgResult(pg_result* res);
  PgResult(PgResult&&) noexcept;
  PgResult& operator=(PgResult&&) noexcept;
  ~PgResult();

  int rows() const;
  int columns() const;
  bool IsNull(int row, int col) const;
  // The text value; empty for NULL. Valid while this PgResult lives.
  std::string_view Get(int row, int col) const;
  std::optional<std::string> GetOptional(int row, int col) const;
  // The value as an integer; InvalidData naming the column if it is NULL or not a number.
  Result<int64_t> GetInt64(int row, int col) const;
  // Rows affected by an INSERT/UPDATE/DELETE/COPY, 0 if not applicable.
  uint64_t affected_rows() const;
  // The command tag: "COMMIT", "INSERT 0 5", ...
  std::string_view command_status() const;

 private:
  pg_result* res_;
};

// Cancels the statement a connection is running, from another thread (libpq's PQcancel: the
// statement fails with SQLSTATE 57014). Made by the connection's own thread between statements
// (PgConn::MakeCanceller); it addresses that session, so make another after a reconnect.
class PgCanceller {
 public:
  ~PgCanceller();
  PgCanceller(const PgCanceller&) = delete;
  PgCanceller& operator=(const PgCanceller&) = delete;
  // True when the cancel request was sent (the statement may have ended already).
  bool Cancel();

 private:
  friend class PgConn;
  explicit PgCanceller(pg_cancel* cancel) : cancel_(cancel) {}
  pg_cancel* cancel_;
};

// A query parameter in text format; nullopt is SQL NULL.
using PgParam = std::optional<std::string>;

class PgConn {
 public:
  // Connects (blocking, bounded by connect_timeout). Unavailable naming host:port when the
  // server refuses or cannot be reached; FailedPrecondition for a URL that does not parse, a
  // failed authentication or a database that does not exist.
  static Result<std::unique_ptr<PgConn>> Connect(const std::string& url,
                                                 const PgConnectOptions& options = {});
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Runs SQL through the simple-query protocol; `sql` may hold several statements.
  Status Exec(std::string_view sql);
  // Runs one statement with text parameters ($1, $2, ...) and returns its rows.
  Result<PgResult> Query(const std::string& sql, const std::vector<PgParam>& params = {});
  // Runs one statement and hands its rows to `on_row` one at a time as they arrive (libpq
  // single-row mode), so a large result never sits in memory whole. Each call gets a PgResult
  // holding exactly one row (row 0). If on_row fails, the query is cancelled and its Status is
  // returned.
  Status QueryEach(const std::string& sql, const std::vector<PgParam>& params,
                   const std::function<Status(const PgResult& row)>& on_row);

  // COPY ... FROM STDIN. Start with BeginCopy, send the text-format rows in any number of
  // PutCopyData calls (each call sends its bytes; batch them, see CopyWriter), then EndCopy. Until
  // EndCopy the connection accepts nothing else. EndCopy returns the server's verdict on the rows.
  Status BeginCopy(const std::string& copy_sql);
  Status PutCopyData(std::string_view data);
  // Ends the COPY. With a non-empty `abort_reason` the COPY fails on purpose (nothing is stored)
  // and the returned status is that of the abort itself.
  Status EndCopy(std::string_view abort_reason = {});

  // LISTEN/NOTIFY: after `LISTEN channel` (Exec), waits up to timeout_ms for a notification on
  // any channel this connection listens to. True when at least one arrived (all that arrived are
  // consumed); false on timeout; Unavailable when the connection broke (LISTEN again after the
  // reconnect: it is session state). Must not be called inside a transaction or a COPY.
  Result<bool> WaitForNotification(int64_t timeout_ms);

  // True when the last operation found the connection dead; the next operation reconnects. A
  // connection the server ended while it was idle (a restart, pg_terminate_backend) is noticed
  // before the next statement outside a transaction, without a round trip, and reconnected then,
  // so that statement runs; one that dies during a statement or inside a transaction fails it
  // with Unavailable.
  bool broken() const;
  // Incremented on every reconnect: session state (temporary tables, SET) is gone when it changes.
  uint64_t session_id() const { return session_id_; }
  // "host:port/dbname" for messages.
  const std::string& address() const { return address_; }
  // True inside a transaction block (BEGIN without COMMIT/ROLLBACK yet).
  bool in_transaction() const;

  // Session-scoped flags for callers that set up session state once per connection (e.g. the
  // writer's staging tables). Cleared on reconnect.
  bool session_flag(std::string_view name) const;
  void set_session_flag(std::string_view name);
  // The first flag that starts with `prefix` (a flag that carries a value), or "" when none does.
  std::string_view session_flag_with_prefix(std::string_view prefix) const;

  // For Cancel from another thread (see PgCanceller); nullptr when the connection is down.
  std::unique_ptr<PgCanceller> MakeCanceller();

 private:
  PgConn(pg_conn* conn, std::string address);
  // Reconnects a dead connection (or an idle one the server ended); Unavailable if that fails.
  Status EnsureOpen();
  bool PeerEnded();
  static void OnNotice(void* self, const pg_result* res);
  Status ErrorFrom(pg_result* res, std::string_view what);

  pg_conn* conn_;
  std::string address_;
  uint64_t session_id_ = 1;
  bool server_ended_ = false;  // a FATAL notice came: the server is ending this session
  std::vector<std::string> session_flags_;
  bool in_copy_ = false;
};

// Batches COPY text into ~flush_bytes chunks. Append rows to buffer(), call MaybeFlush() now and
// then, Finish() at the end. The destructor aborts an unfinished COPY.
class CopyWriter {
 public:
  CopyWriter(PgConn& conn, std::string* buffer, size_t flush_bytes = 1 << 20)
      : conn_(conn), buffer_(buffer), flush_bytes_(flush_bytes) {}
  ~CopyWriter();
  CopyWriter(const CopyWriter&) = delete;
  CopyWriter& operator=(const CopyWriter&) = delete;

  Status Begin(const std::string& copy_sql);
  std::string* buffer() { return buffer_; }
  Status MaybeFlush() { return buffer_->size() >= flush_bytes_ ? Flush() : Status::Ok(); }
  Status Flush();
  Status Finish();

 private:
  PgConn& conn_;
  std::string* buffer_;
  size_t flush_bytes_;
  bool active_ = false;
};

// A fixed set of connections, opened eagerly. Acquire blocks until one is free. A connection that
// broke is handed out as is and reconnects at its next use (returning Unavailable if the server is
// still gone), so Acquire itself never fails. A connection returned inside a transaction is rolled
// back first. The pool must outlive its leases.
class PgPool {
 public:
  class Lease {
   public:
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {
      other.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    PgConn& operator*() const { return *conn_; }
    PgConn* operator->() const { return conn_.get(); }

   private:
    friend class PgPool;
    Lease(PgPool* pool, std::unique_ptr<PgConn> conn) : pool_(pool), conn_(std::move(conn)) {}
    PgPool* pool_;
    std::unique_ptr<PgConn> conn_;
  };

  // Opens `size` (>= 1) connections; fails with the first connection's error.
  static Result<std::unique_ptr<PgPool>> Open(const std::string& url, size_t size,
                                              const PgConnectOptions& options = {});

  Lease Acquire();
  size_t size() const { return size_; }
  // The URL the pool connects to (for a dedicated connection beside it, e.g. a LISTEN).
  const std::string& url() const { return url_; }
  const PgConnectOptions& options() const { return options_; }

 private:
  PgPool(size_t size, std::string url, PgConnectOptions options)
      : size_(size), url_(std::move(url)), options_(options) {}
  void Release(std::unique_ptr<PgConn> conn);

  size_t size_;
  std::string url_;
  PgConnectOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<PgConn>> idle_;
};

// A transaction on `conn`: BEGIN in Begin(), COMMIT in Commit(); the destructor rolls back a
// transaction that was begun but not committed (ignoring errors: a dead connection has no
// transaction left to roll back).
class PgTransaction {
 public:
  explicit PgTransaction(PgConn& conn) : conn_(conn) {}
  ~PgTransaction();
  PgTransaction(const PgTransaction&) = delete;
  PgTransaction& operator=(const PgTransaction&) = delete;

  Status Begin(std::string_view begin_sql = "BEGIN");
  // If COMMIT fails because the connection dropped, whether it happened is unknown ("in doubt");
  // the Unavailable returned says so. Callers whose writes are idempotent simply redo them.
  Status Commit();

 private:
  PgConn& conn_;
  bool open_ = false;
};

}  // namespace gapless

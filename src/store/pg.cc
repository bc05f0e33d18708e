#include "store/pg.h"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/redact.h"

namespace gapless {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// libpq messages span lines ("...failed: Connection refused\n\tIs the server running..."); logs
// want one line.
std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

bool IsUri(std::string_view url) {
  return StartsWith(url, "postgresql://") || StartsWith(url, "postgres://");
}

struct ParsedConninfo {
  std::string host, port, dbname, user;
  std::string hosts;    // as given: "h1,h2", a Unix socket directory, or empty
  std::string options;  // libpq's `options` (server settings sent at start-up), as given
  bool sslmode = false, sslrootcert = false;  // given in the URL
};

// Parses with libpq itself, so what we report is what libpq will use.
Result<ParsedConninfo> ParseConninfo(const std::string& url) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (opts == nullptr) {
    std::string why = err != nullptr ? OneLine(err) : "out of memory";
    if (err != nullptr) PQfreemem(err);
    // libpq quotes what it could not read, secrets and all.
    std::string scheme;
    if (size_t sep = url.find("://"); sep != std::string::npos && !IsUri(url)) {
      scheme = " (" + RedactText(url.substr(0, sep + 3)) +
               " is not PostgreSQL: expected postgresql://user@host:port/dbname or libpq's "
               "key=value settings)";
    }
    return FailedPrecondition("database URL " + RedactUrl(url) +
                              " does not parse: " + RedactText(why) + scheme);
  }
  ParsedConninfo out;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    std::string_view k = o->keyword;
    if (k == "host" || (k == "hostaddr" && out.host.empty())) out.host = o->val;
    if (k == "port") out.port = o->val;
    if (k == "dbname") out.dbname = o->val;
    if (k == "user") out.user = o->val;
    if (k == "host" || (k == "hostaddr" && out.hosts.empty())) out.hosts = o->val;
    if (k == "sslmode") out.sslmode = true;
    if (k == "sslrootcert") out.sslrootcert = true;
    if (k == "options") out.options = o->val;
  }
  PQconninfoFree(opts);
  // libpq ends the user info at the FIRST '@': the rest of a password holding a raw '@' became
  // the host name, and the connection would fail blaming DNS (and show that rest).
  if (out.host.find('@') != std::string::npos) {
    return FailedPrecondition("database URL " + RedactUrl(url) +
                              ": the user name or password holds a raw '@'; percent-encode it "
                              "as %40");
  }
  auto env_or = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr && *v != '\0' ? v : fallback);
  };
  if (out.host.empty()) out.host = env_or("PGHOST", "localhost");
  if (out.port.empty()) out.port = env_or("PGPORT", "5432");
  if (out.user.empty()) out.user = env_or("PGUSER", "");
  if (out.dbname.empty()) out.dbname = env_or("PGDATABASE", out.user.c_str());
  return out;
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// A host libpq reaches on this machine only: a Unix socket directory, localhost, 127.0.0.0/8, ::1.
bool IsLocalHost(std::string_view host) {
  return host.empty() || host.front() == '/' || host.front() == '@' || host == "localhost" ||
         StartsWith(host, "127.") || host == "::1" || host == "[::1]";
}

Code CodeForSqlState(std::string_view state) {
  if (state.size() != 5) return Code::kInternal;
  std::string_view cls = state.substr(0, 2);
  if (cls == "08") return Code::kUnavailable;  // connection exception
  if (state == "40001" || state == "40P01" || state == "55P03") return Code::kAborted;
  if (state == "57P01" || state == "57P02" || state == "57P03" || state == "57014") {
    return Code::kUnavailable;  // admin/crash shutdown, cannot connect now, query cancelled
  }
  if (cls == "53") return Code::kUnavailable;  // insufficient resources (disk full, too many conns)
  if (cls == "22") return Code::kInvalidData;  // data exception: the input was malformed
  if (cls == "28" || state == "3D000") return Code::kFailedPrecondition;  // auth, unknown db
  return Code::kInternal;
}

}  // namespace

Result<std::string> PgUrlWithDatabase(const std::string& url, const std::string& dbname) {
  GAPLESS_ASSIGN_OR_RETURN(auto parsed, ParseConninfo(url));
  (void)parsed;
  if (IsUri(url)) {
    size_t scheme_end = url.find("://") + 3;
    size_t authority_end = url.find_first_of("/?", scheme_end);
    if (authority_end == std::string::npos) return url + "/" + dbname;
    size_t query = url.find('?', authority_end);
    std::string out = url.substr(0, authority_end) + "/" + dbname;
    if (query != std::string::npos) out += url.substr(query);
    return out;
  }
  std::string quoted;
  for (char c : dbname) {
    if (c == '\'' || c == '\\') quoted.push_back('\\');
    quoted.push_back(c);
  }
  return url + " dbname='" + quoted + "'";
}

std::string PgQuoteIdent(std::string_view ident) {
  std::string out = "\"";
  for (char c : ident) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

namespace {

std::vector<std::pair<std::string, std::string>> TlsDefaultsOf(const ParsedConninfo& info,
                                                               const std::string& system_cas) {
  std::vector<std::pair<std::string, std::string>> out;
  if (info.sslmode || EnvSet("PGSSLMODE")) return out;
  const std::string hosts =
      info.hosts.empty() && EnvSet("PGHOST") ? std::getenv("PGHOST") : info.hosts;
  bool local = true;
  for (size_t from = 0; from <= hosts.size();) {
    size_t comma = std::min(hosts.find(',', from), hosts.size());
    if (!IsLocalHost(std::string_view(hosts).substr(from, comma - from))) local = false;
    from = comma + 1;
  }
  if (local) return out;
  out.emplace_back("sslmode", "verify-full");
  if (info.sslrootcert || EnvSet("PGSSLROOTCERT")) return out;
  const char* home = std::getenv("HOME");
  if (home != nullptr && access((std::string(home) + "/.postgresql/root.crt").c_str(), R_OK) == 0) {
    return out;
  }
  if (access(system_cas.c_str(), R_OK) == 0) out.emplace_back("sslrootcert", system_cas);
  return out;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> PgTlsDefaults(
    const std::string& url, const std::string& system_cas) {
  GAPLESS_ASSIGN_OR_RETURN(ParsedConninfo info, ParseConninfo(url));
  return TlsDefaultsOf(info, system_cas);
}

// ---- PgResult ----

PgResult::PgResult(pg_result* res) : res_(res) {}
PgResult::PgResult(PgResult&& other) noexcept : res_(std::exchange(other.res_, nullptr)) {}
PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    if (res_ != nullptr) PQclear(res_);
    res_ = std::exchange(other.res_, nullptr);
  }
  return *this;
}
PgResult::~PgResult() {
  if (res_ != nullptr) PQclear(res_);
}

int PgResult::rows() const { return res_ != nullptr ? PQntuples(res_) : 0; }
int PgResult::columns() const { return res_ != nullptr ? PQnfields(res_) : 0; }
bool PgResult::IsNull(int row, int col) const { return PQgetisnull(res_, row, col) != 0; }

std::string_view PgResult::Get(int row, int col) const {
  return std::string_view(PQgetvalue(res_, row, col),
                          static_cast<size_t>(PQgetlength(res_, row, col)));
}

std::optional<std::string> PgResult::GetOptional(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return std::string(Get(row, col));
}

Result<int64_t> PgResult::GetInt64(int row, int col) const {
  const char* name = PQfname(res_, col);
  if (IsNull(row, col)) {
    return InvalidData(std::string("column ") + (name ? name : "?") + " is NULL");
  }
  std::string_view text = Get(row, col);
  errno = 0;
  char* end = nullptr;
  std::string copy(text);
  long long v = std::strtoll(copy.c_str(), &end, 10);
  if (errno != 0 || end == copy.c_str() || *end != '\0') {
    return InvalidData(std::string("column ") + (name ? name : "?") +
                       " is not an integer: " + copy);
  }
  return static_cast<int64_t>(v);
}

std::string_view PgResult::command_status() const {
  return res_ != nullptr ? std::string_view(PQcmdStatus(res_)) : std::string_view();
}

uint64_t PgResult::affected_rows() const {
  if (res_ == nullptr) return 0;
  const char* n = PQcmdTuples(res_);
  return (n != nullptr && *n != '\0') ? std::strtoull(n, nullptr, 10) : 0;
}

// ---- PgConn ----

PgConn::PgConn(pg_conn* conn, std::string address) : conn_(conn), address_(std::move(address)) {
  PQsetNoticeReceiver(conn_, &PgConn::OnNotice, this);  // kept by PQreset
}

PgConn::~PgConn() {
  if (conn_ != nullptr) PQfinish(conn_);
}

Result<std::unique_ptr<PgConn>> PgConn::Connect(const std::string& url,
                                                const PgConnectOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(ParsedConninfo info, ParseConninfo(url));
  std::string address = info.host + ":" + info.port + "/" + info.dbname;
  std::string timeout = std::to_string(options.connect_timeout_seconds);
  std::string idle = std::to_string(options.keepalives_idle_seconds);
  std::string interval = std::to_string(options.keepalives_interval_seconds);
  std::string count = std::to_string(options.keepalives_count);
  const auto tls = TlsDefaultsOf(info, kSystemCaBundle);
  // dbname comes last: its expansion (the URL) overrides our defaults above it.
  std::vector<const char*> keys = {"connect_timeout",  "keepalives",
                                   "keepalives_idle",  "keepalives_interval",
                                   "keepalives_count", "fallback_application_name",
                                   "client_encoding"};
  std::vector<const char*> values = {timeout.c_str(), "1",
                                     idle.c_str(),    interval.c_str(),
                                     count.c_str(),   options.application_name.c_str(),
                                     "UTF8"};
  for (const auto& [key, value] : tls) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keys.push_back("dbname");
  values.push_back(url.c_str());
  // After dbname, so the URL's `options` (or PGOPTIONS) cannot drop it: they are kept before it.
  std::string startup_options;
  if (options.read_only) {
    const char* env = std::getenv("PGOPTIONS");
    startup_options = info.options.empty() && env != nullptr ? env : info.options;
    startup_options += (startup_options.empty() ? "" : " ");
    startup_options += "-c default_transaction_read_only=on";
    keys.push_back("options");
    values.push_back(startup_options.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) return Unavailable("connect to " + address + ": out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    // libpq's message may quote the host or the connection string it was given.
    std::string why = RedactText(OneLine(PQerrorMessage(conn)));
    PQfinish(conn);
    std::string msg = "connect to " + address + " as user " + info.user + " failed: " + why;
    // The server answered but refused us: a configuration problem, not a transient one.
    bool transient = Contains(why, "starting up") || Contains(why, "shutting down") ||
                     Contains(why, "too many clients") || Contains(why, "recovery mode") ||
                     Contains(why, "remaining connection slots");
    // ... or libpq rejected an option value in the URL ("invalid integer value ... port"), or
    // the server's certificate does not verify (or it has no TLS where TLS is required).
    bool refused_by_server = Contains(why, "FATAL") || Contains(why, "authentication") ||
                             Contains(why, "password") || Contains(why, "pg_hba.conf") ||
                             Contains(why, "invalid") || Contains(why, "certificate") ||
                             Contains(why, "does not support SSL");
    if (refused_by_server && !transient) {
      if (!tls.empty() && (Contains(why, "certificate") || Contains(why, "SSL"))) {
        msg +=
            " (the server is not on this machine, so gapless verifies its TLS certificate: "
            "sslmode=verify-full" +
            std::string(tls.size() > 1 ? " against the system's CAs" : "") +
            "; name a private CA with sslrootcert=PATH in the URL, or opt out with "
            "sslmode=require or sslmode=disable)";
      }
      return FailedPrecondition(msg + " (database URL " + RedactUrl(url) + ")");
    }
    return Unavailable(msg);
  }
  return std::unique_ptr<PgConn>(new PgConn(conn, std::move(address)));
}

std::unique_ptr<PgCanceller> PgConn::MakeCanceller() {
  if (PQstatus(conn_) != CONNECTION_OK) return nullptr;
  PGcancel* cancel = PQgetCancel(conn_);
  return cancel != nullptr ? std::unique_ptr<PgCanceller>(new PgCanceller(cancel)) : nullptr;
}

PgCanceller::~PgCanceller() { PQfreeCancel(cancel_); }

bool PgCanceller::Cancel() {
  char err[256];
  return PQcancel(cancel_, err, sizeof(err)) == 1;
}

bool PgConn::broken() const { return PQstatus(conn_) != CONNECTION_OK; }

bool PgConn::in_transaction() const {
  PGTransactionStatusType t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

bool PgConn::session_flag(std::string_view name) const {
  // A dead connection's session state is gone, even before the reconnect clears the flags.
  if (broken()) return false;
  return std::find(session_flags_.begin(), session_flags_.end(), name) != session_flags_.end();
}

std::string_view PgConn::session_flag_with_prefix(std::string_view prefix) const {
  if (broken()) return {};
  for (const std::string& flag : session_flags_) {
    if (flag.starts_with(prefix)) return flag;
  }
  return {};
}

void PgConn::set_session_flag(std::string_view name) {
  if (!session_flag(name)) session_flags_.emplace_back(name);
}

Result<bool> PgConn::WaitForNotification(int64_t timeout_ms) {
  const uint64_t session = session_id_;
  GAPLESS_RETURN_IF_ERROR(EnsureOpen());
  if (session_id_ != session) {  // the new session does not listen: the caller must LISTEN again
    return Unavailable("LISTEN connection to " + address_ + " was lost and reconnected");
  }
  auto drain = [this] {
    bool any = false;
    while (PGnotify* n = PQnotifies(conn_)) {
      any = true;
      PQfreemem(n);
    }
    return any;
  };
  if (PQconsumeInput(conn_) == 0) {
    return Unavailable("LISTEN connection to " + address_ + ": " + OneLine(PQerrorMessage(conn_)));
  }
  if (drain()) return true;
  pollfd fd{PQsocket(conn_), POLLIN, 0};
  if (fd.fd < 0) return Unavailable("LISTEN connection to " + address_ + " has no socket");
  int ready = poll(&fd, 1, static_cast<int>(std::max<int64_t>(timeout_ms, 0)));
  if (ready <= 0) return false;
  if (PQconsumeInput(conn_) == 0) {
    return Unavailable("LISTEN connection to " + address_ + ": " + OneLine(PQerrorMessage(conn_)));
  }
  return drain();
}

// True when the server ended this idle connection (a restart, pg_terminate_backend, an idle
// timeout): its socket is readable while no statement runs, and what it holds is the end, or the
// FATAL message the server sends before it (libpq hands an error that arrives while idle to the
// notice receiver: OnNotice). A NOTIFY also makes the socket readable; libpq keeps it for
// PQnotifies. No round trip: polls with no wait.
bool PgConn::PeerEnded() {
  if (server_ended_) return true;            // parsed earlier (a WaitForNotification, say)
  for (int round = 0; round < 4; ++round) {  // a few rounds: NOTIFYs could keep coming
    pollfd fd{PQsocket(conn_), POLLIN, 0};
    if (fd.fd < 0) return true;
    if (poll(&fd, 1, 0) <= 0) return false;
    if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK) return true;
    (void)PQisBusy(conn_);  // parses what came: an error goes to OnNotice
    if (server_ended_) return true;
  }
  return false;
}

void PgConn::OnNotice(void* self, const pg_result* res) {
  // Server notices ("table does not exist, skipping") are informational and dropped; libpq would
  // print them on stderr. A FATAL one is the server ending the session.
  const char* severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity != nullptr &&
      (std::strcmp(severity, "FATAL") == 0 || std::strcmp(severity, "PANIC") == 0)) {
    static_cast<PgConn*>(self)->server_ended_ = true;
  }
}

Status PgConn::EnsureOpen() {
  if (in_copy_) return Internal("connection to " + address_ + " is busy with a COPY");
  // Outside a transaction a connection the server ended while it was idle is reconnected before
  // the statement, instead of failing it: after a server restart each pooled connection would
  // otherwise cost its next user an error (and a consumer a retry delay each). Inside a
  // transaction the statement must fail: a new session does not hold the transaction.
  if (PQstatus(conn_) == CONNECTION_OK &&
      (PQtransactionStatus(conn_) != PQTRANS_IDLE || !PeerEnded())) {
    return Status::Ok();
  }
  PQreset(conn_);
  server_ended_ = false;
  session_flags_.clear();
  ++session_id_;
  if (PQstatus(conn_) != CONNECTION_OK) {
    return Unavailable("reconnect to " + address_ + " failed: " + OneLine(PQerrorMessage(conn_)));
  }
  return Status::Ok();
}

Status PgConn::ErrorFrom(pg_result* res, std::string_view what) {
  auto field = [res](int code) -> std::string {
    const char* v = res != nullptr ? PQresultErrorField(res, code) : nullptr;
    return v != nullptr ? v : "";
  };
  std::string state = field(PG_DIAG_SQLSTATE);
  std::string primary = field(PG_DIAG_MESSAGE_PRIMARY);
  if (primary.empty()) primary = OneLine(PQerrorMessage(conn_));
  std::string msg = std::string(what) + " on " + address_ + ": " + primary;
  if (!state.empty()) msg += " (SQLSTATE " + state + ")";
  if (std::string detail = field(PG_DIAG_MESSAGE_DETAIL); !detail.empty()) {
    msg += "; " + OneLine(detail);
  }
  if (std::string context = field(PG_DIAG_CONTEXT); !context.empty()) {
    msg += "; " + OneLine(context);
  }
  if (PQstatus(conn_) != CONNECTION_OK) {
    return Unavailable("connection lost: " + msg);
  }
  if (state.empty()) return Internal(msg);
  return Status(CodeForSqlState(state), msg).WithReason(PgSqlStateReason(state));
}

namespace {
std::string_view FirstWords(std::string_view sql) {
  size_t start = sql.find_first_not_of(" \t\n");
  if (start == std::string_view::npos) return "";
  sql = sql.substr(start);
  return sql.substr(0, std::min<size_t>(sql.size(), 60));
}

// The statement's first words in double quotes, for messages. Built with append: GCC 12 at -O3
// warns (-Wrestrict, a false positive) on `"literal" + std::string&&`.
std::string QuotedStatement(std::string_view sql) {
  std::string out = "\"";
  out += OneLine(FirstWords(sql));
  out += '"';
  return out;
}
}  // namespace

Status PgConn::Exec(std::string_view sql) {
  GAPLESS_RETURN_IF_ERROR(EnsureOpen());
  std::string copy(sql);
  PGresult* res = PQexec(conn_, copy.c_str());
  ExecStatusType st = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
    PQclear(res);
    return Status::Ok();
  }
  Status err = ErrorFrom(res, QuotedStatement(sql));
  if (res != nullptr) PQclear(res);
  // A COPY started through Exec is a misuse; leave the connection usable.
  if (st == PGRES_COPY_IN) {
    PQputCopyEnd(conn_, "COPY through Exec");
    while (PGresult* r = PQgetResult(conn_)) PQclear(r);
    return Internal("Exec cannot run COPY FROM STDIN; use BeginCopy");
  }
  return err;
}

namespace {
struct ParamArrays {
  std::vector<const char*> values;
  explicit ParamArrays(const std::vector<PgParam>& params) {
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p.has_value() ? p->c_str() : nullptr);
  }
};
}  // namespace

Result<PgResult> PgConn::Query(const std::string& sql, const std::vector<PgParam>& params) {
  GAPLESS_RETURN_IF_ERROR(EnsureOpen());
  ParamArrays arrays(params);
  PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                               arrays.values.data(), nullptr, nullptr, 0);
  ExecStatusType st = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return PgResult(res);
  Status err = ErrorFrom(res, QuotedStatement(sql));
  if (res != nullptr) PQclear(res);
  return err;
}

Status PgConn::QueryEach(const std::string& sql, const std::vector<PgParam>& params,
                         const std::function<Status(const PgResult& row)>& on_row) {
  GAPLESS_RETURN_IF_ERROR(EnsureOpen());
  ParamArrays arrays(params);
  std::string what = QuotedStatement(sql);
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                        arrays.values.data(), nullptr, nullptr, 0) != 1) {
    return ErrorFrom(nullptr, what);
  }
  PQsetSingleRowMode(conn_);
  Status result;
  bool cancelled = false;
  while (PGresult* res = PQgetResult(conn_)) {
    PgResult owned(res);
    if (!result.ok()) continue;  // draining after an error or a cancel
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_SINGLE_TUPLE) {
      result = on_row(owned);
      if (!result.ok() && !cancelled) {
        cancelled = true;
        if (PGcancel* cancel = PQgetCancel(conn_)) {
          char buf[256];
          PQcancel(cancel, buf, sizeof buf);
          PQfreeCancel(cancel);
        }
      }
    } else if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      result = ErrorFrom(res, what);
    }
  }
  if (result.ok() && PQstatus(conn_) != CONNECTION_OK) return ErrorFrom(nullptr, what);
  return result;
}

Status PgConn::BeginCopy(const std::string& copy_sql) {
  GAPLESS_RETURN_IF_ERROR(EnsureOpen());
  PGresult* res = PQexec(conn_, copy_sql.c_str());
  ExecStatusType st = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st == PGRES_COPY_IN) {
    PQclear(res);
    in_copy_ = true;
    return Status::Ok();
  }
  Status err = ErrorFrom(res, QuotedStatement(copy_sql));
  if (res != nullptr) PQclear(res);
  return err;
}

Status PgConn::PutCopyData(std::string_view data) {
  if (!in_copy_) return Internal("PutCopyData outside a COPY");
  if (data.empty()) return Status::Ok();
  if (PQputCopyData(conn_, data.data(), static_cast<int>(data.size())) != 1) {
    return ErrorFrom(nullptr, "COPY data");
  }
  return Status::Ok();
}

Status PgConn::EndCopy(std::string_view abort_reason) {
  if (!in_copy_) return Internal("EndCopy outside a COPY");
  in_copy_ = false;
  std::string reason(abort_reason);
  if (PQputCopyEnd(conn_, abort_reason.empty() ? nullptr : reason.c_str()) != 1) {
    Status err = ErrorFrom(nullptr, "COPY end");
    while (PGresult* r = PQgetResult(conn_)) PQclear(r);
    return err;
  }
  Status result;
  bool first = true;
  while (PGresult* res = PQgetResult(conn_)) {
    if (first) {
      first = false;
      if (PQresultStatus(res) != PGRES_COMMAND_OK) result = ErrorFrom(res, "COPY");
    }
    PQclear(res);
  }
  if (!abort_reason.empty()) {
    return PQstatus(conn_) == CONNECTION_OK ? Status::Ok()
                                            : Unavailable("connection to " + address_ + " lost");
  }
  return result;
}

// ---- CopyWriter ----

CopyWriter::~CopyWriter() {
  if (active_) (void)conn_.EndCopy("aborted by the client");
}

Status CopyWriter::Begin(const std::string& copy_sql) {
  buffer_->clear();
  GAPLESS_RETURN_IF_ERROR(conn_.BeginCopy(copy_sql));
  active_ = true;
  return Status::Ok();
}

Status CopyWriter::Flush() {
  Status st = conn_.PutCopyData(*buffer_);
  buffer_->clear();
  return st;
}

Status CopyWriter::Finish() {
  Status st = Flush();
  active_ = false;
  if (!st.ok()) {
    (void)conn_.EndCopy("client failed to send the data");
    return st;
  }
  return conn_.EndCopy();
}

// ---- PgPool ----

Result<std::unique_ptr<PgPool>> PgPool::Open(const std::string& url, size_t size,
                                             const PgConnectOptions& options) {
  if (size == 0) return FailedPrecondition("a connection pool needs at least one connection");
  std::unique_ptr<PgPool> pool(new PgPool(size, url, options));
  for (size_t i = 0; i < size; ++i) {
    GAPLESS_ASSIGN_OR_RETURN(auto conn, PgConn::Connect(url, options));
    pool->idle_.push_back(std::move(conn));
  }
  return pool;
}

PgPool::Lease PgPool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !idle_.empty(); });
  std::unique_ptr<PgConn> conn = std::move(idle_.back());
  idle_.pop_back();
  return Lease(this, std::move(conn));
}

void PgPool::Release(std::unique_ptr<PgConn> conn) {
  // A connection left inside a transaction (an error path that skipped the rollback) must not
  // leak that transaction into the next user's work.
  if (!conn->broken() && conn->in_transaction()) (void)conn->Exec("ROLLBACK");
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
}

PgPool::Lease::~Lease() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->Release(std::move(conn_));
}

// ---- PgTransaction ----

PgTransaction::~PgTransaction() {
  if (open_ && !conn_.broken()) (void)conn_.Exec("ROLLBACK");
}

Status PgTransaction::Begin(std::string_view begin_sql) {
  GAPLESS_RETURN_IF_ERROR(conn_.Exec(begin_sql));
  open_ = true;
  return Status::Ok();
}

Status PgTransaction::Commit() {
  open_ = false;
  auto res = conn_.Query("COMMIT");
  if (!res.ok()) {
    if (res.status().code() == Code::kUnavailable) {
      return Unavailable("commit in doubt: " + res.status().message());
    }
    return res.status();
  }
  // COMMIT of a transaction that already failed answers ROLLBACK instead of an error.
  if (res->command_status() != "COMMIT") {
    return Aborted("COMMIT on " + conn_.address() + " answered " +
                   std::string(res->command_status()) + ": the transaction was rolled back");
  }
  return Status::Ok();
}

}  // namespace gapless

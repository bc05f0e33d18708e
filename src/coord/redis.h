// Redis access for the coordination layer: one blocking connection (coord/redis_socket.h, over TCP
// or TLS for rediss://) with connect and command timeouts, TCP keepalive and
// reconnect-with-backoff, plus Lua scripts that are embedded at build time (src/coord/lua/*.lua)
// and run by EVALSHA with a reload on NOSCRIPT.
//
// Error mapping (the code is the retry policy, see core/status.h):
//   connection refused, reset, timeout, LOADING/BUSY/TRYAGAIN/READONLY/MASTERDOWN  -> Unavailable
//   CORRUPT (kCorruptStateError: a script refused corrupt stored state)           -> DataLoss
//   any other error reply (WRONGTYPE, a Lua error, ...)                           -> Internal
//   a bad URL, a failed AUTH, a TLS certificate that does not verify or is refused  ->
//   FailedPrecondition
// An error reply's Status also carries RedisErrorReason(<the reply's error code>) as its reason(),
// e.g. "redis:READONLY": callers tell error replies apart by reason(), never by message text.
//
// Failover: READONLY (the server was demoted to a replica) and MASTERDOWN close the connection
// before the command is resent, so the next attempt connects anew and reaches whatever server now
// answers at the address (a Sentinel-managed VIP, a proxy, DNS). The command did not run, so this
// holds even for non-idempotent commands. Every connect checks ROLE (RedisOptions::
// require_primary): a replica at the address is refused like a server that is down, so reads
// never come from a replica either. A URL may name several servers, "redis://h1:p1,h2:p2/db"
// (one primary and its replicas, same credentials and db): every (re)connect tries them in turn,
// starting with the one that answered last, and takes the first whose ROLE is master, so after a
// manual failover (a replica promoted with REPLICAOF NO ONE) the next reconnect finds the new
// primary without Sentinel, a proxy or a DNS change.
//
// Retries: a command is resent after a transport failure only when the caller says it is
// idempotent; a non-idempotent command (EVAL of a script that writes) may have run before the
// connection broke, so its failure is returned as Unavailable and the caller decides (the queue
// scripts are written so that a caller can tell, e.g. Complete by a worker that no longer owns
// the lease is refused with Aborted rather than applied twice).
//
// SIGPIPE: the first Connect sets SIGPIPE to SIG_IGN if it is still SIG_DFL (OpenSSL writes with
// write(2), and a reset connection must fail the command, not kill the process).
//
// Thread-safety: RedisScript and LoadScript are immutable and thread-safe. RedisConn is not
// thread-safe: one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/redis_socket.h"
#include "core/env.h"
#include "core/status.h"

namespace gapless {

struct RedisOptions {
  int64_t connect_timeout_ms = 2'000;
  // Socket read/write timeout: a half-open connection fails instead of hanging.
  int64_t command_timeout_ms = 5'000;
  int keepalive_interval_s = 15;  // TCP keepalive
  int max_attempts = 5;           // reconnect attempts per command on a broken connection
  int64_t backoff_base_micros = 50'000;
  int64_t backoff_cap_micros = 2'000'000;
  Env* env = nullptr;  // nullptr = Env::Default()
  // Every (re)connect asks ROLE and refuses a replica (Unavailable, reason kReplicaReason), so
  // coordination never reads or writes a replica, also after a failover moved the address. A
  // server that refuses ROLE (ACL, renamed command) is taken as it is. false: connect to whatever
  // answers (tools reading a replica's INFO).
  bool require_primary = true;
};

// Status::reason() of a connection refused because the server is a replica (ROLE); with several
// servers in the URL, because every one of them answered as a replica.
std::string ReplicaReason();

// A parsed Redis URL: "redis://[user:password@]host[:port][,host[:port]...][/db]". IPv6 hosts in
// brackets ("[::1]:6379"); user and password percent-decoded; the port defaults to 6379 per host.
// "rediss://" is the same over TLS, with an optional query (the parameter names amqps:// uses):
//   cacertfile=PATH  the CA that signed the servers' certificates (default: the system's CAs)
//   certfile=PATH, keyfile=PATH  a client certificate and its key (Redis's tls-auth-clients)
//   verify=verify_peer (default) | verify_none  check the certificate's chain and host name
// e.g. "rediss://:pw@redis.example.com:6380/0?cacertfile=/etc/gapless/redis-ca.pem". The TLS
// settings apply to every server of the URL. A redis:// URL with a query is refused.
struct RedisUrl {
  struct Host {
    std::string host;
    int port = 6379;
    std::string Describe() const;  // "host:port", "[::1]:port"
  };
  std::string user;
  std::string password;
  std::vector<Host> hosts;  // at least one
  int db = 0;
  RedisTls tls;
  // "host:port" or "h1:p1,h2:p2": the servers, never the credentials (nor the db).
  std::string Describe() const;
};

// FailedPrecondition naming what is wrong (scheme, host, port, db number, an empty host in the
// list, a query parameter).
Result<RedisUrl> ParseRedisUrl(std::string_view url);

struct RedisReply {
  // An error reply becomes a non-ok Result instead.
  enum class Type { kNil, kInteger, kString, kStatus, kArray };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;                   // kString and kStatus
  std::vector<RedisReply> elements;  // kArray
  bool is_nil() const { return type == Type::kNil; }
};

// A Lua script: its name (for messages), source and SHA1 (computed locally at construction).
class RedisScript {
 public:
  RedisScript(std::string name, std::string source);
  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  const std::string& sha1() const { return sha1_; }

 private:
  std::string name_;
  std::string source_;
  std::string sha1_;
};

// Looks up an embedded script by file name, e.g. LoadScript("queue_claim.lua"); aborts the
// process if missing (a build bug). The returned reference lives for the whole process.
// Redis scripts cannot include one another: a script that uses a library of local functions says
// so on a line "-- needs: queue_lib.lua" (several names allowed), and the library's source is
// prepended to it here (so a Lua runtime error's line numbers count from the library's top).
const RedisScript& LoadScript(std::string_view file_name);

// Lowercase hex SHA1 of `data` (what Redis uses to name scripts). Exposed for tests.
std::string Sha1Hex(std::string_view data);

// The Status::reason() of an error reply: "redis:" + its error code, the reply's first word
// ("READONLY You can't write against a read only replica." -> "redis:READONLY").
std::string RedisErrorReason(std::string_view error_code);

// The error code with which gapless's Lua scripts refuse corrupt stored state (a malformed member,
// a counter that is not a number): redis.error_reply('CORRUPT <script>: <what is wrong>'), raised
// before any write. RedisConn maps it to DataLoss with reason RedisErrorReason("CORRUPT").
inline constexpr std::string_view kCorruptStateError = "CORRUPT";

// The error code with which a script that grants a fencing token refuses to grant it on a Redis
// data set the counter was not floored on (lua/fence_lib.lua: a failover, a restart). Internal,
// with reason RedisErrorReason(kFenceDataSetError); IsFenceDataSetRefusal tells it apart.
inline constexpr std::string_view kFenceDataSetError = "DATASET";
bool IsFenceDataSetRefusal(const Status& status);

class RedisConn;

// One field of `INFO <section>` ("" when absent or when INFO is refused), e.g.
// InfoField(c, "replication", "role").
std::string InfoField(RedisConn& conn, const std::string& section, const std::string& field);

// The server's replication id (INFO replication master_replid): another one means another data set
// (a failover promoted a replica, or the server restarted). "" when INFO is refused (a proxy or a
// managed service that hides it).
inline std::string ReplicationId(RedisConn& conn) {
  return InfoField(conn, "replication", "master_replid");
}

// One connection. Not thread-safe: one per thread.
class RedisConn {
 public:
  // "redis[s]://[user:password@]host:port[,host:port...][/db][?tls settings]" (ParseRedisUrl).
  // Unavailable naming host:port when it cannot connect (every host, with several; reason
  // ReplicaReason() when each one that answered is a replica); FailedPrecondition for a bad URL,
  // a failed AUTH or a TLS certificate that does not verify.
  // With connect_now false only the URL is checked: the first command opens the connection.
  static Result<std::unique_ptr<RedisConn>> Connect(const std::string& url,
                                                    const RedisOptions& options = {},
                                                    bool connect_now = true);
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // One command. On a transport failure (reset, timeout) the connection is re-established with
  // backoff and the command resent, up to max_attempts — ONLY for commands the caller marks
  // idempotent; otherwise the failure is returned (Unavailable) because the command may have run.
  // The next call reconnects in either case.
  Result<RedisReply> Command(const std::vector<std::string>& argv, bool idempotent = true);

  // EVALSHA; on NOSCRIPT loads the source with SCRIPT LOAD and retries once. Transport failures:
  // as Command with idempotent=false unless `idempotent` is true. A Lua error reply -> Status
  // Internal naming the script and the error.
  Result<RedisReply> Eval(const RedisScript& script, const std::vector<std::string>& keys,
                          const std::vector<std::string>& args, bool idempotent = false);

  // FailedPrecondition unless CONFIG GET maxmemory-policy is noeviction (volatile-*/allkeys-*
  // evict coordination keys), also when the policy cannot be read (CONFIG renamed or disabled, as
  // on some managed services, or denied by an ACL): gapless refuses to run on a Redis that may
  // evict its leases (DESIGN). Unavailable when the server cannot be reached.
  Status CheckNoEviction();

  // The URL's servers, "host:port" or "h1:p1,h2:p2" (RedisUrl::Describe), never the password.
  // Stable across failovers: it names the URL, not the server in use (an event bus's cursor is
  // keyed by it).
  std::string Describe() const;
  // "host:port" of the server in use, or of the one that answered last (the first before any).
  std::string DescribeCurrent() const;
  const RedisUrl& url() const { return url_; }

  // Pub/sub: after a (P)SUBSCRIBE sent with Command, waits up to timeout_ms for the next pushed
  // message. nullopt when none came in time; Unavailable when the connection broke (it is closed:
  // subscribe again after the next Command reconnects).
  Result<std::optional<RedisReply>> ReadPushed(int64_t timeout_ms);

 private:
  RedisConn(RedisUrl url, const RedisOptions& options);
  // Opens (or reopens) the connection to the first host, from current_ on, that accepts it
  // (OpenHost) and makes it current_.
  Status Open();
  // Connect to url_.hosts[i] (TCP or TLS), keepalive, AUTH, SELECT, ROLE (require_primary).
  Status OpenHost(size_t i);
  void Close();
  // One round trip on the current connection; transport failures close it.
  // `transport_failure` tells the caller whether the command may be retried on a new connection.
  Result<RedisReply> RoundTrip(const std::vector<std::string>& argv, bool* transport_failure);

  RedisUrl url_;
  size_t current_ = 0;  // index in url_.hosts of the server in use or that answered last
  RedisOptions options_;
  Env* env_;
  std::unique_ptr<RedisSocket> sock_;  // null: not connected
};

}  // namespace gapless

// RedisConn (coord/redis.h): connecting to the URL's primary, round trips with the error mapping
// and the retry policy, EVALSHA with its NOSCRIPT reload, the eviction check and pub/sub reads.
// The URL parser lives in redis_url.cc, the embedded Lua scripts in redis_script.cc.
#include "coord/redis.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "core/metrics.h"

namespace gapless {
namespace {

// The error code of an error reply: its first word ("READONLY You can't write ..." -> "READONLY").
std::string_view ErrorCode(std::string_view err) { return err.substr(0, err.find(' ')); }

// Error codes that mean "the command did not run; try again later" (a loading replica, a busy
// script, a failover in progress). They are Unavailable, and safe to resend even when the
// command is not idempotent.
bool IsTransientError(std::string_view code) {
  return code == "LOADING" || code == "BUSY" || code == "TRYAGAIN" || code == "READONLY" ||
         code == "MASTERDOWN";
}

// A failover-shaped error: the connection points at the wrong node; reconnect before resending.
bool NeedsReconnect(const Status& st) {
  return st.reason() == RedisErrorReason("READONLY") ||
         st.reason() == RedisErrorReason("MASTERDOWN");
}

Result<RedisReply> Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_NIL:
      out.type = RedisReply::Type::kNil;
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) {
        GAPLESS_ASSIGN_OR_RETURN(auto e, Convert(r->element[i]));
        out.elements.push_back(std::move(e));
      }
      break;
    case REDIS_REPLY_ERROR:
      return Internal("error reply inside an array: " + std::string(r->str, r->len));
    default:
      return Internal("unknown redis reply type " + std::to_string(r->type));
  }
  return out;
}

}  // namespace

std::string RedisErrorReason(std::string_view error_code) {
  return "redis:" + std::string(error_code);
}

bool IsFenceDataSetRefusal(const Status& status) {
  return !status.ok() && status.reason() == RedisErrorReason(kFenceDataSetError);
}

std::string InfoField(RedisConn& conn, const std::string& section, const std::string& field) {
  auto r = conn.Command({"INFO", section});
  if (!r.ok()) return "";
  const std::string needle = "\n" + field + ":";
  size_t at = ("\n" + r->str).find(needle);
  if (at == std::string::npos) return "";
  at += needle.size() - 1;  // in r->str, which lacks the leading "\n"
  size_t end = r->str.find_first_of("\r\n", at);
  return r->str.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

Result<std::unique_ptr<RedisConn>> RedisConn::Connect(const std::string& url,
                                                      const RedisOptions& options,
                                                      bool connect_now) {
  GAPLESS_ASSIGN_OR_RETURN(RedisUrl u, ParseRedisUrl(url));
  // OpenSSL writes with write(2): a write to a connection the server reset would raise SIGPIPE
  // and kill the process. Ignore it (once, and only if nobody installed a handler); the write
  // then fails with EPIPE, which is a transport failure like any other.
  static std::once_flag sigpipe_once;
  std::call_once(sigpipe_once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
  std::unique_ptr<RedisConn> conn(new RedisConn(std::move(u), options));
  if (connect_now) GAPLESS_RETURN_IF_ERROR(conn->Open());
  return conn;
}

RedisConn::RedisConn(RedisUrl url, const RedisOptions& options)
    : url_(std::move(url)),
      options_(options),
      env_(options.env != nullptr ? options.env : Env::Default()) {
  if (options_.max_attempts < 1) options_.max_attempts = 1;
}

RedisConn::~RedisConn() { Close(); }

void RedisConn::Close() { sock_.reset(); }

std::string RedisConn::Describe() const { return url_.Describe(); }

std::string RedisConn::DescribeCurrent() const { return url_.hosts[current_].Describe(); }

Status RedisConn::Open() {
  Close();
  const size_t n = url_.hosts.size();
  if (n == 1) return OpenHost(0);
  // Several servers: the first primary, starting with the one that answered last (after a
  // failover that is the new primary at once, and a host that is down costs a connect timeout
  // only when it is not the one in use).
  std::string errors;
  size_t replicas = 0;
  Status refused;  // a FailedPrecondition (AUTH, SELECT): a configuration error
  const size_t first = current_;
  for (size_t k = 0; k < n; ++k) {
    size_t i = (first + k) % n;
    Status st = OpenHost(i);
    if (st.ok()) {
      current_ = i;
      return st;
    }
    if (st.reason() == ReplicaReason()) ++replicas;
    if (st.code() == Code::kFailedPrecondition && refused.ok()) refused = st;
    errors += (errors.empty() ? "" : "; ") + st.message();
  }
  current_ = first;
  if (!refused.ok()) return FailedPrecondition(errors);
  Status out = Unavailable("no primary among redis " + Describe() + ": " + errors);
  // Every server a replica: the caller tells this apart (at start, a configuration error).
  return replicas == n ? std::move(out).WithReason(ReplicaReason()) : out;
}

Status RedisConn::OpenHost(size_t i) {
  Close();
  current_ = i;  // so that every message below names this host
  const RedisUrl::Host& host = url_.hosts[i];
  RedisSocketOptions socket_options;
  socket_options.connect_timeout_ms = options_.connect_timeout_ms;
  socket_options.keepalive_interval_s = options_.keepalive_interval_s;
  GAPLESS_ASSIGN_OR_RETURN(sock_,
                           RedisSocket::Connect(host.host, host.port, url_.tls, socket_options));
  auto setup = [&](const std::vector<std::string>& argv, const char* what) -> Status {
    bool transport = false;
    auto r = RoundTrip(argv, &transport);
    if (r.ok()) return Status::Ok();
    // A transport failure, or TLS refusing our certificate (the connection is closed then).
    if (transport || r.status().code() == Code::kUnavailable || sock_ == nullptr) {
      return r.status();
    }
    return FailedPrecondition("redis " + DescribeCurrent() + ": " + what +
                              " failed: " + r.status().message());
  };
  if (!url_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!url_.user.empty()) auth.push_back(url_.user);
    auth.push_back(url_.password);
    Status st = setup(auth, "AUTH");
    if (!st.ok()) {
      Close();
      return st;
    }
  }
  if (url_.db != 0) {
    Status st = setup({"SELECT", std::to_string(url_.db)}, "SELECT");
    if (!st.ok()) {
      Close();
      return st;
    }
  }
  if (options_.require_primary) {
    bool transport = false;
    auto role = RoundTrip({"ROLE"}, &transport);
    // A transport failure, or TLS refused (the server checks a client certificate only after
    // the handshake, so its refusal comes with the first answer): the connection is closed.
    if (!role.ok() &&
        (transport || role.status().code() == Code::kUnavailable || sock_ == nullptr)) {
      Close();
      return role.status();
    }
    // An error reply (ROLE denied or renamed): with one server, nothing to tell; take it as it
    // is. With several, ROLE is how the primary is told apart: refuse rather than guess.
    if (!role.ok() && url_.hosts.size() > 1) {
      Close();
      return FailedPrecondition("redis " + DescribeCurrent() + ": ROLE failed (" +
                                role.status().message() +
                                "); a URL with several servers needs ROLE to find the primary");
    }
    if (role.ok() && !role->elements.empty() && role->elements[0].str != "master") {
      std::string what = role->elements[0].str;
      Close();
      return Unavailable("redis " + DescribeCurrent() + " is a replica (ROLE " + what +
                         "), not the primary: gapless coordinates only through the primary")
          .WithReason(ReplicaReason());
    }
  }
  return Status::Ok();
}

std::string ReplicaReason() { return RedisErrorReason("REPLICA"); }

Result<RedisReply> RedisConn::RoundTrip(const std::vector<std::string>& argv,
                                        bool* transport_failure) {
  *transport_failure = false;
  static Counter& round_trips =
      MetricsRegistry::Default()
          .CounterFamily("gapless_redis_round_trips_total",
                         "Commands and scripts sent to Redis servers (coordination, lock nodes, "
                         "rate limiter, Redis Streams), retries included")
          .Get();
  static Counter& failures =
      MetricsRegistry::Default()
          .CounterFamily("gapless_redis_round_trip_failures_total",
                         "Redis round trips that got no answer (timeouts, connections lost)")
          .Get();
  static Histogram& latency =
      MetricsRegistry::Default()
          .HistogramFamily("gapless_redis_round_trip_seconds",
                           "Time of one Redis round trip, answered or not", LatencyBuckets())
          .Get();
  const auto started = std::chrono::steady_clock::now();
  Status sent = sock_->Send(argv, options_.command_timeout_ms);
  Result<std::optional<RawReply>> got =
      sent.ok() ? sock_->Next(options_.command_timeout_ms) : Result<std::optional<RawReply>>(sent);
  round_trips.Inc();
  latency.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (!got.ok() || !got->has_value()) {
    failures.Inc();
    Close();  // the stream is out of sync now; the next command reconnects
    const std::string command = argv.empty() ? "" : argv[0];
    if (!got.ok()) {
      // A TLS refusal of our certificate is a configuration error: not retried.
      *transport_failure = got.status().code() != Code::kFailedPrecondition;
      return Status(got.status().code(), got.status().message() + " (" + command + ")");
    }
    *transport_failure = true;
    return Unavailable("redis " + DescribeCurrent() + ": " + command + ": timed out after " +
                       std::to_string(options_.command_timeout_ms) + " ms");
  }
  const redisReply* r = got->value().get();
  Result<RedisReply> out = Internal("unreachable");
  if (r->type == REDIS_REPLY_ERROR) {
    std::string err(r->str, r->len);
    std::string_view code = ErrorCode(err);
    Code status_code = IsTransientError(code)       ? Code::kUnavailable
                       : code == kCorruptStateError ? Code::kDataLoss
                                                    : Code::kInternal;
    out = Status(status_code, "redis " + DescribeCurrent() + ": " + err)
              .WithReason(RedisErrorReason(code));
  } else {
    out = Convert(r);
  }
  return out;
}

Result<RedisReply> RedisConn::Command(const std::vector<std::string>& argv, bool idempotent) {
  Status last;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) {
      env_->SleepMicros(BackoffMicros(env_, attempt - 1, options_.backoff_base_micros,
                                      options_.backoff_cap_micros));
    }
    if (sock_ == nullptr) {
      // Nothing was sent on a connection that is not open, so reconnecting is always safe.
      Status st = Open();
      if (!st.ok()) {
        if (st.code() != Code::kUnavailable) return st;
        last = st;
        continue;
      }
    }
    bool transport = false;
    auto r = RoundTrip(argv, &transport);
    if (r.ok()) return r;
    const Status& st = r.status();
    if (transport) {
      // The command may have run before the connection broke.
      if (!idempotent) return st;
      last = st;
      continue;
    }
    if (st.code() == Code::kUnavailable) {
      // A transient error reply: the command did not run, so resending is safe.
      if (NeedsReconnect(st)) Close();
      last = st;
      continue;
    }
    return st;
  }
  return Unavailable(last.message() + " (after " + std::to_string(options_.max_attempts) +
                     " attempts)")
      .WithReason(last.reason());
}

Result<RedisReply> RedisConn::Eval(const RedisScript& script, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args, bool idempotent) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(script.sha1());
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  for (int round = 0; round < 2; ++round) {
    auto r = Command(argv, idempotent);
    if (r.ok()) return r;
    if (round == 0 && r.status().reason() == RedisErrorReason("NOSCRIPT")) {
      // The server lost its script cache (restart, failover, SCRIPT FLUSH): load and retry once.
      // NOSCRIPT means the script did not run, so this is safe for any script.
      auto loaded = Command({"SCRIPT", "LOAD", script.source()}, /*idempotent=*/true);
      if (!loaded.ok()) return loaded.status().WithContext("script " + script.name());
      if (loaded->str != script.sha1()) {
        return Internal("script " + script.name() + ": server computed SHA1 " + loaded->str +
                        ", expected " + script.sha1());
      }
      continue;
    }
    return r.status().WithContext("script " + script.name());
  }
  return Internal("script " + script.name() + ": NOSCRIPT after SCRIPT LOAD");
}

Status RedisConn::CheckNoEviction() {
  auto r = Command({"CONFIG", "GET", "maxmemory-policy"});
  if (!r.ok() && r.status().code() == Code::kUnavailable) return r.status();
  if (!r.ok() || r->type != RedisReply::Type::kArray || r->elements.size() < 2) {
    // CONFIG renamed or disabled (some managed services), or denied by an ACL. Not knowing the
    // policy is refused like an evicting one: an evicted lease or queue key loses work silently.
    return FailedPrecondition(
        "redis " + DescribeCurrent() + ": cannot read maxmemory-policy (" +
        (r.ok() ? std::string("CONFIG GET returned nothing") : r.status().message()) +
        "); gapless refuses to run on a Redis that may evict its coordination keys. Let gapless "
        "run CONFIG GET (do not rename or disable CONFIG; with ACLs grant +config|get) and set "
        "maxmemory-policy noeviction");
  }
  const std::string& policy = r->elements[1].str;
  if (policy != "noeviction") {
    return FailedPrecondition("redis " + DescribeCurrent() + " has maxmemory-policy " + policy +
                              ", which can evict leases and queue keys; set it to noeviction "
                              "(CONFIG SET maxmemory-policy noeviction, and in redis.conf)");
  }
  return Status::Ok();
}

Result<std::optional<RedisReply>> RedisConn::ReadPushed(int64_t timeout_ms) {
  if (sock_ == nullptr) return Unavailable("redis " + DescribeCurrent() + ": not connected");
  // A message may already be parsed (several arrive in one read); else wait up to timeout_ms.
  auto got = sock_->Next(timeout_ms);
  if (!got.ok()) {
    Close();
    return Unavailable("redis " + DescribeCurrent() +
                       ": subscription connection lost: " + got.status().message());
  }
  if (!got->has_value()) return std::optional<RedisReply>();
  Result<RedisReply> out = Convert(got->value().get());
  if (!out.ok()) return out.status();
  return std::optional<RedisReply>(std::move(*out));
}

}  // namespace gapless

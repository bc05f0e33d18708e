#include "coord/redis.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "core/metrics.h"
#include "core/mutation.h"
#include "lua_scripts.h"

namespace gapless {
namespace {

// SHA1 (FIPS 180-4), enough to name a script the way Redis does without a round trip.
class Sha1 {
 public:
  void Update(std::string_view data) {
    for (unsigned char c : data) {
      block_[block_len_++] = c;
      if (block_len_ == 64) {
        Transform();
        block_len_ = 0;
      }
    }
    total_bits_ += static_cast<uint64_t>(data.size()) * 8;
  }

  std::string HexDigest() {
    uint64_t bits = total_bits_;
    block_[block_len_++] = 0x80;
    if (block_len_ > 56) {
      while (block_len_ < 64) block_[block_len_++] = 0;
      Transform();
      block_len_ = 0;
    }
    while (block_len_ < 56) block_[block_len_++] = 0;
    for (int i = 7; i >= 0; --i) block_[block_len_++] = static_cast<uint8_t>(bits >> (i * 8));
    Transform();
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (uint32_t word : h_) {
      for (int i = 28; i >= 0; i -= 4) out.push_back(kHex[(word >> i) & 0xf]);
    }
    return out;
  }

 private:
  static uint32_t Rol(uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

  void Transform() {
    std::array<uint32_t, 80> w{};
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[i * 4]} << 24) | (uint32_t{block_[i * 4 + 1]} << 16) |
             (uint32_t{block_[i * 4 + 2]} << 8) | uint32_t{block_[i * 4 + 3]};
    }
    for (int i = 16; i < 80; ++i) w[i] = Rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (int i = 0; i < 80; ++i) {
      uint32_t f, k;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      uint32_t t = Rol(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = Rol(b, 30);
      b = a;
      a = t;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
  }

  std::array<uint32_t, 5> h_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  std::array<uint8_t, 64> block_{};
  size_t block_len_ = 0;
  uint64_t total_bits_ = 0;
};

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
      if (ec == std::errc() && p == s.data() + i + 3) {
        out.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

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

std::string Sha1Hex(std::string_view data) {
  Sha1 sha;
  sha.Update(data);
  return sha.HexDigest();
}

RedisScript::RedisScript(std::string name, std::string source)
    : name_(std::move(name)), source_(std::move(source)), sha1_(Sha1Hex(source_)) {}

namespace {

std::string_view EmbeddedSource(std::string_view file_name) {
  for (const auto& [name, source] : lua::kFiles) {
    if (name == file_name) return source;
  }
  std::fprintf(stderr, "gapless: no embedded Lua script named %.*s (build bug)\n",
               static_cast<int>(file_name.size()), file_name.data());
  std::abort();
}

// The libraries a script names on "-- needs: a.lua b.lua" lines, prepended in that order.
std::string Compose(std::string_view source) {
  std::string libs;
  constexpr std::string_view kNeeds = "-- needs:";
  size_t pos = 0;
  while ((pos = source.find(kNeeds, pos)) != std::string_view::npos) {
    if (pos > 0 && source[pos - 1] != '\n') {
      pos += kNeeds.size();
      continue;
    }
    size_t end = source.find('\n', pos);
    std::string_view line = source.substr(pos + kNeeds.size(), end - pos - kNeeds.size());
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t j = line.find(' ', i);
      if (j == std::string_view::npos) j = line.size();
      if (j > i) libs += std::string(EmbeddedSource(line.substr(i, j - i)));
      i = j;
    }
    pos = end == std::string_view::npos ? source.size() : end;
  }
  return libs + std::string(source);
}

// The checks in lua/*.lua that a mutation switch (core/mutation.h) can drop. Each is a block of
// lines from "-- mutation: NAME" to "-- end mutation: NAME", both markers on lines of their own.
constexpr std::string_view kLuaMutations[] = {"lease-owner", "head-log-height"};

// `text` with every `name` block blanked: its lines, markers included, become empty lines (so a
// Lua runtime error's line numbers stay those of the unmutated script). Adds the number of blocks
// to *dropped. Aborts on a begin marker without its end marker (a build bug).
std::string WithoutCheck(std::string_view script, std::string_view text, std::string_view name,
                         int* dropped) {
  const std::string begin = "-- mutation: " + std::string(name);
  const std::string end = "-- end mutation: " + std::string(name);
  std::string out;
  bool inside = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    std::string_view trimmed = line.substr(std::min(line.find_first_not_of(" \t\r"), line.size()));
    trimmed = trimmed.substr(0, trimmed.find_last_not_of(" \t\r") + 1);
    if (!inside && trimmed == begin) {
      inside = true;
      ++*dropped;
    }
    if (!inside) out += line;
    if (inside && trimmed == end) inside = false;
    if (eol < text.size()) out += '\n';
    pos = eol + 1;
  }
  if (inside) {
    std::fprintf(stderr, "gapless: %.*s: \"%s\" without \"%s\" (build bug)\n",
                 static_cast<int>(script.size()), script.data(), begin.c_str(), end.c_str());
    std::abort();
  }
  return out;
}

}  // namespace

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

const RedisScript& LoadScript(std::string_view file_name) {
  // Built once; std::deque keeps references stable.
  static const std::deque<RedisScript>* scripts = [] {
    auto* all = new std::deque<RedisScript>();
    int dropped = 0;
    for (const auto& [name, source] : lua::kFiles) {
      std::string text = Compose(source);
      // A mutation build only: elsewhere Mutated is a constant false and the text stays as is.
      for (std::string_view check : kLuaMutations) {
        if (Mutated(check)) text = WithoutCheck(name, text, check, &dropped);
      }
      all->emplace_back(std::string(name), std::move(text));
    }
    for (std::string_view check : kLuaMutations) {
      if (Mutated(check) && dropped == 0) {
        std::fprintf(stderr, "gapless: mutation %.*s: no Lua script marks that check (build bug)\n",
                     static_cast<int>(check.size()), check.data());
        std::abort();
      }
    }
    return all;
  }();
  for (const RedisScript& s : *scripts) {
    if (s.name() == file_name) return s;
  }
  std::fprintf(stderr, "gapless: no embedded Lua script named %.*s (build bug)\n",
               static_cast<int>(file_name.size()), file_name.data());
  std::abort();
}

// --- RedisConn -----------------------------------------------------------------------------

namespace {

// One "host[:port]" or "[v6]:port" of a URL's host list.
Result<RedisUrl::Host> ParseHost(std::string_view hostport) {
  RedisUrl::Host h;
  std::string_view port_text;
  if (StartsWith(hostport, "[")) {  // [::1]:6379
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return FailedPrecondition("redis URL: unclosed '['");
    h.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (StartsWith(after, ":")) {
      port_text = after.substr(1);
    } else if (!after.empty()) {
      return FailedPrecondition("redis URL: unexpected '" + std::string(after) + "' after ']'");
    }
  } else if (size_t colon = hostport.rfind(':'); colon != std::string_view::npos) {
    h.host = std::string(hostport.substr(0, colon));
    port_text = hostport.substr(colon + 1);
  } else {
    h.host = std::string(hostport);
  }
  if (h.host.empty()) return FailedPrecondition("redis URL: missing host");
  if (!port_text.empty()) {
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), h.port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || h.port <= 0 ||
        h.port > 65535) {
      return FailedPrecondition("redis URL: bad port '" + std::string(port_text) + "'");
    }
  }
  return h;
}

}  // namespace

std::string RedisUrl::Host::Describe() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string RedisUrl::Describe() const {
  std::string out;
  for (const Host& h : hosts) {
    if (!out.empty()) out += ",";
    out += h.Describe();
  }
  return out;
}

namespace {

// The TLS settings in a rediss:// URL's query ("cacertfile=...&verify=verify_none").
Status ParseTlsQuery(std::string_view query, RedisTls* tls) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view item = query.substr(start, amp - start);
    start = amp + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string value =
        eq == std::string_view::npos ? std::string() : PercentDecode(item.substr(eq + 1));
    if (key == "cacertfile") {
      tls->cacertfile = value;
    } else if (key == "certfile") {
      tls->certfile = value;
    } else if (key == "keyfile") {
      tls->keyfile = value;
    } else if (key == "verify") {
      if (value != "verify_peer" && value != "verify_none") {
        return FailedPrecondition("rediss URL: verify must be verify_peer or verify_none, not '" +
                                  value + "'");
      }
      tls->verify = value == "verify_peer";
    } else {
      return FailedPrecondition("rediss URL: unknown parameter '" + std::string(key) +
                                "' (known: cacertfile, certfile, keyfile, verify)");
    }
  }
  if (!tls->keyfile.empty() && tls->certfile.empty()) {
    return FailedPrecondition("rediss URL: keyfile without certfile");
  }
  return Status::Ok();
}

}  // namespace

Result<RedisUrl> ParseRedisUrl(std::string_view url) {
  RedisUrl u;
  std::string_view rest;
  if (StartsWith(url, "redis://")) {
    rest = url.substr(8);
  } else if (StartsWith(url, "rediss://")) {
    rest = url.substr(9);
    u.tls.enabled = true;
  } else {
    return FailedPrecondition("redis URL must start with redis:// (or rediss:// for TLS)");
  }
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    // "user:password", ":password", or "password" alone.
    if (size_t colon = userinfo.find(':'); colon != std::string_view::npos) {
      u.user = PercentDecode(userinfo.substr(0, colon));
      u.password = PercentDecode(userinfo.substr(colon + 1));
    } else {
      u.password = PercentDecode(userinfo);
    }
  }
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    if (!u.tls.enabled) {
      return FailedPrecondition(
          "redis URL: a query (?...) holds TLS settings, which only a rediss:// URL takes");
    }
    GAPLESS_RETURN_IF_ERROR(ParseTlsQuery(rest.substr(q + 1), &u.tls));
    rest = rest.substr(0, q);
  }
  std::string_view host_list = rest;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    host_list = rest.substr(0, slash);
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), u.db);
      if (ec != std::errc() || p != db.data() + db.size() || u.db < 0) {
        return FailedPrecondition("redis URL: bad database number '" + std::string(db) + "'");
      }
    }
  }
  // "h1:p1,h2:p2": one primary and its replicas (RedisConn takes whichever is the primary).
  size_t start = 0;
  while (true) {
    size_t comma = host_list.find(',', start);
    std::string_view item = host_list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty() && (comma != std::string_view::npos || !u.hosts.empty())) {
      return FailedPrecondition("redis URL: empty host in the list '" + std::string(host_list) +
                                "'");
    }
    GAPLESS_ASSIGN_OR_RETURN(RedisUrl::Host host, ParseHost(item));
    u.hosts.push_back(std::move(host));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return u;
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

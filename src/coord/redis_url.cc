// Redis URLs (declared in coord/redis.h): ParseRedisUrl, the host list of a multi-server URL,
// percent-decoded credentials, the db number and a rediss:// URL's TLS query; RedisUrl::Describe.
#include <charconv>
#include <string>
#include <string_view>

#include "coord/redis.h"

namespace gapless {
namespace {

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

}  // namespace gapless

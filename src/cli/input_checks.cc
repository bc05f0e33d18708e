#include "cli/input_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <set>

#include "coord/lock_nodes.h"
#include "core/redact.h"
#include "rpc/endpoint_pool.h"

namespace gapless {
namespace {

enum class UrlKind { kPostgres, kRpc, kRedis, kBus, kNone };

UrlKind KindOf(std::string_view option) {
  if (option == "db") return UrlKind::kPostgres;
  if (option == "rpc") return UrlKind::kRpc;
  if (option == "redis" || option == "redis-replica" || option == "lock-nodes") {
    return UrlKind::kRedis;
  }
  if (option == "events" || option == "bus") return UrlKind::kBus;
  return UrlKind::kNone;
}

// What a URL of the option looks like, for the error messages.
std::string_view Expected(UrlKind kind) {
  switch (kind) {
    case UrlKind::kPostgres:
      return "postgresql://user@host:port/dbname, or libpq's key=value settings";
    case UrlKind::kRpc:
      return "http://host:port or https://host/KEY";
    case UrlKind::kRedis:
      return "redis://host:port or rediss://host:port";
    case UrlKind::kBus:
      return "kafka://host:port, amqp[s]://user@host:port/vhost or redis[s]://host:port";
    case UrlKind::kNone:
      break;
  }
  return "";
}

bool SchemeFits(UrlKind kind, std::string_view scheme) {
  switch (kind) {
    case UrlKind::kPostgres:
      return scheme == "postgresql" || scheme == "postgres";
    case UrlKind::kRpc:
      return scheme == "http" || scheme == "https";
    case UrlKind::kRedis:
      return scheme == "redis" || scheme == "rediss";
    case UrlKind::kBus:
      return scheme == "kafka" || scheme == "amqp" || scheme == "amqps" || scheme == "redis" ||
             scheme == "rediss";
    case UrlKind::kNone:
      break;
  }
  return false;
}

bool IsHostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_' ||
         c == '%';
}

// One "host[:port]" of an authority: "" when it is well formed, else what is wrong with it (never
// quoting the text: the caller shows the whole URL redacted).
std::string CheckHostPort(std::string_view hostport, bool host_optional) {
  std::string_view host = hostport;
  std::string_view port;
  bool has_port = false;
  if (!hostport.empty() && hostport.front() == '[') {  // [IPv6]:port
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return "an IPv6 address without its closing ']'";
    host = hostport.substr(0, close + 1);
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "something other than :PORT after the IPv6 address";
      has_port = true;
      port = after.substr(1);
    }
  } else if (size_t colon = hostport.find(':'); colon != std::string_view::npos) {
    host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
    has_port = true;
    if (port.find(':') != std::string_view::npos) return "more than one ':' after the host";
  }
  if (host.empty() && !host_optional) return "no host";
  if (!host.empty() && host.front() != '[' && !std::all_of(host.begin(), host.end(), IsHostChar)) {
    return "a host name with characters no host name has";
  }
  if (has_port) {
    uint32_t number = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size()) {
      return "a port that is not a number";
    }
    if (number < 1 || number > 65535) return fmt::format("port {}, not in 1..65535", number);
  }
  return "";
}

Status Refuse(std::string_view option, std::string_view url, std::string_view why) {
  return FailedPrecondition(fmt::format("--{} {}: {}", option, RedactUrl(url), why));
}

Status CheckOneUrl(std::string_view option, UrlKind kind, std::string_view url) {
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    // libpq's own form ("host=db dbname=x"): libpq checks it.
    if (kind == UrlKind::kPostgres && url.find('=') != std::string_view::npos) return Status::Ok();
    return Refuse(option, url,
                  fmt::format("not a URL (no scheme://); expected {}", Expected(kind)));
  }
  std::string scheme(url.substr(0, sep));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!SchemeFits(kind, scheme)) {
    if (kind == UrlKind::kRpc && (scheme == "ws" || scheme == "wss")) {
      return Refuse(option, url,
                    "WebSocket URLs are not supported: gapless sends JSON-RPC over HTTP; give the "
                    "node's http:// or https:// URL");
    }
    return Refuse(option, url,
                  fmt::format("the scheme {}:// is not one this option takes; expected {}",
                              RedactText(scheme), Expected(kind)));
  }
  std::string_view rest = url.substr(sep + 3);
  std::string_view before_query = rest.substr(0, rest.find_first_of("?#"));
  size_t at = before_query.rfind('@');
  constexpr std::string_view kRawAtOrSlash =
      "the user name or password holds a raw '@' or '/'; percent-encode it (%40 for @, %2F for /)";
  if (at != std::string_view::npos &&
      (before_query.find('@') != at || before_query.substr(0, at).find('/') != std::string::npos)) {
    return Refuse(option, url, kRawAtOrSlash);
  }
  // A raw '?' or '#' in the password ("u:pa#ss@h": an '@' after it, no '/' before it). libpq and
  // the Redis client read it as part of the password, as the redactor does (core/redact.h
  // UserInfoEnd); an http, AMQP or Kafka client would take a query or fragment.
  if (size_t end = UserInfoEnd(rest); end != std::string_view::npos && end != at &&
                                      rest.substr(0, end).find('/') == std::string_view::npos) {
    if (kind != UrlKind::kPostgres && scheme != "redis" && scheme != "rediss") {
      return Refuse(option, url,
                    "the user name or password holds a raw '?' or '#'; percent-encode it (%3F "
                    "for ?, %23 for #)");
    }
    if (rest.substr(0, end).find('@') != std::string_view::npos) {
      return Refuse(option, url, kRawAtOrSlash);
    }
    at = end;
  }
  std::string_view authority = rest.substr(at == std::string_view::npos ? 0 : at + 1);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  // A PostgreSQL URL may leave the host to libpq (a Unix socket, host= in the query); the others
  // need one. Several hosts: a PostgreSQL, Redis or Kafka URL's list of servers.
  const bool host_optional = kind == UrlKind::kPostgres;
  size_t start = 0;
  while (true) {
    size_t comma = authority.find(',', start);
    std::string_view hostport = authority.substr(start, comma - start);
    if (std::string why = CheckHostPort(hostport, host_optional); !why.empty()) {
      return Refuse(option, url, why);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return Status::Ok();
}

bool IsUnsignedNumber(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Result<std::vector<std::string>> LayeredCommandLine(int argc, char** argv,
                                                    const std::vector<CLI::App*>& subcommands,
                                                    ValueOrigins* origins) {
  std::vector<std::string> raw(argv + 1, argv + argc);
  CLI::App* chosen = nullptr;
  size_t sub_pos = 0;
  for (size_t i = 0; i < raw.size() && chosen == nullptr; ++i) {
    for (CLI::App* sub : subcommands) {
      if (raw[i] == sub->get_name()) {
        chosen = sub;
        sub_pos = i;
        break;
      }
    }
  }
  std::vector<std::string> layered(raw.begin(), raw.end());
  if (chosen != nullptr) {
    std::set<std::string> known, all;
    for (CLI::App* sub : subcommands) {
      for (CLI::Option* opt : sub->get_options()) {
        if (opt->get_lnames().empty()) continue;
        const std::string& key = opt->get_lnames()[0];
        // A secret's value may come from a file (--db-file PATH): a key of its own for the
        // config file and the environment, resolved by ReadSecretFiles below.
        const bool secret = SecretKeys().count(key) > 0;
        all.insert(key);
        if (secret) all.insert(key + "-file");
        if (sub == chosen) {
          known.insert(key);
          if (secret) known.insert(key + "-file");
        }
      }
    }
    std::vector<std::string> rest(raw.begin() + static_cast<long>(sub_pos) + 1, raw.end());
    std::string config_path;
    if (const char* env_config = std::getenv("GAPLESS_CONFIG")) config_path = env_config;
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == "--config" && i + 1 < rest.size()) config_path = rest[i + 1];
      if (rest[i].rfind("--config=", 0) == 0) config_path = rest[i].substr(9);
    }
    std::vector<ConfigEntry> config;
    if (!config_path.empty()) {
      GAPLESS_ASSIGN_OR_RETURN(config, ReadConfigFile(config_path));
    }
    GAPLESS_ASSIGN_OR_RETURN(auto layered_args, LayerArguments(rest, known, all, config,
                                                               config_path, std::getenv, origins));
    GAPLESS_ASSIGN_OR_RETURN(auto args, ReadSecretFiles(layered_args, SecretKeys(), ReadWholeFile));
    GAPLESS_RETURN_IF_ERROR(CheckNumbers(*chosen, args, *origins));
    layered.assign(raw.begin(), raw.begin() + static_cast<long>(sub_pos) + 1);
    layered.insert(layered.end(), args.begin(), args.end());
  }
  std::reverse(layered.begin(), layered.end());  // CLI11 takes the vector in reverse order
  return layered;
}

std::string OriginSuffix(const ValueOrigins& origins, const std::string& key) {
  auto it = origins.find(key);
  return it == origins.end() ? std::string() : " (from " + it->second + ")";
}

Status CheckServerUrl(std::string_view option, std::string_view value) {
  const UrlKind kind = KindOf(option);
  if (kind == UrlKind::kNone || value.empty()) return Status::Ok();
  std::vector<std::string> urls;
  if (kind == UrlKind::kRpc) {
    auto specs = ParseEndpointList(value);
    if (!specs.ok()) return FailedPrecondition(RedactText(specs.status().message()));
    for (const EndpointSpec& spec : *specs) urls.push_back(spec.url);
  } else if (kind == UrlKind::kPostgres || option == "redis" || option == "redis-replica") {
    urls.emplace_back(value);  // one server, or one URL listing several hosts
  } else {
    urls = SplitUrlList(std::string(value));
  }
  for (const std::string& url : urls) GAPLESS_RETURN_IF_ERROR(CheckOneUrl(option, kind, url));
  return Status::Ok();
}

Status CheckServerUrls(const CLI::App& sub, const ValueOrigins& origins) {
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->get_lnames().empty() || opt->count() == 0) continue;
    const std::string& key = opt->get_lnames()[0];
    if (KindOf(key) == UrlKind::kNone) continue;
    Status st = CheckServerUrl(key, opt->as<std::string>());
    if (!st.ok()) return FailedPrecondition(st.message() + OriginSuffix(origins, key));
  }
  return Status::Ok();
}

Status CheckNumbers(const CLI::App& sub, const std::vector<std::string>& args,
                    const ValueOrigins& origins) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!arg.starts_with("--")) continue;
    size_t eq = arg.find('=');
    std::string key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const CLI::Option* opt = nullptr;
    try {
      opt = sub.get_option("--" + key);
    } catch (const CLI::OptionNotFound&) {
      continue;  // CLI11 reports it
    }
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.starts_with("UINT");
    const bool is_int = type.starts_with("INT");
    const bool is_float = type.starts_with("FLOAT");
    if (!is_unsigned && !is_int && !is_float) continue;
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      continue;  // CLI11 reports the missing value
    }
    std::string_view digits = value;
    bool ok = true;
    if (is_float) {
      char* end = nullptr;
      std::strtod(value.c_str(), &end);
      ok = !value.empty() && end == value.c_str() + value.size();
    } else {
      if (is_int && digits.starts_with('-')) digits.remove_prefix(1);
      ok = IsUnsignedNumber(digits);
    }
    if (!ok) {
      const bool negative =
          is_unsigned && value.starts_with('-') && IsUnsignedNumber(value.substr(1));
      return FailedPrecondition(fmt::format("--{} {}: {}{}", key, RedactText(value),
                                            negative ? "must not be negative" : "not a number",
                                            OriginSuffix(origins, key)));
    }
  }
  return Status::Ok();
}

std::string ParseErrorMessage(const CLI::ParseError& error, const ValueOrigins& origins) {
  std::string message = error.what();
  // CLI11 prefixes a validator's message with the option's name, and --rpc's says it again.
  for (const auto& [key, where] : origins) {
    std::string twice = "--" + key + ": --" + key + ": ";
    if (message.starts_with(twice)) message.erase(0, key.size() + 4);
  }
  if (message.starts_with("--rpc: --rpc: ")) message.erase(0, 7);
  // The first option the message names, if its value came from the environment or the file.
  for (size_t at = message.find("--"); at != std::string::npos; at = message.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < message.size() &&
           (std::isalnum(static_cast<unsigned char>(message[end])) != 0 || message[end] == '-')) {
      ++end;
    }
    std::string suffix = OriginSuffix(origins, message.substr(at + 2, end - at - 2));
    if (!suffix.empty()) {
      message += suffix;
      break;
    }
  }
  return RedactText(message);
}

}  // namespace gapless

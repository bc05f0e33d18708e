#include "core/redact.h"

#include <array>
#include <cctype>

namespace gapless {
namespace {

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool IsKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}

// Query parameters that are settings of the connection, never credentials.
bool IsSafeParameter(std::string_view name) {
  static constexpr std::array<std::string_view, 17> kSafe = {"sslmode",
                                                             "sslrootcert",
                                                             "connect_timeout",
                                                             "target_session_attrs",
                                                             "application_name",
                                                             "sslcert",
                                                             "sslkey",
                                                             "heartbeat",
                                                             "channel_max",
                                                             "frame_max",
                                                             "verify",
                                                             "timeout",
                                                             "tls",
                                                             "security.protocol",
                                                             "cacertfile",
                                                             "certfile",
                                                             "keyfile"};
  for (std::string_view s : kSafe) {
    if (s == name) return true;
  }
  return false;
}

bool LooksLikeKey(std::string_view segment) {
  bool has_digit = false;
  for (char c : segment) {
    if (std::isdigit(static_cast<unsigned char>(c))) has_digit = true;
  }
  if (segment.size() >= 8 && has_digit) return true;
  if (segment.size() < 16) return false;
  for (char c : segment) {
    if (!IsKeyChar(c)) return false;
  }
  return true;
}

bool PathMayHoldKeys(std::string_view scheme) {
  return scheme == "http" || scheme == "https" || scheme == "ws" || scheme == "wss";
}

std::string RedactQuery(std::string_view query) {
  std::string out;
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view param = query.substr(pos, amp - pos);
    size_t eq = param.find('=');
    if (eq == std::string_view::npos) {
      // A bare word may be a token on its own ("?s3cret").
      out += param.empty() ? "" : kRedacted;
    } else {
      std::string_view name = param.substr(0, eq);
      out += name;
      out.push_back('=');
      out += IsSafeParameter(name) ? param.substr(eq + 1) : kRedacted;
    }
    if (amp < query.size()) out.push_back('&');
    pos = amp + 1;
  }
  return out;
}

// libpq's key=value form: "host=h password = 'it\'s' dbname=x" -> "host=h password=*** dbname=x".
std::string RedactKeyValue(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsSpace(s[i])) out.push_back(s[i++]);
    size_t key_start = i;
    while (i < s.size() && s[i] != '=' && !IsSpace(s[i])) i++;
    if (key_start == s.size()) return out;
    std::string_view key = s.substr(key_start, i - key_start);
    size_t j = i;
    while (j < s.size() && IsSpace(s[j])) j++;
    if (j >= s.size() || s[j] != '=') {
      // Not a key=value pair: the rest is not shown (libpq will reject it anyway).
      out += kRedacted;
      return out;
    }
    out += key;
    j++;
    while (j < s.size() && IsSpace(s[j])) j++;
    size_t value_start = j;
    if (j < s.size() && s[j] == '\'') {
      j++;
      while (j < s.size()) {
        // libpq escapes a quote as \' ; '' (SQL style) is not libpq syntax, but a password
        // written that way must not leak either.
        if ((s[j] == '\\' || (s[j] == '\'' && j + 1 < s.size() && s[j + 1] == '\'')) &&
            j + 1 < s.size()) {
          j += 2;
          continue;
        }
        if (s[j] == '\'') {
          j++;
          break;
        }
        j++;
      }
    } else {
      while (j < s.size() && !IsSpace(s[j])) j++;
    }
    out.push_back('=');
    if (key == "password" || key == "sslpassword") {
      out += kRedacted;
    } else {
      out += s.substr(value_start, j - value_start);
    }
    i = j;
  }
  return out;
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos && url.find('=') != std::string_view::npos) {
    return RedactKeyValue(url);
  }
  std::string_view scheme;
  std::string out;
  std::string_view rest = url;
  if (scheme_end != std::string_view::npos) {
    scheme = url.substr(0, scheme_end);
    out.append(url.substr(0, scheme_end + 3));
    rest = url.substr(scheme_end + 3);
  }
  size_t path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    out += kRedacted;
    authority = authority.substr(at);
  }
  out.append(authority);
  if (path_start == std::string_view::npos) return out;
  std::string_view tail = rest.substr(path_start);
  std::string_view path = tail.substr(0, tail.find_first_of("?#"));
  std::string_view query;
  if (size_t q = tail.find('?'); q != std::string_view::npos) {
    query = tail.substr(q + 1);
    query = query.substr(0, query.find('#'));
  }
  const bool keys_in_path = PathMayHoldKeys(scheme);
  size_t pos = 0;
  while (pos < path.size()) {
    if (path[pos] == '/') {
      out.push_back('/');
      ++pos;
      continue;
    }
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view segment = path.substr(pos, end - pos);
    out.append(keys_in_path && LooksLikeKey(segment) ? kRedacted : segment);
    pos = end;
  }
  if (tail.find('?') != std::string_view::npos) {
    out.push_back('?');
    out += RedactQuery(query);
  }
  return out;
}

std::string RedactUrlList(std::string_view urls) {
  // Split only at a comma that starts another URL ("scheme://"): "redis://h1:1,h2:2" is one URL
  // with two hosts.
  std::string out;
  size_t start = 0;
  size_t pos = 0;
  while (true) {
    size_t comma = urls.find(',', pos);
    bool split = comma == std::string_view::npos;
    if (!split) {
      std::string_view next = urls.substr(comma + 1);
      size_t sep = next.find("://");
      size_t stop = next.find_first_of(",/?@");
      split = sep != std::string_view::npos && (stop == std::string_view::npos || sep < stop);
    }
    if (split) {
      size_t end = comma == std::string_view::npos ? urls.size() : comma;
      out += RedactUrl(urls.substr(start, end - start));
      if (comma == std::string_view::npos) return out;
      out.push_back(',');
      start = comma + 1;
    }
    pos = comma + 1;
  }
}

std::vector<std::string> SecretsOf(std::string_view url) {
  std::vector<std::string> out;
  auto add = [&](std::string_view s) {
    if (s.size() >= 4) out.emplace_back(s);
  };
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    // libpq's key=value form: the values of its password keys.
    for (std::string_view key : {"password", "sslpassword"}) {
      size_t at = 0;
      while ((at = url.find(key, at)) != std::string_view::npos) {
        size_t eq = url.find('=', at + key.size());
        at += key.size();
        if (eq == std::string_view::npos) break;
        size_t v = url.find_first_not_of(" '", eq + 1);
        if (v == std::string_view::npos) break;
        size_t end = url.find_first_of(" '", v);
        add(url.substr(v, end == std::string_view::npos ? std::string_view::npos : end - v));
      }
    }
    return out;
  }
  std::string_view scheme = url.substr(0, scheme_end);
  std::string_view rest = url.substr(scheme_end + 3);
  size_t path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    size_t colon = userinfo.find(':');
    add(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) add(userinfo.substr(colon + 1));
  }
  if (path_start == std::string_view::npos) return out;
  std::string_view tail = rest.substr(path_start);
  if (size_t hash = tail.find('#'); hash != std::string_view::npos) {
    add(tail.substr(hash + 1));
    tail = tail.substr(0, hash);
  }
  std::string_view path = tail.substr(0, tail.find('?'));
  if (PathMayHoldKeys(scheme)) {
    size_t pos = 0;
    while (pos < path.size()) {
      size_t end = path.find('/', pos);
      if (end == std::string_view::npos) end = path.size();
      std::string_view segment = path.substr(pos, end - pos);
      if (LooksLikeKey(segment)) add(segment);
      pos = end + 1;
    }
  }
  if (size_t q = tail.find('?'); q != std::string_view::npos) {
    std::string_view query = tail.substr(q + 1);
    size_t pos = 0;
    while (pos < query.size()) {
      size_t amp = query.find('&', pos);
      if (amp == std::string_view::npos) amp = query.size();
      std::string_view param = query.substr(pos, amp - pos);
      size_t eq = param.find('=');
      if (eq == std::string_view::npos) {
        add(param);
      } else if (!IsSafeParameter(param.substr(0, eq))) {
        add(param.substr(eq + 1));
      }
      pos = amp + 1;
    }
  }
  return out;
}

std::string ScrubSecrets(std::string text, const std::vector<std::string>& secrets) {
  for (const std::string& secret : secrets) {
    if (secret.empty()) continue;
    size_t at = 0;
    while ((at = text.find(secret, at)) != std::string::npos) {
      text.replace(at, secret.size(), kRedacted);
      at += kRedacted.size();
    }
  }
  return text;
}

}  // namespace gapless

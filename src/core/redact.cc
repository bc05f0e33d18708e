#include "core/redact.h"

#include <algorithm>
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

// A URL without a scheme is malformed: its path is hidden as an http URL's would be.
bool PathMayHoldKeys(std::string_view scheme) {
  return scheme.empty() || scheme == "http" || scheme == "https" || scheme == "ws" ||
         scheme == "wss";
}

bool IsPasswordKey(std::string_view key) { return key == "password" || key == "sslpassword"; }

// libpq's key=value form: no "://", and it opens with a word followed by '='.
bool IsKeyValueForm(std::string_view s) {
  if (s.find("://") != std::string_view::npos) return false;
  size_t i = 0;
  while (i < s.size() && IsSpace(s[i])) ++i;
  const size_t word = i;
  while (i < s.size() && (std::isalpha(static_cast<unsigned char>(s[i])) != 0 || s[i] == '_')) {
    ++i;
  }
  if (i == word) return false;
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i < s.size() && s[i] == '=';
}

// A token of free text that opens a URL whose user info runs past the token: "scheme://u:pa" with
// no '@', where what follows the ':' is no port ("postgresql://u:pa ss@h" cut at the space, or at
// a quote). The length of that "u:pa", 0 when the token is no such start.
size_t CutUserInfo(std::string_view token) {
  size_t sep = token.find("://");
  if (sep == std::string_view::npos) return 0;
  std::string_view after = token.substr(sep + 3);
  if (after.find('@') != std::string_view::npos || after.starts_with('[')) return 0;
  std::string_view piece = after.substr(0, after.find_first_of("/,?#"));
  size_t colon = piece.find(':');
  if (colon == std::string_view::npos) return 0;
  std::string_view port = piece.substr(colon + 1);
  const bool is_port = !port.empty() && std::all_of(port.begin(), port.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
  return is_port ? 0 : piece.size();
}

// A URL cut into its parts, leniently: it need not be valid, only split where a client could
// split it. The user info runs to the LAST '@' before the query: a password with a raw '@' or
// '/' ("u:p@ss@host", "u:pa/ss@host") is hidden whole however a client would read it.
struct UrlParts {
  std::string_view scheme;  // "" when there is no "://"
  size_t scheme_end = 0;    // where what follows "scheme://" starts
  bool has_user_info = false;
  std::string_view user_info;
  std::string_view authority;  // "@host:port" after a user info, else "host:port"
  std::string_view path;
  bool has_query = false;
  std::string_view query;
  std::string_view fragment;
};

UrlParts SplitUrl(std::string_view url) {
  UrlParts p;
  if (size_t sep = url.find("://"); sep != std::string_view::npos) {
    p.scheme = url.substr(0, sep);
    p.scheme_end = sep + 3;
  }
  std::string_view rest = url.substr(p.scheme_end);
  size_t host_start = 0;
  if (size_t at = UserInfoEnd(rest); at != std::string_view::npos) {
    p.has_user_info = true;
    p.user_info = rest.substr(0, at);
    host_start = at;
  }
  size_t host_end = rest.find_first_of("/?#", host_start + (p.has_user_info ? 1 : 0));
  if (host_end == std::string_view::npos) host_end = rest.size();
  p.authority = rest.substr(host_start, host_end - host_start);
  std::string_view tail = rest.substr(host_end);
  if (size_t hash = tail.find('#'); hash != std::string_view::npos) {
    p.fragment = tail.substr(hash + 1);
    tail = tail.substr(0, hash);
  }
  if (size_t q = tail.find('?'); q != std::string_view::npos) {
    p.has_query = true;
    p.query = tail.substr(q + 1);
    tail = tail.substr(0, q);
  }
  p.path = tail;
  return p;
}

}  // namespace

size_t UserInfoEnd(std::string_view rest) {
  // The last '@' before the query: a raw '@' or '/' in the password.
  size_t at = rest.substr(0, rest.find_first_of("?#")).rfind('@');
  // A raw '?' or '#' in the password (libpq and the Redis client read it as part of it): the last
  // '@' before the first '/' after the first '@'.
  if (size_t first = rest.find('@'); first != std::string_view::npos) {
    size_t last = rest.substr(0, rest.find('/', first)).rfind('@');
    if (at == std::string_view::npos || last > at) at = last;
  }
  return at;
}

namespace {

// The end of the value that starts at or after `pos` (spaces and one '=' skipped): a quoted
// value to its closing quote, else to the next space.
size_t EndOfValue(std::string_view s, size_t pos) {
  while (pos < s.size() && (IsSpace(s[pos]) || s[pos] == '=')) ++pos;
  if (pos < s.size() && s[pos] == '\'') {
    ++pos;
    while (pos < s.size() && s[pos] != '\'') pos += s[pos] == '\\' ? 2 : 1;
    return std::min(pos + 1, s.size());
  }
  while (pos < s.size() && !IsSpace(s[pos])) ++pos;
  return pos;
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
  if (IsKeyValueForm(url)) return RedactKeyValue(url);
  const UrlParts parts = SplitUrl(url);
  std::string out(url.substr(0, parts.scheme_end));
  if (parts.has_user_info) out += kRedacted;
  out.append(parts.authority);
  std::string_view path = parts.path;
  const bool keys_in_path = PathMayHoldKeys(parts.scheme);
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
  if (parts.has_query) {
    out.push_back('?');
    out += RedactQuery(parts.query);
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
  if (IsKeyValueForm(url)) {
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
  const UrlParts parts = SplitUrl(url);
  if (parts.has_user_info) {
    // The whole user info, and its user and password apart: a password with a raw '@' or ':'
    // splits differently in each client, so each piece is listed.
    std::string_view userinfo = parts.user_info;
    size_t colon = userinfo.find(':');
    add(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) add(userinfo.substr(colon + 1));
    for (size_t start = 0; start <= userinfo.size();) {
      size_t stop = userinfo.find_first_of(":@/", start);
      if (stop == std::string_view::npos) stop = userinfo.size();
      if (stop - start < userinfo.size()) add(userinfo.substr(start, stop - start));
      start = stop + 1;
    }
  }
  if (!parts.fragment.empty()) add(parts.fragment);
  if (PathMayHoldKeys(parts.scheme)) {
    std::string_view path = parts.path;
    size_t pos = 0;
    while (pos < path.size()) {
      size_t end = path.find('/', pos);
      if (end == std::string_view::npos) end = path.size();
      std::string_view segment = path.substr(pos, end - pos);
      if (LooksLikeKey(segment)) add(segment);
      pos = end + 1;
    }
  }
  if (parts.has_query) {
    std::string_view query = parts.query;
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
  // Dedupe, keeping the order (the user name and a piece of the user info may be the same).
  std::vector<std::string> unique;
  for (std::string& s : out) {
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(std::move(s));
  }
  return unique;
}

std::string RedactText(std::string_view text) {
  // A token ends at white space or a quote: error messages quote what they echo ('x', "x", `x`).
  auto is_delimiter = [](char c) { return IsSpace(c) || c == '\'' || c == '"' || c == '`'; };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (is_delimiter(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    size_t end = i;
    while (end < text.size() && !is_delimiter(text[end])) ++end;
    std::string_view token = text.substr(i, end - i);
    if (size_t cut = CutUserInfo(token); cut > 0) {
      // "postgresql://u:pa ss@h": the URL runs on to the next token holding '@' on this line;
      // without one, what follows "://" is hidden.
      size_t joined = std::string_view::npos;
      for (size_t next = end; next < text.size() && text[next] != '\n';) {
        while (next < text.size() && is_delimiter(text[next]) && text[next] != '\n') ++next;
        size_t stop = next;
        while (stop < text.size() && !is_delimiter(text[stop])) ++stop;
        std::string_view piece = text.substr(next, stop - next);
        if (piece.empty() || piece.find("://") != std::string_view::npos) break;
        if (piece.find('@') != std::string_view::npos) {
          joined = stop;
          break;
        }
        next = stop;
      }
      if (joined != std::string_view::npos) {
        out += RedactUrlList(text.substr(i, joined - i));
        end = joined;
      } else {
        const size_t user_info = token.find("://") + 3;
        out.append(token.substr(0, user_info));
        out += kRedacted;
        out += RedactUrlList(token.substr(user_info + cut));
      }
    } else if (token.find("://") != std::string_view::npos ||
               token.find('@') != std::string_view::npos) {
      out += RedactUrlList(token);
    } else if (size_t eq = token.find('=');
               eq != std::string_view::npos && IsPasswordKey(token.substr(0, eq))) {
      // "password=x", or "password='x y'" whose quoted value runs past this token.
      out.append(token.substr(0, eq + 1));
      out += kRedacted;
      end = eq + 1 < token.size() ? end : EndOfValue(text, end);
    } else if (IsPasswordKey(token) &&
               text.find_first_not_of(" \t", end) != std::string_view::npos &&
               text[text.find_first_not_of(" \t", end)] == '=') {
      // "password = 'x'": libpq's key=value form spread over tokens.
      out.append(token);
      out += "=";
      out += kRedacted;
      end = EndOfValue(text, end);
    } else {
      out.append(token);
    }
    i = end;
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

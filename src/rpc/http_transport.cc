#include "rpc/http_transport.h"

namespace gapless {

HttpTransport::~HttpTransport() = default;

namespace {

bool LooksLikeKey(std::string_view segment) {
  if (segment.size() < 16) return false;
  for (char c : segment) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  std::string out;
  out.reserve(url.size());
  size_t authority_start = 0;
  if (size_t scheme_end = url.find("://"); scheme_end != std::string_view::npos) {
    authority_start = scheme_end + 3;
  }
  out.append(url.substr(0, authority_start));
  std::string_view rest = url.substr(authority_start);
  size_t path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    authority = authority.substr(at + 1);
  }
  out.append(authority);
  if (path_start == std::string_view::npos) return out;
  std::string_view path = rest.substr(path_start);
  bool had_query = false;
  if (size_t q = path.find_first_of("?#"); q != std::string_view::npos) {
    had_query = true;
    path = path.substr(0, q);
  }
  // Path segments, keeping the separators.
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
    out.append(LooksLikeKey(segment) ? std::string_view("<redacted>") : segment);
    pos = end;
  }
  if (had_query) out.append("?<redacted>");
  return out;
}

}  // namespace gapless

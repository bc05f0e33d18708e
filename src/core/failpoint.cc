#include "core/failpoint.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace gapless {
namespace {

struct Armed {
  std::mutex mu;
  // Armed and not fired yet: how many more times each point is reached before it fires (1: the
  // next time).
  std::map<std::string, int64_t, std::less<>> left;
};

Armed* LoadArmed() {
  const char* spec = std::getenv("GAPLESS_FAILPOINTS");
  if (spec == nullptr || *spec == '\0') return nullptr;
  auto* armed = new Armed;  // lives as long as the process: points may fire during exit
  std::string_view rest(spec);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    // "name" or "name@N": fires the Nth time it is reached (a malformed N counts as 1).
    int64_t nth = 1;
    if (size_t at = item.find('@'); at != std::string_view::npos) {
      std::string_view count = item.substr(at + 1);
      int64_t n = 0;
      auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
      if (ec == std::errc() && end == count.data() + count.size() && n >= 1) nth = n;
      item = item.substr(0, at);
    }
    if (!item.empty()) armed->left[std::string(item)] = nth;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return armed;
}

}  // namespace

bool FailpointFiresOnce(std::string_view name) {
  static Armed* const armed = LoadArmed();
  if (armed == nullptr) return false;
  std::lock_guard<std::mutex> lock(armed->mu);
  auto it = armed->left.find(name);
  if (it == armed->left.end()) return false;
  if (--it->second > 0) return false;
  armed->left.erase(it);
  return true;
}

}  // namespace gapless

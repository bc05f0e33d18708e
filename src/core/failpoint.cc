#include "core/failpoint.h"

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace gapless {
namespace {

struct Armed {
  std::mutex mu;
  std::set<std::string, std::less<>> names;  // armed and not fired yet
};

Armed* LoadArmed() {
  const char* spec = std::getenv("GAPLESS_FAILPOINTS");
  if (spec == nullptr || *spec == '\0') return nullptr;
  auto* armed = new Armed;  // lives as long as the process: points may fire during exit
  std::string_view rest(spec);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    if (!name.empty()) armed->names.emplace(name);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return armed;
}

}  // namespace

bool FailpointFiresOnce(std::string_view name) {
  static Armed* const armed = LoadArmed();
  if (armed == nullptr) return false;
  std::lock_guard<std::mutex> lock(armed->mu);
  auto it = armed->names.find(name);
  if (it == armed->names.end()) return false;
  armed->names.erase(it);
  return true;
}

}  // namespace gapless

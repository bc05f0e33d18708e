#include "core/mutation.h"

#ifdef GAPLESS_MUTATIONS
#include <cstdio>
#include <cstdlib>
#include <string>

namespace gapless {

bool Mutated(std::string_view check) {
  static const std::string mutation = [] {
    const char* name = std::getenv("GAPLESS_MUTATION");
    std::string m = name == nullptr ? "" : name;
    if (!m.empty()) std::fprintf(stderr, "MUTATION: the \"%s\" check is disabled\n", m.c_str());
    return m;
  }();
  return !mutation.empty() && mutation == check;
}

}  // namespace gapless
#endif

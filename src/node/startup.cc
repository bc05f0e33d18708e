#include "node/startup.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/env.h"

namespace gapless {

Status RetryWhileUnavailable(std::string_view what, const std::function<Status()>& attempt,
                             const std::atomic<bool>* stop) {
  Status st = attempt();
  for (int n = 0; st.code() == Code::kUnavailable; ++n) {
    if (stop != nullptr && stop->load()) return st;
    const int64_t delay = BackoffMicros(Env::Default(), std::min(n, 5), 200'000, 5'000'000);
    spdlog::warn("{} cannot be opened yet ({}); trying again in {:.1f} s", what, st.ToString(),
                 static_cast<double>(delay) / 1e6);
    Env::Default()->SleepMicros(delay);
    if (stop != nullptr && stop->load()) return st;
    st = attempt();
  }
  return st;
}

}  // namespace gapless

#include "node/startup.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/env.h"

namespace gapless {

Status RetryWhileUnavailable(std::string_view what, const std::function<Status()>& attempt,
                             const std::atomic<bool>* stop, int64_t give_up_after_ms) {
  Env* env = Env::Default();
  const int64_t deadline = env->NowMicros() + give_up_after_ms * 1000;
  Status st = attempt();
  for (int n = 0; st.code() == Code::kUnavailable; ++n) {
    if (stop != nullptr && stop->load()) return st;
    int64_t delay = BackoffMicros(env, std::min(n, 5), 200'000, 5'000'000);
    if (give_up_after_ms > 0) {
      const int64_t left = deadline - env->NowMicros();
      if (left <= 0) {
        return st.WithContext(
            fmt::format("{} could not be opened: gave up after {:.1f} s "
                        "(--startup-timeout)",
                        what, static_cast<double>(give_up_after_ms) / 1e3));
      }
      delay = std::min(delay, left);
    }
    spdlog::warn("{} cannot be opened yet ({}); trying again in {:.1f} s", what, st.ToString(),
                 static_cast<double>(delay) / 1e6);
    env->SleepMicros(delay);
    if (stop != nullptr && stop->load()) return st;
    st = attempt();
  }
  return st;
}

}  // namespace gapless

// startup: how a long-running process (run, leader, worker, consume) opens what it needs as it
// starts. A supervisor restarts a process during an outage as a matter of course (a broker or
// Redis restart, a failover, PostgreSQL coming back), so a server that is away at the start is
// waited for, as the running roles wait out the same outage a minute later; only a configuration
// error stops the process (chaos seeds 170 and 270: processes restarted during an outage exited
// again and again). The cost: a wrong port waits forever instead of failing, so every wait warns,
// naming what it waits for and the error.
//
// Thread-safety: the functions may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace gapless {

// Calls `attempt` until it returns anything but Unavailable, sleeping between tries with backoff
// (200 ms doubling up to 5 s) and warning each time "`what` cannot be opened yet (error); trying
// again in N s". Returns the last attempt's status; Unavailable as it is when `stop` (nullable,
// checked between tries) is set.
Status RetryWhileUnavailable(std::string_view what, const std::function<Status()>& attempt,
                             const std::atomic<bool>* stop);

// RetryWhileUnavailable for an `open` that returns what it opened.
template <typename T>
Result<T> OpenWhenReachable(std::string_view what, const std::function<Result<T>()>& open,
                            const std::atomic<bool>* stop) {
  std::optional<Result<T>> opened;
  static_cast<void>(RetryWhileUnavailable(
      what,
      [&] {
        opened.emplace(open());
        return opened->ok() ? Status::Ok() : opened->status();
      },
      stop));
  return std::move(*opened);
}

}  // namespace gapless

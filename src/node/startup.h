// startup: how a long-running process (run, leader, worker, consume) opens what it needs as it
// starts. A supervisor restarts a process during an outage as a matter of course (a broker or
// Redis restart, a failover, PostgreSQL coming back), so a server that is away at the start is
// waited for, as the running roles wait out the same outage a minute later; only a configuration
// error stops the process (chaos seeds 170 and 270: processes restarted during an outage exited
// again and again). The cost: a wrong port waits instead of failing, so every wait warns, naming
// what it waits for and the error; and a process with an end (run or leader with a numbered --to,
// not following the chain) waits at most `give_up_after_ms` (--startup-timeout), then fails with
// the last error, which names the server (issue 35: `run --redis` at a dead Redis never exited).
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
// checked between tries) is set, and when `give_up_after_ms` (> 0; 0: never) have passed since
// the first try, then prefixed with "gave up after N s: ".
Status RetryWhileUnavailable(std::string_view what, const std::function<Status()>& attempt,
                             const std::atomic<bool>* stop, int64_t give_up_after_ms = 0);

// RetryWhileUnavailable for an `open` that returns what it opened.
template <typename T>
Result<T> OpenWhenReachable(std::string_view what, const std::function<Result<T>()>& open,
                            const std::atomic<bool>* stop, int64_t give_up_after_ms = 0) {
  std::optional<Result<T>> opened;
  Status last = RetryWhileUnavailable(
      what,
      [&] {
        opened.emplace(open());
        return opened->ok() ? Status::Ok() : opened->status();
      },
      stop, give_up_after_ms);
  if (!opened->ok()) return last;  // with the "gave up" context
  return std::move(*opened);
}

}  // namespace gapless

// WaitFor: polls a condition until it holds or a deadline passes, for tests that watch processes
// and servers change state (a leader elected, a node repaired). Header-only; thread-safe as pred.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace gapless::testing_util {

// Monotonic milliseconds, for measuring what a test waited for.
inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// True once pred() is true, polling every 10 ms; false if it is still false after `ms`.
template <typename Pred>
bool WaitFor(Pred pred, int64_t ms) {
  int64_t end = NowMs() + ms;
  while (NowMs() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace gapless::testing_util

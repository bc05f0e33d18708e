// Progress: live progress of an indexing run, for a human watching it.
//
// On a TTY it redraws one status line (bar, percent, blocks/s, tx/s, ETA) on stderr about four
// times a second; otherwise it writes a plain log line every `plain_interval` seconds, so CI logs
// and `journalctl` stay readable. Counters are atomics bumped by worker threads; the reporter
// runs on its own thread between Start() and Stop(). Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/env.h"

namespace gapless {

struct IndexCounters {
  std::atomic<uint64_t> blocks{0};
  std::atomic<uint64_t> transactions{0};
  std::atomic<uint64_t> logs{0};
  std::atomic<uint64_t> token_transfers{0};
  std::atomic<uint64_t> ranges{0};
  std::atomic<uint64_t> retries{0};
  // Of `blocks`: committed blocks decoded from their stored logs (the contracts mode's config
  // change, store/decoded.h "Decoding stored logs"), nothing fetched.
  std::atomic<uint64_t> decoded_from_store{0};
};

class Progress {
 public:
  Progress(const IndexCounters* counters, uint64_t total_blocks, bool tty, Env* env,
           int plain_interval_seconds = 10);
  ~Progress();

  void Start();
  void Stop();  // idempotent; clears the TTY line

  // "1,234 blocks, 56,789 transactions, 123,456 logs, 7,890 token transfers in 12.3 s
  //  (100.3 blocks/s, 4,617 tx/s)"
  std::string Summary() const;

  // Formatting helpers, exposed for tests.
  static std::string Thousands(uint64_t n);
  static std::string Duration(double seconds);  // "0:42", "1:02:03"
  std::string Line(bool tty) const;

 private:
  void Loop();

  const IndexCounters* counters_;
  uint64_t total_;
  bool tty_;
  Env* env_;
  int plain_interval_;
  int64_t start_micros_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gapless

// Internal to the worker's files (worker.cc: the series loop, a part's attempts, the keeper and
// completion; worker_prefetch.cc: the loop with prefetch): the small helpers both use, how a
// write's failure is read and how time and rows are counted. Not included outside node/worker*.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/env.h"
#include "core/model.h"
#include "core/status.h"
#include "store/writer.h"

namespace gapless::worker_internal {

// A write refused by the fence: the task is someone else's now (its lease is lost).
inline bool IsFenceRejection(const Status& st) {
  return st.code() == Code::kAborted && st.reason() == kStaleFenceReason;
}

// A write refused because its token was granted before a re-org's rollback.
inline bool IsReorgFenced(const Status& st) {
  return st.code() == Code::kAborted && st.reason() == kReorgFencedReason;
}

// Failures worth another local attempt of the same task.
inline bool RetryLocally(const Status& st) {
  return st.retriable() || st.code() == Code::kNotFound;
}

// Adds the time since `start` to a timing counter (WorkerCounters).
inline void AddSince(Env* env, int64_t start, std::atomic<uint64_t>& counter) {
  int64_t now = env->NowMicros();
  if (now > start) counter += static_cast<uint64_t>(now - start);
}

// Adds a written part's rows to a task's counts.
inline void AddCounts(uint64_t* blocks, uint64_t* transactions, uint64_t* logs, uint64_t* transfers,
                      const std::vector<BlockData>& decoded) {
  *blocks += decoded.size();
  for (const auto& b : decoded) {
    *transactions += b.transactions.size();
    *logs += b.logs.size();
    *transfers += b.token_transfers.size();
  }
}

}  // namespace gapless::worker_internal

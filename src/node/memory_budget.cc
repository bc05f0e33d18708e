#include "node/memory_budget.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace gapless {

MemoryBudget::MemoryBudget(uint64_t budget_bytes, uint32_t threads) : budget_bytes_(budget_bytes) {
  threads = std::max<uint32_t>(1, threads);
  uint64_t fixed = kBaseBytes + uint64_t{threads} * kThreadBytes;
  share_ = budget_bytes > fixed ? (budget_bytes - fixed) / threads : 0;
  if (limited() && share_ == 0) {
    spdlog::warn(
        "--memory-budget {} MiB is below what {} fetching threads need besides the blocks (~{} "
        "MiB): blocks are fetched and written one at a time, and the budget may still be exceeded",
        budget_bytes / kMiB, threads, fixed / kMiB);
  }
}

uint64_t MemoryBudget::BlocksFitting(double bytes, double per_json_byte, uint64_t most) const {
  most = std::max<uint64_t>(1, most);
  if (!limited()) return most;
  double fits = bytes / (per_json_byte * static_cast<double>(json_per_block_.load()));
  return static_cast<uint64_t>(std::clamp<double>(fits, 1, static_cast<double>(most)));
}

uint32_t MemoryBudget::BatchBlocks(uint32_t requested) const {
  return static_cast<uint32_t>(
      BlocksFitting(static_cast<double>(share_) / 4, kInFlightPerJsonByte, requested));
}

uint64_t MemoryBudget::PartBlocks(uint64_t range_blocks, uint32_t batch_blocks,
                                  uint32_t held_parts) const {
  range_blocks = std::max<uint64_t>(1, range_blocks);
  if (!limited()) return range_blocks;
  double json = static_cast<double>(json_per_block_.load());
  double left = static_cast<double>(share_) - kInFlightPerJsonByte * json * batch_blocks;
  double fits = left / (kDecodedPerJsonByte * json * std::max<uint32_t>(1, held_parts));
  return static_cast<uint64_t>(std::clamp<double>(fits, 1, static_cast<double>(range_blocks)));
}

uint64_t MemoryBudget::StreamQueueBytes() const {
  if (!limited()) return 0;
  return std::max<uint64_t>(share_ / 8, kMiB);
}

uint64_t MemoryBudget::StreamHeldBytes() const {
  if (!limited()) return std::numeric_limits<uint64_t>::max();
  return share_ / 8 * 2;
}

uint32_t MemoryBudget::StreamBatchBlocks(uint32_t requested) const {
  return static_cast<uint32_t>(
      BlocksFitting(static_cast<double>(share_) / 8, kInFlightPerJsonByte, requested));
}

uint64_t MemoryBudget::StreamPartBlocks(uint64_t range_blocks) const {
  return BlocksFitting(static_cast<double>(share_) / 4, kDecodedPerJsonByte, range_blocks);
}

void MemoryBudget::Observe(uint64_t blocks, uint64_t json_bytes) {
  if (blocks == 0) return;
  uint64_t seen = std::max<uint64_t>(1, json_bytes / blocks);
  uint64_t now = json_per_block_.load();
  // The first observation replaces the initial guess; then up at once, down by an eighth of the
  // difference per batch: one batch of small blocks does not make the next part large.
  const bool first = !observed_.exchange(true);
  for (;;) {
    uint64_t next = first || seen >= now ? seen : now - (now - seen) / 8;
    if (json_per_block_.compare_exchange_weak(now, next)) break;
  }
  static std::atomic<bool> said{false};
  if (limited() && kDecodedPerJsonByte * static_cast<double>(seen) > static_cast<double>(share_) &&
      !said.exchange(true)) {
    spdlog::warn(
        "blocks of ~{} KiB of JSON are larger than a fetching thread's share of --memory-budget "
        "({} KiB): they are fetched one at a time and the budget is exceeded while they are held",
        seen / 1024, share_ / 1024);
  }
}

}  // namespace gapless

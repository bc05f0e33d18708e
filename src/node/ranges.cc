#include "node/ranges.h"

#include <algorithm>

namespace gapless {

std::vector<BlockRange> PendingRanges(uint64_t from, uint64_t to, uint64_t range_size,
                                      std::vector<std::pair<uint64_t, uint64_t>> done) {
  std::vector<BlockRange> out;
  if (from > to || range_size == 0) return out;
  std::sort(done.begin(), done.end());
  // Walk the gaps of [from, to] not covered by `done`, then cut each gap at aligned boundaries.
  uint64_t cursor = from;  // first block not yet known to be covered or emitted
  auto emit_gap = [&](uint64_t a, uint64_t b) {
    while (a <= b) {
      uint64_t range_end = (a / range_size) * range_size + range_size - 1;
      uint64_t end = std::min(b, range_end);
      out.push_back({a, end});
      if (end == UINT64_MAX) return;
      a = end + 1;
    }
  };
  for (const auto& [a, b] : done) {
    if (b < cursor) continue;
    if (a > to) break;
    if (a > cursor) emit_gap(cursor, std::min(a - 1, to));
    if (b >= to) return out;
    cursor = std::max(cursor, b + 1);
  }
  if (cursor <= to) emit_gap(cursor, to);
  return out;
}

}  // namespace gapless

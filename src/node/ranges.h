// Block-range arithmetic shared by the single-process indexer and (later) the fleet seeder.
//
// Ranges are aligned: block n belongs to the range starting at floor(n / size) * size, clipped to
// the requested interval. Aligned ranges mean every run, and every worker of a fleet, cuts the
// chain at the same places, so a range recorded as committed is recognised by the next run.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace gapless {

struct BlockRange {
  uint64_t from = 0;  // inclusive
  uint64_t to = 0;    // inclusive
  uint64_t size() const { return to - from + 1; }
  friend bool operator==(const BlockRange&, const BlockRange&) = default;
};

// The aligned ranges covering [from, to] that are not entirely inside `done` (inclusive
// intervals, any order, may overlap). A range partly covered by `done` is returned clipped to the
// uncovered blocks, split where needed.
std::vector<BlockRange> PendingRanges(uint64_t from, uint64_t to, uint64_t range_size,
                                      std::vector<std::pair<uint64_t, uint64_t>> done);

}  // namespace gapless

// testdata: deterministic, mainnet-shaped synthetic blocks for store tests and the write benchmark.
//
// A block's content depends only on (number, options), so any block can be regenerated and
// compared. The defaults follow a busy mainnet block: 150 transactions of every type (0-4 and one
// without "type"), 300 logs with 0-4 topics, 60 token transfers (ERC-20, ERC-721, ERC-1155 single
// and batch), 16 withdrawals; values above 2^64 and up to 2^256-1, contract creations,
// pre-Byzantium receipts (root, no status), empty input/data, and every optional field both set and
// null somewhere. Parent hashes chain: block n's parent_hash is SyntheticBlockHash(n - 1). Pure
// functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "store/writer.h"

namespace gapless {

struct SyntheticOptions {
  uint32_t transactions_per_block = 150;
  uint32_t logs_per_block = 300;            // at least token_transfers_per_block / 2 is sensible
  uint32_t token_transfers_per_block = 60;  // approximate: an ERC-1155 batch yields 3 rows
  uint32_t withdrawals_per_block = 16;      // blocks n % 5 == 0 have none (pre-Shanghai shape)
  uint32_t traces_per_block = 0;            // about: 3 per traced transaction, and the reward
  uint64_t seed = 1;
};

// Small blocks with every kind of row (4 transactions, 6 logs, 2 transfers, 2 withdrawals, 4
// traces), for tests that write many ranges.
SyntheticOptions SmallSyntheticOptions();

std::string SyntheticBlockHash(uint64_t number, uint64_t seed = 1);
BlockData SyntheticBlock(uint64_t number, const SyntheticOptions& options = {});
std::vector<BlockData> SyntheticBlocks(uint64_t from, uint64_t count,
                                       const SyntheticOptions& options = {});
// The range write of blocks from..to (inclusive), ready for WriteRange.
RangeWrite SyntheticRange(uint64_t from, uint64_t to, const SyntheticOptions& options = {},
                          std::optional<int64_t> fence_token = std::nullopt);

// Every field of `data`, one "path=value" per line ("null" for an absent optional), so tests can
// compare two BlockData with EXPECT_EQ and see exactly which field differs.
std::string DescribeBlockData(const BlockData& data);

}  // namespace gapless

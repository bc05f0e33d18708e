// block_message: the Kafka block stream's message format (docs/kafka-blocks.md), both ways.
//
// One message = one block: key = the block number in decimal; value = the block object of
// eth_getBlockByNumber(n, true) with one added member "receipts" (the block's receipts in
// transaction order). Parsing cuts the message into a RawBlock (core/raw_block.h) and checks
// only the envelope (a JSON object, a "number", a "receipts" array, the key agreeing with the
// number); the block's content is checked by the decoder like any source's (DecodeRawBlock).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/raw_block.h"
#include "core/status.h"

namespace gapless {

// The message value for a raw block: its block JSON with "receipts" added as the last member.
// InvalidData when the block JSON is not an object.
Result<std::string> EncodeBlockMessage(const RawBlock& block);

// The raw block of a message value. `key` is the message key (empty: not checked). InvalidData
// naming the block (or the key, or the offset given in `where`) for a value that is not an
// object with a hex "number" and a "receipts" array, or whose number differs from the key.
Result<RawBlock> ParseBlockMessage(std::string value, std::string_view key, std::string_view where);

}  // namespace gapless

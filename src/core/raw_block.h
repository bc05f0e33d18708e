// RawBlock: one block as a block source delivered it (source/block_source.h), not decoded yet.
// Every source fills it the same way, so decoding and the block/receipts consistency checks are
// done once, in one place, for all of them (decode/decode.h DecodeBlock, through
// source/block_source.h DecodeRawBlock).
#pragma once

#include <cstdint>
#include <string>

namespace gapless {

struct RawBlock {
  uint64_t number = 0;        // the block number the source was asked for / keyed it by
  std::string block_json;     // eth_getBlockByNumber(number, true): full transaction objects
  std::string receipts_json;  // a JSON array of the block's receipts, in transaction order
  // The block's "hash" as the source stated it (0x-hex), where the source parsed it (the Kafka
  // stream's messages); empty otherwise. The decoder reads and checks the real one.
  std::string hash;
  // With traces on (JsonRpcClientOptions::traces): the block's trace answer and which API gave
  // it; kNone when traces were not fetched.
  enum class TraceApi { kNone, kTraceBlock, kDebugTrace };
  TraceApi traces_api = TraceApi::kNone;
  // trace_block(n), or debug_traceBlockByHash(hash, callTracer) (debug_traceBlockByNumber(n,
  // callTracer) from a node without it): both debug answers decode alike.
  std::string traces_json;
  // Over an endpoint pool (rpc/endpoint_pool.h): the endpoints whose answers make up this block
  // (its block and receipts), bit i for endpoint i, so a block found wrong is blamed on them
  // alone (BlockSource::Distrust). 0 when the source does not say (one endpoint, Kafka).
  uint64_t served_by = 0;
  // The same for its traces, kept apart: traces that disagree with the block are blamed on the
  // side that is wrong (node/range_job.cc), not on both.
  uint64_t traces_served_by = 0;
};

}  // namespace gapless

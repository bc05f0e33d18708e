#include "node/range_job.h"

#include <algorithm>

#include "decode/decode.h"

namespace gapless {

bool IsRateLimited(const Status& status) {
  return status.code() == Code::kUnavailable &&
         (status.reason() == HttpStatusReason(429) || status.reason() == kRpcRateLimitedReason);
}

Status FetchAndDecodeRange(JsonRpcClient& rpc, uint64_t from, uint64_t to,
                           uint32_t blocks_per_request, std::optional<uint64_t> chain_id,
                           RateLimiter* limiter, const std::atomic<bool>* stop,
                           std::vector<BlockData>* out) {
  if (from > to) return Internal("FetchAndDecodeRange: from above to");
  uint64_t per_request = std::max<uint32_t>(1, blocks_per_request);
  out->reserve(out->size() + (to - from + 1));
  for (uint64_t first = from; first <= to;) {
    if (stop != nullptr && stop->load()) return Interrupted();
    uint64_t count = std::min<uint64_t>(per_request, to - first + 1);
    if (limiter != nullptr) GAPLESS_RETURN_IF_ERROR(limiter->Acquire());
    auto raw = rpc.FetchBlocks(first, count);
    if (!raw.ok()) {
      if (limiter != nullptr && IsRateLimited(raw.status())) limiter->SlowDown();
      return raw.status();
    }
    for (auto& block : *raw) {
      DecodeOptions decode_options;
      decode_options.expected_number = block.number;
      decode_options.expected_chain_id = chain_id;
      GAPLESS_ASSIGN_OR_RETURN(BlockData data,
                               DecodeBlock(block.block_json, block.receipts_json, decode_options));
      out->push_back(std::move(data));
    }
    first += count;
  }
  return Status::Ok();
}

}  // namespace gapless

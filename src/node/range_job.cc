#include "node/range_job.h"

#include <algorithm>

namespace gapless {

BlockSourceFactory RpcBlockSources(RpcClientFactory make_client) {
  return [make_client = std::move(make_client)]() -> std::unique_ptr<BlockSource> {
    return std::make_unique<RpcBlockSource>(make_client());
  };
}

bool IsRateLimited(const Status& status) {
  return status.code() == Code::kUnavailable &&
         (status.reason() == HttpStatusReason(429) || status.reason() == kRpcRateLimitedReason);
}

Status FetchAndDecodeRange(BlockSource& source, uint64_t from, uint64_t to,
                           uint32_t blocks_per_request, const BlockChecks& checks,
                           RateLimiter* limiter, const std::atomic<bool>* stop,
                           std::vector<BlockData>* out) {
  if (from > to) return Internal("FetchAndDecodeRange: from above to");
  if (!source.rate_limited()) limiter = nullptr;
  uint64_t per_request = std::max<uint32_t>(1, blocks_per_request);
  out->reserve(out->size() + (to - from + 1));
  const std::string described = source.Describe();
  for (uint64_t first = from; first <= to;) {
    if (stop != nullptr && stop->load()) return Interrupted();
    uint64_t count = std::min<uint64_t>(per_request, to - first + 1);
    if (limiter != nullptr) GAPLESS_RETURN_IF_ERROR(limiter->Acquire());
    auto raw = source.Fetch(first, count);
    if (!raw.ok()) {
      if (limiter != nullptr && IsRateLimited(raw.status())) limiter->SlowDown();
      return raw.status();
    }
    for (RawBlock& block : *raw) {
      GAPLESS_ASSIGN_OR_RETURN(BlockData data, DecodeRawBlock(block, checks, described));
      out->push_back(std::move(data));
    }
    first += count;
  }
  return Status::Ok();
}

}  // namespace gapless

#include "node/range_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <span>

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

namespace {

// Who answered wrong when decoding `block` failed with `error` (InvalidData): its block and
// receipts' servers; for traces that disagree with the block, one side. The block alone (decoded
// without its traces) is held against the head log (`check`, nullable): a block the head log
// refuses is the wrong side, otherwise its traces are (their server answered for another block).
uint64_t BlameForDecode(const RawBlock& block, const Status& error, const BlockChecks& checks,
                        const RangeCheck* check, const std::string& described) {
  if (error.reason() != kTracesDisagreeReason || block.traces_served_by == 0 ||
      block.traces_served_by == block.served_by) {
    return block.served_by | block.traces_served_by;
  }
  if (check != nullptr && *check) {
    RawBlock alone = block;
    alone.traces_api = RawBlock::TraceApi::kNone;
    alone.traces_json.clear();
    Result<BlockData> data = DecodeRawBlock(alone, checks, described);
    size_t wrong = SIZE_MAX;
    if (!data.ok() ||
        (*check)(std::span<const BlockData>(&*data, 1), &wrong).code() == Code::kInvalidData) {
      return block.served_by;
    }
  }
  return block.traces_served_by;
}

}  // namespace

Status FetchAndDecodeRange(BlockSource& source, uint64_t from, uint64_t to,
                           uint32_t blocks_per_request, const BlockChecks& checks,
                           RateLimiter* limiter, const std::atomic<bool>* stop,
                           std::vector<BlockData>* out, const EnrichOptions* enrich,
                           MemoryBudget* budget, const RangeCheck* check, Datasets* held) {
  const size_t start = out->size();
  bool traced = true;  // every block came with its traces
  if (from > to) return Internal("FetchAndDecodeRange: from above to");
  if (!source.rate_limited()) limiter = nullptr;
  uint64_t per_request = std::max<uint32_t>(1, blocks_per_request);
  out->reserve(out->size() + (to - from + 1));
  const std::string described = source.Describe();
  // Who served each block appended here (RawBlock::served_by), for the check below.
  std::vector<uint64_t> served_by;
  served_by.reserve(to - from + 1);
  std::map<uint64_t, std::string> servers;  // served_by -> DescribeServers
  for (uint64_t first = from; first <= to;) {
    if (stop != nullptr && stop->load()) return Interrupted();
    uint64_t count = std::min<uint64_t>(per_request, to - first + 1);
    if (limiter != nullptr) GAPLESS_RETURN_IF_ERROR(limiter->Acquire());
    auto raw = source.Fetch(first, count);
    if (!raw.ok()) {
      if (limiter != nullptr && IsRateLimited(raw.status())) limiter->SlowDown();
      return raw.status();
    }
    if (budget != nullptr) {
      uint64_t json = 0;
      for (const RawBlock& block : *raw) {
        json += block.block_json.size() + block.receipts_json.size() + block.traces_json.size();
      }
      budget->Observe(raw->size(), json);
    }
    for (RawBlock& block : *raw) {
      if (block.traces_api == RawBlock::TraceApi::kNone) traced = false;
      // Errors name the endpoint that served the block, not the whole pool.
      const uint64_t answered = block.served_by | block.traces_served_by;
      auto named = answered == 0 ? servers.end() : servers.find(answered);
      if (answered != 0 && named == servers.end()) {
        named = servers.emplace(answered, source.DescribeServers(answered)).first;
      }
      Result<BlockData> data =
          DecodeRawBlock(block, checks, named == servers.end() ? described : named->second);
      if (!data.ok()) {
        // Inconsistent answers (a block and receipts of two forks, traces of another block): a
        // source over several endpoints asks others next time.
        if (data.status().code() == Code::kInvalidData) {
          source.Distrust(BlameForDecode(block, data.status(), checks, check, described));
        }
        return data.status();
      }
      out->push_back(std::move(data).value());
      served_by.push_back(block.served_by);
    }
    first += count;
  }
  if (check != nullptr && *check && out->size() > start) {
    size_t wrong = SIZE_MAX;
    Status st = (*check)(std::span<const BlockData>(*out).subspan(start), &wrong);
    if (!st.ok()) {
      if (st.code() == Code::kInvalidData) {
        // The endpoints that served the wrong block, not the ones that answered last (issue 35):
        // a part of several batches can have each from another endpoint.
        uint64_t blamed = 0;
        if (wrong < served_by.size()) {
          blamed = served_by[wrong];
        } else {
          for (uint64_t s : served_by) blamed |= s;
        }
        if (blamed != 0) {
          st = Status(st.code(), fmt::format("{} (served by {})", st.message(),
                                             source.DescribeServers(blamed)))
                   .WithReason(st.reason());
        }
        source.Distrust(blamed);
      }
      return st;
    }
  }
  if (held != nullptr) {
    *held = Datasets();
    if (traced) held->Add(kTracesDataset);
  }
  if (enrich == nullptr || out->size() == start) return Status::Ok();
  JsonRpcClient* rpc = source.rpc();
  if (rpc == nullptr) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      spdlog::warn(
          "{} has no JSON-RPC node behind it: contracts created without traces are stored without "
          "their code, and tokens without their metadata (give the Kafka source --rpc)",
          described);
    }
    return Status::Ok();
  }
  if (limiter != nullptr) GAPLESS_RETURN_IF_ERROR(limiter->Acquire());
  std::vector<BlockData> range(std::make_move_iterator(out->begin() + static_cast<long>(start)),
                               std::make_move_iterator(out->end()));
  Status st = EnrichRange(*rpc, *enrich, &range);
  std::move(range.begin(), range.end(), out->begin() + static_cast<long>(start));
  if (!st.ok() && limiter != nullptr && IsRateLimited(st)) limiter->SlowDown();
  if (st.ok() && held != nullptr && enrich->token_metadata) held->Add(kTokenMetadataDataset);
  return st.WithContext(fmt::format("blocks {}..{}", from, to));
}

}  // namespace gapless

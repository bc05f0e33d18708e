#include "source/block_source.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>

#include "decode/contracts.h"
#include "decode/decode.h"
#include "decode/traces.h"

namespace gapless {

uint64_t RawBlockBytes(const RawBlock& block) {
  return block.block_json.size() + block.receipts_json.size() + block.traces_json.size() +
         block.hash.size();
}

void HeldBlockSource::Put(RawBlock block) {
  bytes_ += RawBlockBytes(block);
  auto [it, added] = blocks_.try_emplace(block.number);
  if (!added) bytes_ -= RawBlockBytes(it->second);
  it->second = std::move(block);
}

void HeldBlockSource::Drop(uint64_t number) {
  auto it = blocks_.find(number);
  if (it == blocks_.end()) return;
  bytes_ -= RawBlockBytes(it->second);
  blocks_.erase(it);
}

Result<std::vector<RawBlock>> HeldBlockSource::Fetch(uint64_t first, uint64_t count) {
  std::vector<RawBlock> out;
  out.reserve(count);
  for (uint64_t n = first; n < first + count;) {
    auto it = blocks_.find(n);
    if (it != blocks_.end()) {
      RawBlock copy = it->second;
      // DecodeBlock parses in place when the string has simdjson's padding to spare.
      copy.block_json.reserve(copy.block_json.size() + 64);
      copy.receipts_json.reserve(copy.receipts_json.size() + 64);
      out.push_back(std::move(copy));
      ++n;
      continue;
    }
    uint64_t end = n;  // the run of missing blocks [n, end)
    while (end < first + count && blocks_.count(end) == 0) ++end;
    if (fallback_ == nullptr) {
      return NotFound(fmt::format("block {} was not received from {}", n, description_));
    }
    GAPLESS_ASSIGN_OR_RETURN(std::vector<RawBlock> fetched, fallback_->Fetch(n, end - n));
    for (RawBlock& b : fetched) out.push_back(std::move(b));
    n = end;
  }
  return out;
}

Result<BlockData> DecodeRawBlock(RawBlock& block, const BlockChecks& checks,
                                 const std::string& source) {
  DecodeOptions options;
  options.expected_number = block.number;
  options.expected_chain_id = checks.chain_id;
  Result<BlockData> data = DecodeBlock(block.block_json, block.receipts_json, options);
  if (!data.ok()) return data.status().WithContext("from " + source);
  if (block.traces_api != RawBlock::TraceApi::kNone) {
    std::vector<std::string> hashes;
    hashes.reserve(data->transactions.size());
    for (const Transaction& tx : data->transactions) hashes.push_back(tx.hash);
    Result<std::vector<Trace>> traces =
        block.traces_api == RawBlock::TraceApi::kTraceBlock
            ? DecodeParityTraces(block.traces_json, block.number, data->block.hash)
            : DecodeGethTraces(block.traces_json, block.number, hashes);
    auto traces_error = [&](const Status& st) {
      Status out = st.WithContext("from " + source);
      return st.code() == Code::kInvalidData ? out.WithReason(std::string(kTracesDisagreeReason))
                                             : out;
    };
    if (!traces.ok()) return traces_error(traces.status());
    data->traces = std::move(traces).value();
    Status agrees = CheckTracesAgainstBlock(*data);
    if (!agrees.ok()) return traces_error(agrees);
  }
  data->contracts = DeriveContracts(*data);
  if (checks.verify.has_value()) {
    Status verified = VerifyBlock(*data, *checks.verify);
    if (verified.code() == Code::kFailedPrecondition) {
      // Not Ethereum's rules (an OP deposit, an Arbitrum system transaction): stored unverified.
      static std::atomic<bool> logged{false};
      if (!logged.exchange(true)) {
        spdlog::warn("{}; blocks like it are stored without verification (docs/verify.md)",
                     verified.ToString());
      }
    } else if (!verified.ok()) {
      return verified.WithContext("from " + source);
    }
  }
  return data;
}

}  // namespace gapless

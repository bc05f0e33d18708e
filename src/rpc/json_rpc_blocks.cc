// JsonRpcClient::FetchBlocks (json_rpc.h): blocks with their receipts in one batch of
// eth_getBlockByNumber + eth_getBlockReceipts, or, on a node without eth_getBlockReceipts, a second
// batch of eth_getTransactionReceipt per transaction assembled in transaction order; each block
// records the endpoints that served its answers (RawBlock::served_by). Traces, when on, are
// fetched by FetchTraces (json_rpc_traces.cc).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rpc/json_rpc.h"
#include "rpc/json_rpc_wire.h"

namespace gapless {

using json_rpc_wire::BlockSummary;
using json_rpc_wire::IsNullJson;
using json_rpc_wire::kPadding;
using json_rpc_wire::ScanBlock;

void JsonRpcClient::HealFallbacks() {
  const int64_t now = options_.env->NowMicros();
  if (!block_receipts_supported_ && now >= block_receipts_again_at_) {
    block_receipts_supported_ = true;
  }
  if (trace_api_ == RawBlock::TraceApi::kDebugTrace && now >= trace_block_again_at_) {
    trace_api_ = RawBlock::TraceApi::kTraceBlock;
  }
  if (!debug_trace_by_hash_ && now >= by_hash_again_at_) debug_trace_by_hash_ = true;
}

Result<std::vector<RawBlock>> JsonRpcClient::FetchBlocks(uint64_t first, uint64_t count) {
  std::vector<RawBlock> blocks;
  if (count == 0) return blocks;
  if (first + count < first) {
    return Internal(fmt::format("FetchBlocks({}, {}): range overflows", first, count));
  }
  const std::string range = count == 1 ? fmt::format("block {}", first)
                                       : fmt::format("blocks {}..{}", first, first + count - 1);
  HealFallbacks();
  const bool with_receipts = block_receipts_supported_;
  std::vector<RpcRequest> calls;
  calls.reserve(with_receipts ? 2 * count : count);
  for (uint64_t n = first; n < first + count; ++n) {
    const std::string hex = HexQuantity(n);
    calls.push_back({"eth_getBlockByNumber", fmt::format(R"(["{}",true])", hex)});
    if (with_receipts) calls.push_back({"eth_getBlockReceipts", fmt::format(R"(["{}"])", hex)});
  }
  std::vector<uint64_t> served_by;
  Result<std::vector<Result<std::string>>> batch = Batch(calls, true, &served_by);
  if (!batch.ok()) return batch.status().WithContext(range);

  const size_t stride = with_receipts ? 2 : 1;
  blocks.resize(count);
  std::vector<BlockSummary> summaries(count);
  bool fallback = !with_receipts;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t n = first + i;
    const std::string context = fmt::format("block {}", n);
    RawBlock& block = blocks[i];
    block.number = n;
    Result<std::string>& b = (*batch)[i * stride];
    if (!b.ok()) return b.status().WithContext(context);
    if (IsNullJson(*b)) {
      return NotFound(
          fmt::format("block {} not found: eth_getBlockByNumber returned null from {} "
                      "(above the node's head?)",
                      n, Describe()));
    }
    block.block_json = std::move(*b);
    block.served_by |= served_by[i * stride];
    if (!with_receipts) continue;
    Result<std::string>& r = (*batch)[i * stride + 1];
    if (!r.ok()) {
      if (RpcErrorCode(r.status()) == -32601) {
        fallback = true;
        continue;
      }
      return r.status().WithContext(context);
    }
    if (IsNullJson(*r)) {
      return NotFound(
          fmt::format("block {}: eth_getBlockReceipts returned null from {} (receipts "
                      "not available yet?)",
                      n, Describe()));
    }
    block.receipts_json = std::move(*r);
    block.served_by |= served_by[i * stride + 1];
  }
  if (fallback) {
    if (with_receipts) BlockReceiptsMissing();
    // Receipts by hash for every block still without them, in one batch. Only here is the
    // block read (for its transaction hashes); every other check is the decoder's.
    std::vector<uint64_t> numbers(count);
    std::vector<uint8_t> want(count, 0);
    std::vector<std::vector<std::string>> tx_hashes(count);
    std::vector<std::string> receipts(count);
    std::vector<uint64_t> receipts_served_by(count, 0);
    for (uint64_t i = 0; i < count; ++i) {
      numbers[i] = blocks[i].number;
      want[i] = blocks[i].receipts_json.empty() ? 1 : 0;
      if (!want[i]) continue;
      Status st = ScanBlock(parser_->parser, blocks[i].block_json, &summaries[i]);
      if (!st.ok()) return st.WithContext(fmt::format("block {}", blocks[i].number));
      tx_hashes[i] = std::move(summaries[i].tx_hashes);
    }
    GAPLESS_RETURN_IF_ERROR(ReceiptsByHash(numbers, want, tx_hashes, &receipts, &receipts_served_by)
                                .WithContext(range + " receipts"));
    for (uint64_t i = 0; i < count; ++i) {
      if (!want[i]) continue;
      blocks[i].receipts_json = std::move(receipts[i]);
      blocks[i].served_by |= receipts_served_by[i];
    }
  }
  if (options_.traces) GAPLESS_RETURN_IF_ERROR(FetchTraces(blocks));
  return blocks;
}

void JsonRpcClient::BlockReceiptsMissing() {
  block_receipts_supported_ = false;
  block_receipts_again_at_ = options_.env->NowMicros() + options_.missing_method_retry_micros;
  spdlog::info(
      "{} does not serve eth_getBlockReceipts; fetching receipts one transaction at "
      "a time (asked again in {:.0f} s)",
      Describe(), static_cast<double>(options_.missing_method_retry_micros) / 1e6);
}

Status JsonRpcClient::ReceiptsByHash(std::span<const uint64_t> numbers,
                                     std::span<const uint8_t> want,
                                     const std::vector<std::vector<std::string>>& tx_hashes,
                                     std::vector<std::string>* receipts,
                                     std::vector<uint64_t>* served_by) {
  std::vector<RpcRequest> calls;
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (!want[i]) continue;
    for (const std::string& hash : tx_hashes[i]) {
      calls.push_back({"eth_getTransactionReceipt", fmt::format(R"(["{}"])", hash)});
    }
  }
  std::vector<uint64_t> calls_served_by;
  Result<std::vector<Result<std::string>>> answers = Batch(calls, true, &calls_served_by);
  if (!answers.ok()) return answers.status();
  size_t next = 0;
  for (size_t i = 0; i < numbers.size(); ++i) {
    if (!want[i]) continue;
    const std::vector<std::string>& hashes = tx_hashes[i];
    std::string& out = (*receipts)[i];
    size_t total = 2;
    for (size_t k = 0; k < hashes.size(); ++k) {
      if ((*answers)[next + k].ok()) total += (*answers)[next + k]->size() + 1;
    }
    out.clear();
    out.reserve(total + kPadding);
    out.push_back('[');
    for (size_t k = 0; k < hashes.size(); ++k, ++next) {
      Result<std::string>& r = (*answers)[next];
      if (!r.ok()) {
        return r.status().WithContext(
            fmt::format("block {} transaction {}", numbers[i], hashes[k]));
      }
      if (IsNullJson(*r)) {
        return InvalidData(fmt::format(
            "block {}: eth_getTransactionReceipt({}) returned null from {}: the node does not "
            "know the block's transaction (re-org, or a node without the tx index?)",
            numbers[i], hashes[k], Describe()));
      }
      if (k > 0) out.push_back(',');
      out.append(*r);
      (*served_by)[i] |= calls_served_by[next];
    }
    out.push_back(']');
  }
  return Status::Ok();
}

Result<std::vector<std::string>> JsonRpcClient::FetchBlockReceipts(
    std::span<const uint64_t> numbers, std::vector<uint64_t>* served_by) {
  const size_t count = numbers.size();
  std::vector<std::string> receipts(count);
  std::vector<uint64_t> by(count, 0);
  if (count == 0) {
    if (served_by != nullptr) served_by->clear();
    return receipts;
  }
  HealFallbacks();
  std::vector<uint8_t> want(count, 1);  // still without receipts
  bool fallback = !block_receipts_supported_;
  if (!fallback) {
    std::vector<RpcRequest> calls;
    for (uint64_t n : numbers) {
      calls.push_back({"eth_getBlockReceipts", fmt::format(R"(["{}"])", HexQuantity(n))});
    }
    std::vector<uint64_t> calls_served_by;
    GAPLESS_ASSIGN_OR_RETURN(auto answers, Batch(calls, true, &calls_served_by));
    for (size_t i = 0; i < count; ++i) {
      Result<std::string>& r = answers[i];
      if (!r.ok()) {
        if (RpcErrorCode(r.status()) == -32601) {
          fallback = true;
          continue;
        }
        return r.status().WithContext(fmt::format("block {}", numbers[i]));
      }
      if (IsNullJson(*r)) {
        return NotFound(
            fmt::format("block {}: eth_getBlockReceipts returned null from {} (receipts "
                        "not available yet?)",
                        numbers[i], Describe()));
      }
      receipts[i] = std::move(*r);
      by[i] = calls_served_by[i];
      want[i] = 0;
    }
    if (fallback) BlockReceiptsMissing();
  }
  if (fallback) {
    // The transaction hashes of the blocks still without receipts, then their receipts.
    std::vector<RpcRequest> calls;
    std::vector<size_t> asked;
    for (size_t i = 0; i < count; ++i) {
      if (!want[i]) continue;
      calls.push_back(
          {"eth_getBlockByNumber", fmt::format(R"(["{}",false])", HexQuantity(numbers[i]))});
      asked.push_back(i);
    }
    std::vector<uint64_t> calls_served_by;
    GAPLESS_ASSIGN_OR_RETURN(auto answers, Batch(calls, true, &calls_served_by));
    std::vector<std::vector<std::string>> tx_hashes(count);
    for (size_t k = 0; k < asked.size(); ++k) {
      const size_t i = asked[k];
      Result<std::string>& b = answers[k];
      if (!b.ok()) return b.status().WithContext(fmt::format("block {}", numbers[i]));
      if (IsNullJson(*b)) {
        return NotFound(
            fmt::format("block {} not found: eth_getBlockByNumber returned null from {}",
                        numbers[i], Describe()));
      }
      BlockSummary summary;
      Status st = ScanBlock(parser_->parser, *b, &summary);
      if (!st.ok()) return st.WithContext(fmt::format("block {}", numbers[i]));
      tx_hashes[i] = std::move(summary.tx_hashes);
      by[i] |= calls_served_by[k];
    }
    GAPLESS_RETURN_IF_ERROR(ReceiptsByHash(numbers, want, tx_hashes, &receipts, &by));
  }
  if (served_by != nullptr) *served_by = std::move(by);
  return receipts;
}

}  // namespace gapless

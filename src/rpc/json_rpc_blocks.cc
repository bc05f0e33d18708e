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
    if (with_receipts) {
      block_receipts_supported_ = false;
      block_receipts_again_at_ = options_.env->NowMicros() + options_.missing_method_retry_micros;
      spdlog::info(
          "{} does not serve eth_getBlockReceipts; fetching receipts one transaction at "
          "a time (asked again in {:.0f} s)",
          Describe(), static_cast<double>(options_.missing_method_retry_micros) / 1e6);
    }
    // Receipts by hash for every block still without them, in one batch. Only here is the
    // block read (for its transaction hashes); every other check is the decoder's.
    std::vector<RpcRequest> receipt_calls;
    for (uint64_t i = 0; i < count; ++i) {
      if (!blocks[i].receipts_json.empty()) continue;
      Status st = ScanBlock(parser_->parser, blocks[i].block_json, &summaries[i]);
      if (!st.ok()) return st.WithContext(fmt::format("block {}", blocks[i].number));
      for (const std::string& hash : summaries[i].tx_hashes) {
        receipt_calls.push_back({"eth_getTransactionReceipt", fmt::format(R"(["{}"])", hash)});
      }
    }
    std::vector<uint64_t> receipts_served_by;
    Result<std::vector<Result<std::string>>> receipts =
        Batch(receipt_calls, true, &receipts_served_by);
    if (!receipts.ok()) return receipts.status().WithContext(range + " receipts");
    size_t next = 0;
    for (uint64_t i = 0; i < count; ++i) {
      RawBlock& block = blocks[i];
      if (!block.receipts_json.empty()) continue;
      const std::vector<std::string>& hashes = summaries[i].tx_hashes;
      size_t total = 2;
      for (size_t k = 0; k < hashes.size(); ++k) {
        if ((*receipts)[next + k].ok()) total += (*receipts)[next + k]->size() + 1;
      }
      block.receipts_json.reserve(total + kPadding);
      block.receipts_json.push_back('[');
      for (size_t k = 0; k < hashes.size(); ++k, ++next) {
        Result<std::string>& r = (*receipts)[next];
        if (!r.ok()) {
          return r.status().WithContext(
              fmt::format("block {} transaction {}", block.number, hashes[k]));
        }
        if (IsNullJson(*r)) {
          return InvalidData(fmt::format(
              "block {}: eth_getTransactionReceipt({}) returned null from {}: the node does not "
              "know the block's transaction (re-org, or a node without the tx index?)",
              block.number, hashes[k], Describe()));
        }
        if (k > 0) block.receipts_json.push_back(',');
        block.receipts_json.append(*r);
        block.served_by |= receipts_served_by[next];
      }
      block.receipts_json.push_back(']');
    }
  }
  if (options_.traces) GAPLESS_RETURN_IF_ERROR(FetchTraces(blocks));
  return blocks;
}

}  // namespace gapless

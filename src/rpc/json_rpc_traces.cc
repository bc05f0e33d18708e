// JsonRpcClient::FetchTraces (json_rpc.h, --traces): every block's traces in one batch of
// trace_block(n); on "method not found" the client switches, for good, to
// debug_traceBlockByHash(hash, callTracer), then to debug_traceBlockByNumber, and asks again.
// Each block records the API that answered (RawBlock::traces_api) and the endpoints that served
// it (RawBlock::served_by).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rpc/json_rpc.h"
#include "rpc/json_rpc_wire.h"

namespace gapless {

using json_rpc_wire::BlockSummary;
using json_rpc_wire::IsHexData;
using json_rpc_wire::kPadding;
using json_rpc_wire::ScanBlock;

Status JsonRpcClient::FetchTraces(std::vector<RawBlock>& blocks) {
  if (blocks.empty()) return Status::Ok();
  HealFallbacks();
  // The debug API is asked by the block's hash, so its answer is of this very block or an error
  // (another endpoint, or the node after a re-org, may hold another block at this height).
  // trace_block takes a number only; every trace of its answer states its blockHash, which the
  // decoder checks (decode/traces.h DecodeParityTraces).
  std::vector<std::string> hashes;
  for (int round = 0; round < 3; ++round) {
    const RawBlock::TraceApi api = trace_api_;
    const bool by_hash = api == RawBlock::TraceApi::kDebugTrace && debug_trace_by_hash_;
    if (by_hash && hashes.empty()) {
      for (RawBlock& b : blocks) {
        BlockSummary summary;
        Status st = ScanBlock(parser_->parser, b.block_json, &summary);
        if (!st.ok()) return st.WithContext(fmt::format("block {}", b.number));
        if (!IsHexData(summary.hash)) {
          return InvalidData(fmt::format("block {}: eth_getBlockByNumber: no \"hash\" from {}",
                                         b.number, Describe()));
        }
        hashes.push_back(std::move(summary.hash));
      }
    }
    std::vector<RpcRequest> calls;
    calls.reserve(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      const std::string hex = HexQuantity(blocks[i].number);
      if (api == RawBlock::TraceApi::kTraceBlock) {
        calls.push_back({"trace_block", fmt::format(R"(["{}"])", hex)});
      } else if (by_hash) {
        calls.push_back({"debug_traceBlockByHash",
                         fmt::format(R"(["{}",{{"tracer":"callTracer"}}])", hashes[i])});
      } else {
        calls.push_back(
            {"debug_traceBlockByNumber", fmt::format(R"(["{}",{{"tracer":"callTracer"}}])", hex)});
      }
    }
    std::vector<uint64_t> served_by;
    Result<std::vector<Result<std::string>>> batch = Batch(calls, true, &served_by);
    if (!batch.ok()) {
      return batch.status().WithContext(
          fmt::format("traces of blocks {}..{}", blocks.front().number, blocks.back().number));
    }
    bool switched = false;
    for (size_t i = 0; i < blocks.size(); ++i) {
      Result<std::string>& r = (*batch)[i];
      if (!r.ok()) {
        if (RpcErrorCode(r.status()) == -32601 && api == RawBlock::TraceApi::kTraceBlock) {
          trace_api_ = RawBlock::TraceApi::kDebugTrace;
          trace_block_again_at_ = options_.env->NowMicros() + options_.missing_method_retry_micros;
          spdlog::info(
              "{} does not serve trace_block; tracing with debug_traceBlockByHash "
              "(callTracer)",
              Describe());
          switched = true;
          break;
        }
        if (RpcErrorCode(r.status()) == -32601 && by_hash) {
          debug_trace_by_hash_ = false;
          by_hash_again_at_ = options_.env->NowMicros() + options_.missing_method_retry_micros;
          spdlog::info(
              "{} does not serve debug_traceBlockByHash; tracing with debug_traceBlockByNumber "
              "(each transaction's trace checked against the block's)",
              Describe());
          switched = true;
          break;
        }
        if (RpcErrorCode(r.status()) == -32601) {
          return FailedPrecondition(fmt::format(
              "block {}: the node at {} serves neither trace_block nor debug_traceBlockByNumber: "
              "--traces needs a node with a tracing API (an archive node for old blocks)",
              blocks[i].number, Describe()));
        }
        return r.status().WithContext(fmt::format("block {} traces", blocks[i].number));
      }
      blocks[i].traces_api = api;
      blocks[i].traces_json = std::move(*r);
      blocks[i].traces_json.reserve(blocks[i].traces_json.size() + kPadding);
      blocks[i].traces_served_by = served_by[i];
    }
    if (!switched) return Status::Ok();
  }
  return Internal("FetchTraces: no tracing API left");
}

}  // namespace gapless

// The contracts mode's `events` data mode: a range's matching logs and the headers of the blocks
// holding them (range_job.h FetchEventsRange); with --verify-complete every block's header, and
// the proof that nothing was left out (events_complete.h).
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "decode/decode.h"
#include "node/events_complete.h"
#include "node/range_job.h"
#include "verify/verify.h"

namespace gapless {
Status FetchEventsRange(BlockSource& source, const EventsFetch& fetch, uint64_t from, uint64_t to,
                        uint32_t headers_per_request, const BlockChecks& checks,
                        RateLimiter* limiter, const std::atomic<bool>* stop,
                        std::vector<BlockData>* out, const RangeCheck* check) {
  if (from > to) return Internal("FetchEventsRange: from above to");
  JsonRpcClient* rpc = source.rpc();
  if (rpc == nullptr) {
    return FailedPrecondition("--data events needs a JSON-RPC node (--rpc): " + source.Describe() +
                              " answers no eth_getLogs");
  }
  if (!source.rate_limited()) limiter = nullptr;
  if (stop != nullptr && stop->load()) return Interrupted();
  if (limiter != nullptr) GAPLESS_RETURN_IF_ERROR(limiter->Acquire());
  Result<std::vector<LogsChunk>> answered = rpc->GetLogs(fetch.filter, from, to);
  if (!answered.ok() && !answered.status().retriable()) {
    // A range above the node's head is refused in the node's own words (anvil: "block height is
    // 31 but requested was 35", -32602), not answered empty: a node that lags, or whose chain
    // went back (a re-org to a shorter fork), has not reached it yet. Asked, not read from the
    // message: such a refusal is NotFound (retried), as a missing header is.
    Result<uint64_t> head = rpc->BlockNumber();
    if (head.ok() && *head < to) {
      return NotFound(
          fmt::format("eth_getLogs {}-{}: the node is at block {}, below the range's "
                      "end (it answered: {})",
                      from, to, *head, answered.status().message()));
    }
    // The node may have passed the range since it refused it (a chain mined again after going
    // back): asked once more; a refusal of a range the node has is kept.
    if (head.ok()) answered = rpc->GetLogs(fetch.filter, from, to);
  }
  GAPLESS_ASSIGN_OR_RETURN(std::vector<LogsChunk> chunks, std::move(answered));
  std::vector<Log> logs;
  uint64_t logs_served_by = 0;
  for (const LogsChunk& chunk : chunks) {
    logs_served_by |= chunk.served_by;
    Result<std::vector<Log>> part = DecodeLogsResult(chunk.logs_json);
    if (!part.ok()) {
      if (part.status().code() == Code::kInvalidData) source.Distrust(chunk.served_by);
      return part.status().WithContext(fmt::format("eth_getLogs {}-{} from {}", chunk.from,
                                                   chunk.to,
                                                   source.DescribeServers(chunk.served_by)));
    }
    for (Log& log : *part) logs.push_back(std::move(log));
  }

  // The blocks holding them, in order, with their logs.
  std::map<uint64_t, std::vector<Log>> by_block;
  for (Log& log : logs) {
    if (log.block_number < from || log.block_number > to) {
      return InvalidData(fmt::format("eth_getLogs for blocks {}-{} answered a log of block {}",
                                     from, to, log.block_number));
    }
    by_block[log.block_number].push_back(std::move(log));
  }
  const size_t start = out->size();
  std::vector<uint64_t> numbers;
  // --verify-complete: every block's header (its bloom says whether its receipts are needed).
  std::vector<Block> headers;
  if (fetch.verify_complete) {
    for (uint64_t n = from; n <= to; ++n) numbers.push_back(n);
  } else {
    for (const auto& [number, unused] : by_block) numbers.push_back(number);
  }
  // The range's last block is asked too, logs or not: a node (or a pool's backend) behind `to`
  // may answer eth_getLogs with nothing rather than an error, and its missing header (NotFound,
  // retried) is what tells an empty stretch from one the node has not reached.
  const bool last_has_logs = by_block.count(to) != 0;
  if (!last_has_logs && !fetch.verify_complete) numbers.push_back(to);
  const size_t per_request = std::max<uint32_t>(1, headers_per_request);
  for (size_t i = 0; i < numbers.size(); i += per_request) {
    if (stop != nullptr && stop->load()) return Interrupted();
    std::vector<RpcRequest> calls;
    for (size_t j = i; j < std::min(numbers.size(), i + per_request); ++j) {
      calls.push_back({"eth_getBlockByNumber", fmt::format(R"(["0x{:x}",false])", numbers[j])});
    }
    if (limiter != nullptr) GAPLESS_RETURN_IF_ERROR(limiter->Acquire());
    GAPLESS_ASSIGN_OR_RETURN(auto answers, rpc->Batch(calls));
    for (size_t k = 0; k < answers.size(); ++k) {
      const uint64_t number = numbers[i + k];
      if (!answers[k].ok()) return answers[k].status().WithContext(fmt::format("block {}", number));
      GAPLESS_ASSIGN_OR_RETURN(Block header, DecodeBlockHeader(*answers[k], number));
      if (fetch.verify_complete) headers.push_back(header);
      if (by_block.count(number) == 0) continue;  // asked only to see the node has it, or its bloom
      BlockData data;
      data.logs = std::move(by_block[number]);
      for (const Log& log : data.logs) {
        // The logs and the header were asked apart: the chain may have re-orged between them.
        if (log.block_hash != header.hash) {
          return InvalidData(fmt::format(
              "block {}: log {} is of block hash {}, the header's is {} (a re-org between the "
              "two requests)",
              number, log.log_index, log.block_hash, header.hash));
        }
      }
      if (checks.verify.has_value()) {
        // --verify in events mode: every stored log's address and topics are in the block's
        // logsBloom (a log the header's bloom does not admit cannot be the block's).
        GAPLESS_ASSIGN_OR_RETURN(std::string bloom, ComputeLogsBloom(data.logs));
        if (!BloomContains(header.logs_bloom, bloom)) {
          return InvalidData(fmt::format(
              "block {}: logsBloom of the header does not admit the logs eth_getLogs gave (verify)",
              number));
        }
      }
      data.block = std::move(header);
      out->push_back(std::move(data));
    }
  }
  if (fetch.verify_complete) {
    GAPLESS_RETURN_IF_ERROR(CheckEventsComplete(
        source, fetch.filter, headers, std::span<const BlockData>(*out).subspan(start),
        logs_served_by, headers_per_request, limiter, stop));
  }
  if (check != nullptr && *check && out->size() > start) {
    size_t wrong = SIZE_MAX;
    GAPLESS_RETURN_IF_ERROR((*check)(std::span<const BlockData>(*out).subspan(start), &wrong));
  }
  return Status::Ok();
}

}  // namespace gapless

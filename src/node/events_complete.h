// events_complete: the events mode's --verify-complete (docs/contracts.md): the proof that an
// eth_getLogs answer left none of a range's matching logs out, which --verify's bloom check
// (every stored log is in its block's logsBloom) cannot give.
//
// For every block of the range, the header (fetched by FetchEventsRange) is hashed
// (keccak(RLP(header)) must be its hash, so its logsBloom and receiptsRoot are the ones the hash
// stands for) and its logsBloom tested against the filter: an address of the filter (any when it
// has none) and, when the filter has topic0s, one of them. A bloom has no false negatives: a
// block whose bloom excludes the filter holds no matching log and needs nothing more. Every other
// block (and any block eth_getLogs gave logs for) has its receipts fetched
// (eth_getBlockReceipts, in batches; JsonRpcClient::FetchBlockReceipts), proven against the
// header's receiptsRoot (verify/ ComputeReceiptsRoot, the trie full mode's --verify builds), and
// the logs of those receipts that match the filter must be exactly eth_getLogs's for that block:
// the same log indexes, each with the same address, topics, data, transaction hash and index.
//
// Errors: InvalidData with reason kEventsIncompleteReason naming the block and the log missing,
// extra or different (the endpoints that answered eth_getLogs are distrusted: a pool's retry asks
// others); InvalidData with reason kVerifyMismatchReason (verify/verify.h) when a header's hash or
// the receipts' root does not hold; the node's errors as JsonRpcClient gives them (a null
// receipts answer is NotFound, retried). All name the block. A node without eth_getBlockReceipts
// is asked per transaction (JsonRpcClient::FetchBlockReceipts). A header or receipt Ethereum's
// rules do not cover (verify's FailedPrecondition: OP deposits, a header without mixHash) is not
// proven but still compared, logged once per process.
//
// Thread-safety: as FetchEventsRange's (the source from the calling thread); the counters it
// adds to (node/node_metrics.h CountCompletenessCheck) are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "coord/rate_limiter.h"
#include "core/model.h"
#include "core/status.h"
#include "rpc/json_rpc.h"
#include "source/block_source.h"

namespace gapless {

// Status::reason() of a range whose eth_getLogs answer is not what the proven receipts hold.
inline constexpr std::string_view kEventsIncompleteReason = "verify:events-incomplete";

// Checks the range whose every header (from..to, ascending) is `headers` against `stored`, the
// blocks FetchEventsRange keeps (those eth_getLogs gave logs for, with those logs; ascending).
// logs_served_by: the endpoints that answered the range's eth_getLogs (LogsChunk::served_by,
// or-ed), distrusted on a mismatch. Receipts are asked per_request blocks a batch, the limiter
// (nullable) asked before each. Interrupted() when *stop becomes true between batches.
Status CheckEventsComplete(BlockSource& source, const LogFilter& filter,
                           std::span<const Block> headers, std::span<const BlockData> stored,
                           uint64_t logs_served_by, uint32_t per_request, RateLimiter* limiter,
                           const std::atomic<bool>* stop);

}  // namespace gapless

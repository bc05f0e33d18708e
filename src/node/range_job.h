// range_job: the unit of work shared by the single-process Indexer, the fleet Worker and the Kafka
// worker: fetch the blocks of one range (with their receipts) from a block source
// (source/block_source.h: a JSON-RPC node, blocks received from Kafka) and decode them.
//
// Nothing is written here: the caller commits the decoded blocks (store/writer.h), so a range is
// fetched and decoded whole or not at all, and a failure leaves nothing behind to clean up.
//
// Rate limiting: when a limiter is given, every JSON-RPC batch round trip first takes one
// admission from the fleet-wide window (RateLimiter::Acquire, which waits rather than fails). A
// rate limit that survives the client's own retries (IsRateLimited: an HTTP 429 or a JSON-RPC
// rate-limit error, told by the status's typed reason) calls limiter->SlowDown() before the
// failure is returned, so the whole process backs off.
//
// Thread-safety: the source is used from the calling thread only (RPC clients are not
// thread-safe); the limiter is thread-safe and may be shared.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "coord/rate_limiter.h"
#include "core/model.h"
#include "core/status.h"
#include "node/enrich.h"
#include "node/memory_budget.h"
#include "rpc/json_rpc.h"
#include "source/block_source.h"
#include "store/datasets.h"

namespace gapless {

// Status::reason() of the Aborted returned by work that was asked to stop before it was done
// (FetchAndDecodeRange's *stop, Indexer::Stop() after a signal). Nothing failed: the caller
// decides whether that is the normal end of the process (`gapless index` exits 130). Callers
// compare the reason (IsInterrupted), never the message, which is for people.
inline constexpr std::string_view kInterruptedReason = "interrupted";

// Aborted("interrupted") with reason kInterruptedReason.
inline Status Interrupted() {
  return Aborted("interrupted").WithReason(std::string(kInterruptedReason));
}

// True for Interrupted(), also after WithContext; false for any other Aborted.
inline bool IsInterrupted(const Status& status) {
  return status.code() == Code::kAborted && status.reason() == kInterruptedReason;
}

// Makes one RPC client per worker thread (clients are not thread-safe).
using RpcClientFactory = std::function<std::unique_ptr<JsonRpcClient>()>;

// A check of a decoded range against what the fleet knows (node/head_tracker.h HeadLogCheck: the
// head log's hashes). A failure about one block sets *wrong to its index in `blocks`.
using RangeCheck = std::function<Status(std::span<const BlockData> blocks, size_t* wrong)>;

// Appends the decoded blocks from..to (inclusive, in order) to *out, fetching them in batches of
// blocks_per_request (>= 1) blocks from `source` and decoding each with every check
// (DecodeRawBlock: the chain id, and with checks.verify the block proven against its header). The
// limiter (nullable) is asked before each batch of a rate-limited source (an RPC node), not of
// blocks in hand.
//
// Errors (the code is the retry policy): the source's (rpc/json_rpc.h FetchBlocks for a node:
// Unavailable for transport, 429, 5xx after the client's retries; NotFound for a block above the
// node's head or not received) and the decoder's (InvalidData for a malformed or inconsistent
// block, FailedPrecondition for the wrong chain), with the block in the message; the limiter's
// Unavailable when Redis is unreachable. Interrupted() when *stop (nullable) becomes true between
// two batches. On failure *out holds a partial range: clear it before retrying.
// With `enrich` (nullable), the decoded range is completed from the node's state afterwards
// (node/enrich.h: contracts' code, token metadata) over the source's JSON-RPC client; a source
// without one (blocks from Kafka without --rpc) leaves them unread, said once per process.
// With `budget` (nullable), each batch's JSON size is reported to it (MemoryBudget::Observe); the
// caller sizes the range and the batches by it (node/memory_budget.h).
// With `check` (nullable), the decoded range is checked before it is enriched; its failure is
// returned, naming the endpoint that served the wrong block.
// A block found wrong (InvalidData from the decoder or the check) is blamed on the endpoints that
// served that very block (RawBlock::served_by, BlockSource::Distrust), not on whichever answered
// last: the retry of a pool's source then asks the others. Traces that disagree with their block
// are blamed on one side: the block's servers when the head log (`check`) refuses the block,
// else the traces' (RawBlock::traces_served_by).
// With `held` (nullable), on success: the datasets the decoded blocks hold besides the blocks
// (store/datasets.h), for RangeWrite::datasets: traces when every block came with its traces,
// token_metadata when the enrichment read the tokens (`enrich` asks for it and the source has a
// node to ask). What was fetched, not what was asked: the record never claims more.
Status FetchAndDecodeRange(BlockSource& source, uint64_t from, uint64_t to,
                           uint32_t blocks_per_request, const BlockChecks& checks,
                           RateLimiter* limiter, const std::atomic<bool>* stop,
                           std::vector<BlockData>* out, const EnrichOptions* enrich = nullptr,
                           MemoryBudget* budget = nullptr, const RangeCheck* check = nullptr,
                           Datasets* held = nullptr);

// What the `events` data mode fetches: the logs matching `filter`, and with verify_complete
// (--verify-complete) the proof that none was left out (node/events_complete.h).
struct EventsFetch {
  LogFilter filter;
  bool verify_complete = false;
};

// The contracts mode's `events` data mode (docs/contracts.md): appends the blocks of from..to that
// hold a log matching `filter`, each with its header (eth_getBlockByNumber(n, false), in batches
// of headers_per_request) and those logs only, ascending, to *out: a sparse range
// (store/writer.h RangeWrite::sparse). The logs come from the source's node (rpc/json_rpc.h
// GetLogs: sized per endpoint by the provider's limits). A log whose block hash is not its
// header's (a re-org between the two requests) is InvalidData, so the range is fetched again.
// Block `to`'s header is asked even without logs: a node that has not reached it answers null
// (NotFound, retried) instead of passing an empty stretch off as one without logs (a pool's
// getLogs and header requests may still reach two backends: a residual risk, docs/contracts.md).
// With checks.verify, each block's logsBloom must admit its logs. With fetch.verify_complete,
// the headers of every block of the range are asked (not only those with logs) and the range is
// proven complete (node/events_complete.h CheckEventsComplete: the receipts of the blocks whose
// bloom admits the filter, proven against their receiptsRoot; InvalidData with reason
// kEventsIncompleteReason naming the block when eth_getLogs left a log out or added one).
// `check` as for FetchAndDecodeRange. The limiter is asked before the logs and before each batch
// of headers (and of receipts).
Status FetchEventsRange(BlockSource& source, const EventsFetch& fetch, uint64_t from, uint64_t to,
                        uint32_t headers_per_request, const BlockChecks& checks,
                        RateLimiter* limiter, const std::atomic<bool>* stop,
                        std::vector<BlockData>* out, const RangeCheck* check = nullptr);

// A factory of RpcBlockSources over the clients `make_client` makes.
BlockSourceFactory RpcBlockSources(RpcClientFactory make_client);

// True for a rate-limited answer: Unavailable with reason HttpStatusReason(429) or
// kRpcRateLimitedReason (rpc/json_rpc.h). Decided on the reason, never on the message, which
// may mention "429" for other reasons ("blocks 14290..14299").
bool IsRateLimited(const Status& status);

}  // namespace gapless

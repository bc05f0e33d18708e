// JsonRpcClient: Ethereum JSON-RPC over an HttpTransport, with the retry policy and the error
// classification the rest of gapless relies on, plus the typed calls the indexer needs (chain id,
// head, block tags, blocks with their receipts, the logs of a block range).
//
// Results are the raw JSON text of the answer's "result" (e.g. "null", "\"0x1\"", an object),
// cut out of the HTTP body without re-serialising, in strings with at least 64 bytes of spare
// capacity so simdjson can parse them in place (padded_string_view over data/size/capacity).
//
// Errors carry the retry policy (core/status.h). Every message names the method (and the block
// when known) and the endpoint:
//   transport failure, HTTP 429, HTTP 5xx, HTTP 408    Unavailable; the client retries these itself
//                                                       up to max_attempts, sleeping Retry-After
//                                                       when the server sent one, else backoff
//   other HTTP 4xx (401 bad key, 403, 404 bad path)     FailedPrecondition (stop: fix the config)
//   JSON-RPC error -32601 / -32602                      FailedPrecondition
//   JSON-RPC error -32000..-32099 (incl. -32005 limit    Unavailable; retried like a transport
//     exceeded), 429, or a "rate limit" message          failure
//   any other JSON-RPC error                             InvalidData
//   malformed/truncated JSON, not a JSON-RPC answer,     InvalidData (retry the unit of work a
//     id mismatch, a missing answer in a batch           bounded number of times)
// The JSON-RPC error code stays available through RpcErrorCode(status). Two typed reasons
// (Status::reason()) survive the client's retries and the context callers add, so callers decide
// on them, never on the message: HttpStatusReason(status) on every failure caused by a non-2xx
// HTTP status ("http:429", "http:503"), and kRpcRateLimitedReason on a JSON-RPC error that means
// rate limiting (-32005, 429, or a rate-limit message).
//
// Thread-safety: not thread-safe. A client owns a JSON parser and uses its transport from the
// calling thread (CurlTransport is single-threaded too): give each worker thread its own client.
// Several clients may share one thread-safe transport (ReplayTransport) through the non-owning
// constructor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/raw_block.h"
#include "core/status.h"
#include "rpc/get_logs_limits.h"
#include "rpc/http_transport.h"

namespace gapless {

struct RpcRequest {
  std::string method;              // e.g. "eth_getBlockByNumber"
  std::string params_json = "[]";  // a JSON array, sent as is, e.g. R"(["0x10",true])"
};

// Which logs GetLogs asks for. Both lists are OR-ed within, AND-ed together.
struct LogFilter {
  std::vector<std::string> addresses;  // "0x" + 40 hex digits (sent lower-case); empty: any
  std::vector<std::string> topic0s;    // "0x" + 64 hex digits (sent lower-case); empty: any
};

// One answered eth_getLogs request of GetLogs: its blocks and the answer's raw JSON array of log
// objects (decode/decode.h DecodeLogsResult reads it), padded for simdjson like every result.
struct LogsChunk {
  uint64_t from = 0;  // inclusive
  uint64_t to = 0;    // inclusive
  std::string logs_json;
  uint64_t logs = 0;  // how many log objects logs_json holds
  // The endpoint that answered (HttpResponse::served_by; 0 over one endpoint), for Distrust.
  uint64_t served_by = 0;
};

struct JsonRpcClientOptions {
  // Attempts per call for retriable (Unavailable) failures, the first included. >= 1.
  int max_attempts = 5;
  // Exponential backoff with full jitter between attempts (core/env.h BackoffMicros).
  int64_t backoff_base_micros = 250'000;
  int64_t backoff_cap_micros = 8'000'000;
  // A Retry-After longer than this is shortened to it (the caller's lease must outlive the wait).
  int64_t max_retry_after_micros = 30'000'000;
  // Batch() splits larger batches into several POSTs of at most this many calls (providers cap
  // batch sizes, commonly at 100..1000). 0 = no limit.
  size_t max_batch_size = 1000;
  // FetchBlocks also fetches every block's traces (--traces): trace_block(n), or, once the node
  // answers it with "method not found", debug_traceBlockByHash(hash, {"tracer": "callTracer"})
  // (debug_traceBlockByNumber on a node without that either).
  bool traces = false;
  // A method the node answered "method not found" (eth_getBlockReceipts, trace_block,
  // debug_traceBlockByHash: each has a fallback) is asked again after this long: providers add
  // methods, and over a pool the answer came from one endpoint (rpc/endpoint_pool.h routes by
  // method the same way, with the same interval).
  int64_t missing_method_retry_micros = 600'000'000;
  // GetLogs's range sizing over one endpoint (over an endpoint pool, PoolOptions::get_logs).
  GetLogsSizerOptions get_logs;
  // Sleeps, the clock and the RNG for jitter. Not owned; nullptr = Env::Default().
  Env* env = nullptr;
};

class JsonRpcClient {
 public:
  // Non-owning: transport must outlive the client.
  explicit JsonRpcClient(HttpTransport* transport, JsonRpcClientOptions options = {});
  explicit JsonRpcClient(std::unique_ptr<HttpTransport> transport,
                         JsonRpcClientOptions options = {});
  ~JsonRpcClient();
  JsonRpcClient(const JsonRpcClient&) = delete;
  JsonRpcClient& operator=(const JsonRpcClient&) = delete;

  // One call. Returns the raw JSON of "result". Retries Unavailable failures (transport, 429,
  // 5xx, server-side JSON-RPC errors) up to max_attempts; other failures return at once.
  Result<std::string> Call(std::string_view method, std::string_view params_json);

  // Many calls in one POST (a JSON array; split by max_batch_size, which a refusal of the batch
  // as too large lowers: see max_batch_size()). Answers are matched by id, in
  // any order. The outer Result fails when the batch as a whole failed (transport, HTTP status,
  // a malformed body, answers with unknown ids); otherwise element i answers calls[i]: a JSON-RPC
  // error or a missing answer makes that element non-ok. Elements that failed with Unavailable
  // (e.g. per-call rate limiting) are re-sent, alone, within the max_attempts budget.
  // retry_rpc_errors false: an element's JSON-RPC error is returned as is, never re-sent (calls
  // whose errors are answers, e.g. eth_call's reverts).
  // served_by (nullable): element i gets the endpoint that gave answer i, over an endpoint pool
  // (HttpResponse::served_by; 0 over one endpoint).
  Result<std::vector<Result<std::string>>> Batch(const std::vector<RpcRequest>& calls,
                                                 bool retry_rpc_errors = true,
                                                 std::vector<uint64_t>* served_by = nullptr);

  // eth_chainId, eth_blockNumber as numbers.
  Result<uint64_t> ChainId();
  Result<uint64_t> BlockNumber();

  // "latest" | "safe" | "finalized" | "earliest" | "pending" through eth_getBlockByNumber(tag,
  // false), returning the block's number; a decimal ("17000000") or hex ("0x1036640") number is
  // returned as is without a call. A node that does not know "safe"/"finalized" (pre-merge chains,
  // old clients: a JSON-RPC error or a null block) gives FailedPrecondition saying so; an unknown
  // tag gives FailedPrecondition.
  Result<uint64_t> ResolveBlockTag(std::string_view tag);

  // Blocks first..first+count-1 with their receipts, in order, in one batch of
  // eth_getBlockByNumber(n, true) + eth_getBlockReceipts(n) (several POSTs only when 2*count
  // exceeds max_batch_size). If the node answers
  // eth_getBlockReceipts with -32601 (method not found), the client remembers it and fetches
  // receipts with a second batch of eth_getTransactionReceipt(hash), one per transaction,
  // assembling the array in transaction order; it asks for eth_getBlockReceipts again after
  // missing_method_retry_micros (the tracing fallbacks the same).
  // The answers are not checked here beyond what pairing the calls needs: the block's number,
  // the receipts against the transactions and the block hash are checked by the decoder, the one
  // place every block source goes through (source/block_source.h DecodeRawBlock).
  // With traces on, a second batch fetches each block's traces (FetchTraces).
  // Over an endpoint pool each block records the endpoints that served its answers (block,
  // receipts, traces: RawBlock::served_by), so a wrong block is blamed on them (Distrust).
  // Failures: a null block is NotFound "block N not found" (above the node's head); null receipts
  // are NotFound; a null receipt in the fallback is InvalidData naming the transaction; a node
  // that serves neither tracing API is FailedPrecondition; others as for Batch, with "block N" in
  // the message.
  Result<std::vector<RawBlock>> FetchBlocks(uint64_t first, uint64_t count);

  // The receipts of each block of `numbers` (any blocks, in any order), as eth_getBlockReceipts
  // answers them (a JSON array in transaction order, padded like every result), in one batch of
  // eth_getBlockReceipts(n). On a node without it (-32601: remembered and healed as for
  // FetchBlocks), each block's transaction hashes (one batch of eth_getBlockByNumber(n, false))
  // and then one batch of eth_getTransactionReceipt(hash), assembled in transaction order.
  // Nothing is checked beyond pairing (the decoder's job: decode/decode.h DecodeBlockReceipts).
  // served_by (nullable): element i gets the endpoints that served block i's receipts.
  // Failures: null receipts (or a null block in the fallback) are NotFound; a null receipt in the
  // fallback is InvalidData naming the transaction; others as for Batch, with "block N".
  Result<std::vector<std::string>> FetchBlockReceipts(std::span<const uint64_t> numbers,
                                                      std::vector<uint64_t>* served_by = nullptr);

  // Every log of blocks [from, to] that matches filter (from <= to), in chunks that cover the
  // range once, in order, each with its logs in (block, log index) order (checked: a log outside
  // its request's range or out of order is InvalidData naming the endpoint).
  // The range is asked in eth_getLogs requests sized per endpoint (rpc/get_logs_limits.h
  // GetLogsSizer: over an endpoint pool the pool's sizer of the endpoint the request goes to,
  // through HttpTransport::PostFor; over one endpoint this client's own). Each answer grows or
  // shrinks that endpoint's width. A JSON-RPC error answer is read first as a limit
  // (ClassifyGetLogsError on its code and message, before the error table above): a limit
  // (a cap, a suggested range, too many logs, a range too large) makes the sizer give a strictly
  // narrower range from the same block, asked at once (no sleep, no attempt spent: a request is
  // never sent twice unchanged). Any other failure follows the client's retry policy (the same
  // request again after backoff, up to max_attempts, for Unavailable; at once otherwise).
  // Failures: a one-block request refused as a limit is FailedPrecondition naming the block and
  // the endpoint (that endpoint will not serve that block's logs: lower the filter's scope or use
  // another endpoint); a filter entry that is not 0x-hex of its length is FailedPrecondition;
  // others as for Call, with the blocks asked in the message.
  Result<std::vector<LogsChunk>> GetLogs(const LogFilter& filter, uint64_t from, uint64_t to);
  // For `gapless status`: the eth_getLogs sizing of each endpoint (GetLogsSizer::Describe, in
  // endpoint order: the pool's endpoints, or this client's one).
  std::vector<std::string> DescribeLogSizing();

  // False once the node answered eth_getBlockReceipts with "method not found", until the next
  // fetch after missing_method_retry_micros.
  bool block_receipts_supported() const { return block_receipts_supported_; }
  // The tracing API FetchBlocks uses now (with traces on).
  RawBlock::TraceApi trace_api() const { return trace_api_; }

  struct Stats {
    uint64_t posts = 0;    // HTTP requests sent
    uint64_t retries = 0;  // of which were retries after an Unavailable failure
    uint64_t calls = 0;    // JSON-RPC calls sent (a batch of n counts n, retries included)
  };
  Stats stats() const { return stats_; }

  // The endpoint, redacted (HttpTransport::Describe).
  std::string Describe() const { return transport_->Describe(); }

  // Answers of the endpoints in served_by (RawBlock::served_by) were wrong (a block hash not
  // the head log's): over an endpoint pool, those endpoints count a failure and this client's
  // next requests go elsewhere (HttpTransport::Distrust). A no-op over one endpoint.
  void Distrust(uint64_t served_by) { transport_->Distrust(served_by); }
  // The endpoints in served_by, redacted (HttpTransport::DescribeServers).
  std::string DescribeServers(uint64_t served_by) const {
    return transport_->DescribeServers(served_by);
  }

  // The most calls Batch sends in one POST now: options' max_batch_size, lowered when the node
  // refused a batch as too large (HTTP 413, or one error object naming the batch).
  size_t max_batch_size() const { return options_.max_batch_size; }

 private:
  struct Parser;
  // Sends calls (as one object when single, else as an array), retrying per the policy, and fills
  // one Result per call.
  Result<std::vector<Result<std::string>>> Execute(std::span<const RpcRequest> calls, bool single,
                                                   bool retry_rpc_errors,
                                                   std::span<uint64_t> served_by = {});
  // One POST (post()), counted in stats_ and the client's metrics: `calls` calls, attempt > 0 a
  // retry.
  Result<HttpResponse> CountedPost(size_t calls, int attempt,
                                   const std::function<Result<HttpResponse>()>& post);
  // A failed request counted in the client's metrics (by typed reason, else code; HTTP 429s).
  void CountFailure(const Status& failure, const Result<HttpResponse>& response);
  // After attempt (from 0) of a request failed: OK after sleeping the server's Retry-After (at
  // most max_retry_after_micros) or a backoff when it is to be sent again (Unavailable, attempts
  // left); otherwise the failure to return ("gave up after n attempts" on the last).
  Status WaitToRetry(const Status& failure, const Result<HttpResponse>& response, int attempt);
  // The eth_getLogs sizers: the transport's (a pool's), else this client's own (made once).
  GetLogsSizers& LogSizers();
  // Call without retrying JSON-RPC error answers (transport failures are still retried).
  Result<std::string> CallNoRpcRetry(std::string_view method, std::string_view params_json);
  // Fills traces_json of every block in one batch (traces on); switches to the debug API on
  // "method not found" (by hash, then by number) and asks again. "block N" in every error.
  Status FetchTraces(std::vector<RawBlock>& blocks);
  // The fallback without eth_getBlockReceipts: receipts[i] = "[r0,r1,...]" of the transactions
  // tx_hashes[i] of block numbers[i] (for each i with want[i]), from one batch of
  // eth_getTransactionReceipt; served_by[i] |= their endpoints. "block N" in every error.
  Status ReceiptsByHash(std::span<const uint64_t> numbers, std::span<const uint8_t> want,
                        const std::vector<std::vector<std::string>>& tx_hashes,
                        std::vector<std::string>* receipts, std::vector<uint64_t>* served_by);
  // Marks eth_getBlockReceipts missing until missing_method_retry_micros from now, said once.
  void BlockReceiptsMissing();
  // A failure without what the transport's Scrub removes (an answer quoting the API key).
  Status Scrubbed(const Status& st) const;
  Result<std::string> ScrubbedResult(Result<std::string> r) const;

  std::unique_ptr<HttpTransport> owned_transport_;
  HttpTransport* transport_;
  JsonRpcClientOptions options_;
  std::unique_ptr<Parser> parser_;
  uint64_t next_id_ = 1;
  // The fallbacks taken on "method not found", each until its time (options_.env's clock): then
  // HealFallbacks asks the method again (options_.missing_method_retry_micros).
  void HealFallbacks();
  bool block_receipts_supported_ = true;
  int64_t block_receipts_again_at_ = 0;
  RawBlock::TraceApi trace_api_ = RawBlock::TraceApi::kTraceBlock;
  int64_t trace_block_again_at_ = 0;
  bool debug_trace_by_hash_ = true;  // false while the node lacks debug_traceBlockByHash
  int64_t by_hash_again_at_ = 0;
  Stats stats_;
  std::unique_ptr<GetLogsSizers> own_log_sizers_;  // over one endpoint
};

// The JSON-RPC error code a status from JsonRpcClient carries ("JSON-RPC error <code>: ..." in its
// message), or nullopt when the failure was not a JSON-RPC error object.
std::optional<int64_t> RpcErrorCode(const Status& status);

// Status::reason() of a failure caused by the HTTP status of the answer: "http:<status>".
std::string HttpStatusReason(long status);  // NOLINT(runtime/int): libcurl's type
// Status::reason() of a JSON-RPC error answer that means "rate limited" (table above).
inline constexpr std::string_view kRpcRateLimitedReason = "rpc:rate-limited";
// Status::reason() of a JSON-RPC error answer that means "execution reverted" (eth_call of a
// method a contract lacks or refuses): error 3, or -32000 naming a revert.
inline constexpr std::string_view kRpcRevertedReason = "rpc:reverted";
// Status::reason() of a batch the node refused as a whole with an error naming the batch ("batch
// too large"); Batch halves its batches and sends again on it or on HTTP 413.
inline constexpr std::string_view kBatchTooLargeReason = "rpc:batch-too-large";

// The status code a JSON-RPC error object maps to (table above).
Code CodeForRpcError(int64_t code, std::string_view message);

// "0x1a" (quotes allowed around it: "\"0x1a\"") -> 26. InvalidData unless 0x + 1..16 hex digits.
Result<uint64_t> ParseHexQuantity(std::string_view text);
// 26 -> "0x1a".
std::string HexQuantity(uint64_t n);

}  // namespace gapless

// JsonRpcClient's transport plumbing (json_rpc.h): Execute sends one call or a batch, retries
// Unavailable failures with backoff or Retry-After and re-sends the elements that failed alone;
// Call and Batch (split by max_batch_size, halved on "batch too large") are built on it, with
// the client's metrics. Also the small typed calls: ChainId, BlockNumber, ResolveBlockTag.
// Blocks and receipts: json_rpc_blocks.cc; traces: json_rpc_traces.cc; logs of a block range:
// json_rpc_logs.cc; the wire format (request
// bodies, answers, error classification): json_rpc_wire.cc.
#include "rpc/json_rpc.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <numeric>

#include "core/metrics.h"
#include "core/text.h"
#include "rpc/json_rpc_wire.h"

namespace gapless {

using json_rpc_wire::AppendRequest;
using json_rpc_wire::BlockSummary;
using json_rpc_wire::CheckHttpStatus;
using json_rpc_wire::DescribeCalls;
using json_rpc_wire::IsNullJson;
using json_rpc_wire::Lower;
using json_rpc_wire::ParseAnswer;
using json_rpc_wire::ScanBlock;
using json_rpc_wire::Snippet;

namespace {

bool IsMethodName(std::string_view m) {
  if (m.empty()) return false;
  for (char c : m) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

// The client's metrics (core/metrics.h), shared by every client of the process.
struct RpcMetrics {
  Counter& requests;
  Counter& calls;
  Counter& rate_limited;
  Family<Counter>& errors;
  Histogram& latency;
};

RpcMetrics& Metrics() {
  static RpcMetrics metrics{
      MetricsRegistry::Default()
          .CounterFamily("gapless_rpc_requests_total",
                         "JSON-RPC HTTP requests (POSTs) sent, retries included")
          .Get(),
      MetricsRegistry::Default()
          .CounterFamily("gapless_rpc_calls_total",
                         "JSON-RPC calls sent (a batch of n counts n), retries included")
          .Get(),
      MetricsRegistry::Default()
          .CounterFamily("gapless_rpc_rate_limited_total", "JSON-RPC requests answered HTTP 429")
          .Get(),
      MetricsRegistry::Default().CounterFamily(
          "gapless_rpc_errors_total",
          "Failed JSON-RPC requests, by typed reason (http-429, http-502, rpc:-32005, ...) or "
          "error code (unavailable: a transport failure, invalid_data: a malformed answer)",
          {"reason"}),
      MetricsRegistry::Default()
          .HistogramFamily("gapless_rpc_request_seconds",
                           "Time from sending a JSON-RPC request to its whole answer",
                           LatencyBuckets())
          .Get()};
  return metrics;
}

}  // namespace

JsonRpcClient::JsonRpcClient(HttpTransport* transport, JsonRpcClientOptions options)
    : transport_(transport), options_(options), parser_(std::make_unique<Parser>()) {
  if (options_.env == nullptr) options_.env = Env::Default();
  if (options_.max_attempts < 1) options_.max_attempts = 1;
}

JsonRpcClient::JsonRpcClient(std::unique_ptr<HttpTransport> transport, JsonRpcClientOptions options)
    : JsonRpcClient(transport.get(), options) {
  owned_transport_ = std::move(transport);
}

JsonRpcClient::~JsonRpcClient() = default;

Result<std::vector<Result<std::string>>> JsonRpcClient::Execute(std::span<const RpcRequest> calls,
                                                                bool single, bool retry_rpc_errors,
                                                                std::span<uint64_t> served_by) {
  for (const RpcRequest& call : calls) {
    if (!IsMethodName(call.method)) {
      return Internal(fmt::format("invalid JSON-RPC method name \"{}\"", Snippet(call.method)));
    }
  }
  std::vector<Result<std::string>> results(calls.size(),
                                           Result<std::string>(Internal("no answer yet")));
  std::vector<size_t> pending(calls.size());
  std::iota(pending.begin(), pending.end(), size_t{0});
  const std::string endpoint = transport_->Describe();
  std::string body;
  for (int attempt = 0;; ++attempt) {
    const bool last_attempt = attempt + 1 >= options_.max_attempts;
    const uint64_t base_id = next_id_;
    next_id_ += pending.size();
    body.clear();
    if (!single) body.push_back('[');
    for (size_t k = 0; k < pending.size(); ++k) {
      if (k > 0) body.push_back(',');
      AppendRequest(body, calls[pending[k]], base_id + k);
    }
    if (!single) body.push_back(']');
    const std::string what = DescribeCalls(calls, pending, single);

    Result<HttpResponse> response =
        CountedPost(pending.size(), attempt, [&] { return transport_->Post(body); });
    Status failure = response.ok() ? CheckHttpStatus(*response, what, endpoint)
                                   : response.status().WithContext(what);
    if (failure.ok()) {
      failure = ParseAnswer(parser_->parser, response->body, single, base_id, calls, pending,
                            results, what, endpoint);
      for (size_t i : pending) results[i] = ScrubbedResult(std::move(results[i]));
      if (!served_by.empty()) {
        for (size_t i : pending) served_by[i] = response->served_by;
      }
    }
    failure = Scrubbed(failure);
    if (!failure.ok()) {
      CountFailure(failure, response);
      GAPLESS_RETURN_IF_ERROR(WaitToRetry(failure, response, attempt));
      continue;
    }
    if (!retry_rpc_errors) break;
    std::vector<size_t> again;
    for (size_t i : pending) {
      if (!results[i].ok() && results[i].status().code() == Code::kUnavailable) again.push_back(i);
    }
    if (again.empty() || last_attempt) break;
    int64_t wait = BackoffMicros(options_.env, attempt, options_.backoff_base_micros,
                                 options_.backoff_cap_micros);
    spdlog::warn("{} (attempt {} of {}); retrying {} call(s) in {} ms",
                 results[again.front()].status().message(), attempt + 1, options_.max_attempts,
                 again.size(), wait / 1000);
    options_.env->SleepMicros(wait);
    pending = std::move(again);
  }
  return results;
}

Result<HttpResponse> JsonRpcClient::CountedPost(size_t calls, int attempt,
                                                const std::function<Result<HttpResponse>()>& post) {
  ++stats_.posts;
  stats_.calls += calls;
  if (attempt > 0) ++stats_.retries;
  const auto post_started = std::chrono::steady_clock::now();
  Result<HttpResponse> response = post();
  RpcMetrics& metrics = Metrics();
  metrics.requests.Inc();
  metrics.calls.Inc(static_cast<double>(calls));
  metrics.latency.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - post_started).count());
  return response;
}

void JsonRpcClient::CountFailure(const Status& failure, const Result<HttpResponse>& response) {
  RpcMetrics& metrics = Metrics();
  // By the typed reason ("http-429", "rpc:-32005"), else the code: a fixed set of words.
  metrics.errors.With({failure.reason().empty() ? CodeName(failure.code()) : failure.reason()})
      .Inc();
  if (response.ok() && response->status == 429) metrics.rate_limited.Inc();
}

Status JsonRpcClient::WaitToRetry(const Status& failure, const Result<HttpResponse>& response,
                                  int attempt) {
  if (failure.code() != Code::kUnavailable) return failure;
  if (attempt + 1 >= options_.max_attempts) {
    return Unavailable(
               fmt::format("{} (gave up after {} attempts)", failure.message(), attempt + 1))
        .WithReason(failure.reason());
  }
  int64_t wait = 0;
  if (response.ok() && response->retry_after_micros) {
    wait = std::min(*response->retry_after_micros, options_.max_retry_after_micros);
  } else {
    wait = BackoffMicros(options_.env, attempt, options_.backoff_base_micros,
                         options_.backoff_cap_micros);
  }
  spdlog::warn("{} (attempt {} of {}); retrying in {} ms", failure.message(), attempt + 1,
               options_.max_attempts, wait / 1000);
  options_.env->SleepMicros(wait);
  return Status::Ok();
}

Status JsonRpcClient::Scrubbed(const Status& st) const {
  if (st.ok()) return st;
  std::string message = transport_->Scrub(st.message());
  if (message == st.message()) return st;
  return Status(st.code(), std::move(message)).WithReason(st.reason());
}

Result<std::string> JsonRpcClient::ScrubbedResult(Result<std::string> r) const {
  if (r.ok()) return r;
  return Scrubbed(r.status());
}

Result<std::string> JsonRpcClient::Call(std::string_view method, std::string_view params_json) {
  RpcRequest call{std::string(method), std::string(params_json)};
  GAPLESS_ASSIGN_OR_RETURN(auto results, Execute(std::span<const RpcRequest>(&call, 1),
                                                 /*single=*/true, /*retry_rpc_errors=*/true));
  return std::move(results.front());
}

Result<std::string> JsonRpcClient::CallNoRpcRetry(std::string_view method,
                                                  std::string_view params_json) {
  RpcRequest call{std::string(method), std::string(params_json)};
  GAPLESS_ASSIGN_OR_RETURN(auto results, Execute(std::span<const RpcRequest>(&call, 1),
                                                 /*single=*/true, /*retry_rpc_errors=*/false));
  return std::move(results.front());
}

Result<std::vector<Result<std::string>>> JsonRpcClient::Batch(const std::vector<RpcRequest>& calls,
                                                              bool retry_rpc_errors,
                                                              std::vector<uint64_t>* served_by) {
  std::vector<Result<std::string>> all;
  all.reserve(calls.size());
  if (served_by != nullptr) served_by->assign(calls.size(), 0);
  std::span<const RpcRequest> rest(calls);
  while (!rest.empty()) {
    const size_t chunk = options_.max_batch_size == 0 ? calls.size() : options_.max_batch_size;
    size_t n = std::min(chunk, rest.size());
    std::span<uint64_t> served;
    if (served_by != nullptr) served = std::span<uint64_t>(*served_by).subspan(all.size(), n);
    auto part = Execute(rest.first(n), /*single=*/false, retry_rpc_errors, served);
    if (!part.ok() && n > 1 &&
        (part.status().reason() == kBatchTooLargeReason ||
         part.status().reason() == HttpStatusReason(413))) {
      // The node takes fewer calls per batch: learned for this client, and the chunk sent again
      // in halves (a provider's limit is found in a few halvings).
      options_.max_batch_size = std::max<size_t>(1, n / 2);
      spdlog::warn("{}; sending at most {} calls per batch from now on", part.status().message(),
                   options_.max_batch_size);
      continue;
    }
    if (!part.ok()) return part.status();
    for (auto& r : *part) all.push_back(std::move(r));
    rest = rest.subspan(n);
  }
  return all;
}

Result<uint64_t> JsonRpcClient::ChainId() {
  GAPLESS_ASSIGN_OR_RETURN(std::string raw, Call("eth_chainId", "[]"));
  Result<uint64_t> id = ParseHexQuantity(raw);
  if (!id.ok()) return id.status().WithContext("eth_chainId() from " + Describe());
  return id;
}

Result<uint64_t> JsonRpcClient::BlockNumber() {
  GAPLESS_ASSIGN_OR_RETURN(std::string raw, Call("eth_blockNumber", "[]"));
  Result<uint64_t> n = ParseHexQuantity(raw);
  if (!n.ok()) return n.status().WithContext("eth_blockNumber() from " + Describe());
  return n;
}

Result<uint64_t> JsonRpcClient::ResolveBlockTag(std::string_view tag_in) {
  const std::string tag = Lower(tag_in);
  auto invalid = [&] {
    return FailedPrecondition(fmt::format(
        "invalid block \"{}\": expected latest, safe, finalized, earliest, pending, a decimal "
        "number or a 0x-hex number",
        Snippet(tag_in, 80)));
  };
  if (tag.empty()) return invalid();
  if (tag.starts_with("0x")) {
    Result<uint64_t> n = ParseHexQuantity(tag);
    if (!n.ok()) return invalid();
    return n;
  }
  if (tag.front() >= '0' && tag.front() <= '9') {
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(tag.data(), tag.data() + tag.size(), n);
    if (ec != std::errc() || ptr != tag.data() + tag.size()) return invalid();
    return n;
  }
  if (tag != "latest" && tag != "safe" && tag != "finalized" && tag != "earliest" &&
      tag != "pending") {
    return invalid();
  }
  const bool post_merge_tag = tag == "safe" || tag == "finalized";
  const std::string params = fmt::format(R"(["{}",false])", tag);
  Result<std::string> block = post_merge_tag ? CallNoRpcRetry("eth_getBlockByNumber", params)
                                             : Call("eth_getBlockByNumber", params);
  if (!block.ok()) {
    std::optional<int64_t> code = RpcErrorCode(block.status());
    if (post_merge_tag && code && block.status().reason() != kRpcRateLimitedReason) {
      return FailedPrecondition(fmt::format(
          "the node at {} does not support the \"{}\" block tag (a pre-merge chain or an old "
          "client?); use \"latest\" with confirmations instead: {}",
          Describe(), tag, block.status().message()));
    }
    return block.status();
  }
  if (IsNullJson(*block)) {
    if (post_merge_tag) {
      return FailedPrecondition(fmt::format(
          "the node at {} has no \"{}\" block (a pre-merge chain or an old client?); use "
          "\"latest\" with confirmations instead",
          Describe(), tag));
    }
    return NotFound(
        fmt::format("eth_getBlockByNumber({}) from {} returned null", params, Describe()));
  }
  BlockSummary summary;
  Status st = ScanBlock(parser_->parser, *block, &summary);
  if (!st.ok()) return st.WithContext(fmt::format("resolving \"{}\" at {}", tag, Describe()));
  return summary.number;
}

}  // namespace gapless

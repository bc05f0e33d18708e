// JsonRpcClient::GetLogs (json_rpc.h): the logs of a block range in eth_getLogs requests sized per
// endpoint (rpc/get_logs_limits.h). Each request goes out through HttpTransport::PostFor, so over
// an endpoint pool its range is the one the sizer of the endpoint it goes to gives; the answer's
// served_by names the endpoint whose sizer learns from it. A refusal that is a limit is read
// before the retry policy and asked again at once, narrower; any other failure is retried as
// Call's are.
#include <fmt/format.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <bit>
#include <cctype>
#include <optional>
#include <span>
#include <vector>

#include "rpc/json_rpc.h"
#include "rpc/json_rpc_wire.h"

namespace gapless {

using json_rpc_wire::AppendRequest;
using json_rpc_wire::CheckHttpStatus;
using json_rpc_wire::kPadding;
using json_rpc_wire::Lower;
using json_rpc_wire::ParseAnswer;
using json_rpc_wire::ReadRpcError;
using json_rpc_wire::RpcErrorObject;
using json_rpc_wire::Snippet;

namespace {

namespace od = simdjson::ondemand;

bool IsHexOfLength(std::string_view s, size_t digits) {
  if (s.size() != 2 + digits || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  for (char c : s.substr(2)) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The filter's fields of the eth_getLogs object (after fromBlock and toBlock):
// ,"address":["0x..",...],"topics":[["0x..",...]]. FailedPrecondition naming a bad entry.
Result<std::string> FilterFields(const LogFilter& filter) {
  std::string out;
  auto list = [&](std::string_view key, const std::vector<std::string>& values, size_t digits,
                  bool nested) -> Status {
    if (values.empty()) return Status::Ok();
    out += fmt::format(R"(,"{}":{})", key, nested ? "[[" : "[");
    for (size_t i = 0; i < values.size(); ++i) {
      if (!IsHexOfLength(values[i], digits)) {
        return FailedPrecondition(
            fmt::format("eth_getLogs filter: {} \"{}\" is not 0x + {} hex "
                        "digits",
                        key == "address" ? "address" : "topic 0", Snippet(values[i], 80), digits));
      }
      out += fmt::format(R"({}"{}")", i > 0 ? "," : "", Lower(values[i]));
    }
    out += nested ? "]]" : "]";
    return Status::Ok();
  };
  GAPLESS_RETURN_IF_ERROR(list("address", filter.addresses, 40, /*nested=*/false));
  GAPLESS_RETURN_IF_ERROR(list("topics", filter.topic0s, 64, /*nested=*/true));
  return out;
}

std::string DescribeRange(GetLogsRange r) {
  return r.from == r.to ? fmt::format("block {}", r.from)
                        : fmt::format("blocks {}..{}", r.from, r.to);
}

// A hex quantity field of a log object.
simdjson::error_code HexField(od::object& log, std::string_view key, uint64_t* out) {
  std::string_view text;
  if (auto e = log.find_field_unordered(key).get_string().get(text)) return e;
  Result<uint64_t> n = ParseHexQuantity(text);
  if (!n.ok()) return simdjson::INCORRECT_TYPE;
  *out = *n;
  return simdjson::SUCCESS;
}

// Counts the logs of an eth_getLogs result (json: padded), checking that it is an array of logs
// inside `asked`, in (block, log index) order. InvalidData naming the problem otherwise.
Result<uint64_t> ScanLogs(od::parser& parser, std::string& json, GetLogsRange asked) {
  if (json.capacity() < json.size() + kPadding) json.reserve(json.size() + kPadding);
  od::document doc;
  od::array logs;
  if (auto e =
          parser.iterate(simdjson::padded_string_view(json.data(), json.size(), json.capacity()))
              .get(doc);
      e || (e = doc.get_array().get(logs))) {
    return InvalidData(fmt::format("the result is not a JSON array of logs ({}): {}",
                                   simdjson::error_message(e), Snippet(json)));
  }
  uint64_t count = 0;
  uint64_t last_block = 0;
  uint64_t last_index = 0;
  for (auto element : logs) {
    od::object log;
    uint64_t block = 0;
    uint64_t index = 0;
    if (auto e = element.get_object().get(log); e || (e = HexField(log, "blockNumber", &block)) ||
                                                (e = HexField(log, "logIndex", &index))) {
      return InvalidData(
          fmt::format("log {} of the result has no hex blockNumber and logIndex ({})", count,
                      simdjson::error_message(e)));
    }
    if (block < asked.from || block > asked.to) {
      return InvalidData(fmt::format("log {} of the result is of block {}, outside the range asked",
                                     count, block));
    }
    if (count > 0 && (block < last_block || (block == last_block && index <= last_index))) {
      return InvalidData(
          fmt::format("log {} of the result (block {} index {}) is not after the one before (block "
                      "{} index {})",
                      count, block, index, last_block, last_index));
    }
    last_block = block;
    last_index = index;
    ++count;
  }
  return count;
}

}  // namespace

GetLogsSizers& JsonRpcClient::LogSizers() {
  if (GetLogsSizers* shared = transport_->log_sizers()) return *shared;
  if (!own_log_sizers_) {
    own_log_sizers_ = std::make_unique<GetLogsSizers>(1, options_.env, options_.get_logs);
  }
  return *own_log_sizers_;
}

std::vector<std::string> JsonRpcClient::DescribeLogSizing() { return LogSizers().Describe(); }

Result<std::vector<LogsChunk>> JsonRpcClient::GetLogs(const LogFilter& filter, uint64_t from,
                                                      uint64_t to) {
  if (from > to) return Internal(fmt::format("GetLogs({}, {}): an empty range", from, to));
  GAPLESS_ASSIGN_OR_RETURN(const std::string filter_fields, FilterFields(filter));
  GetLogsSizers& sizers = LogSizers();
  std::vector<LogsChunk> chunks;
  // The request for each endpoint asked by the last PostFor (one, or more on failover or hedging).
  struct Asked {
    size_t endpoint = 0;
    GetLogsRange range;
    RpcRequest call;
  };
  std::vector<Asked> asked;
  // After a refusal: the narrower range for the endpoint that refused (OnRefused), asked of it
  // next instead of its sizer's Next; per endpoint, until the next answer.
  std::vector<std::optional<GetLogsRange>> narrower(sizers.size());
  uint64_t next = from;
  int attempt = 0;  // failures of the request for `next`, for the retry policy
  for (;;) {
    const uint64_t id = next_id_++;
    asked.clear();
    auto body_for = [&](size_t endpoint) {
      const GetLogsRange range = endpoint < narrower.size() && narrower[endpoint]
                                     ? *narrower[endpoint]
                                     : sizers.Next(endpoint, next, to);
      RpcRequest call{"eth_getLogs",
                      fmt::format(R"([{{"fromBlock":"{}","toBlock":"{}"{}}}])",
                                  HexQuantity(range.from), HexQuantity(range.to), filter_fields)};
      std::string body;
      AppendRequest(body, call, id);
      asked.push_back({endpoint, range, std::move(call)});
      return body;
    };
    Result<HttpResponse> response =
        CountedPost(1, attempt, [&] { return transport_->PostFor("eth_getLogs", body_for); });
    if (asked.empty()) return Internal("GetLogs: the transport sent no request");
    const uint64_t served_by = response.ok() ? response->served_by : 0;
    const size_t endpoint = served_by != 0 ? static_cast<size_t>(std::countr_zero(served_by)) : 0;
    const Asked* mine = served_by != 0 ? nullptr : &asked.front();
    for (const Asked& a : asked) {
      if (served_by != 0 && a.endpoint == endpoint) mine = &a;
    }
    if (mine == nullptr) {
      return Internal(
          fmt::format("GetLogs: an answer from endpoint {}, which was not asked", endpoint));
    }
    const GetLogsRange range = mine->range;
    const std::string what = fmt::format("eth_getLogs({})", DescribeRange(range));
    const std::string server = served_by != 0 ? transport_->DescribeServers(served_by) : Describe();

    Status failure = response.ok() ? CheckHttpStatus(*response, what, server)
                                   : response.status().WithContext(what);
    std::vector<Result<std::string>> results(1, Result<std::string>(Internal("no answer yet")));
    if (failure.ok()) {
      failure =
          ParseAnswer(parser_->parser, response->body, /*single=*/true, id,
                      std::span<const RpcRequest>(&mine->call, 1), {0}, results, what, server);
    }
    failure = Scrubbed(failure);
    if (failure.ok() && !results[0].ok()) {
      // An error answer: a limit first (ClassifyGetLogsError), before the retry policy.
      std::optional<RpcErrorObject> error = ReadRpcError(parser_->parser, response->body);
      const GetLogsLimit why =
          error ? ClassifyGetLogsError(error->code, error->message, range) : GetLogsLimit{};
      if (why.kind != GetLogsLimit::Kind::kNotALimit) {
        Result<GetLogsRange> retry = sizers.OnRefused(endpoint, range, why);
        if (!retry.ok()) {
          if (retry.status().code() != Code::kFailedPrecondition) return retry.status();
          return Scrubbed(FailedPrecondition(fmt::format(
              "eth_getLogs for block {} alone is refused by {} ({}: JSON-RPC error {}: {}): the "
              "range cannot be narrower; this endpoint does not serve that block's logs for "
              "this filter",
              range.from, server, DescribeGetLogsLimit(why), error->code,
              Snippet(error->message, 300))));
        }
        auto log_level =
            why.kind == GetLogsLimit::Kind::kCap ? spdlog::level::info : spdlog::level::debug;
        spdlog::log(log_level, "{} refused by {} ({}); asking {}", what, server,
                    DescribeGetLogsLimit(why), DescribeRange(*retry));
        narrower[endpoint] = *retry;  // OnRefused succeeded: endpoint < sizers.size()
        continue;
      }
      failure = Scrubbed(results[0].status()).WithContext(DescribeRange(range));
    }
    if (!failure.ok()) {
      CountFailure(failure, response);
      GAPLESS_RETURN_IF_ERROR(WaitToRetry(failure, response, attempt));
      ++attempt;
      continue;
    }
    std::string& logs_json = *results[0];
    Result<uint64_t> count = ScanLogs(parser_->parser, logs_json, range);
    if (!count.ok()) return count.status().WithContext(fmt::format("{} from {}", what, server));
    sizers.OnAnswer(endpoint, range, *count);
    chunks.push_back({range.from, range.to, std::move(logs_json), *count, served_by});
    if (range.to >= to) return chunks;
    next = range.to + 1;
    narrower.assign(narrower.size(), std::nullopt);
    attempt = 0;
  }
}

}  // namespace gapless

// Internal to rpc/: the JSON-RPC wire format the client's files share (json_rpc.cc sends and
// retries, json_rpc_blocks.cc and json_rpc_traces.cc fetch blocks, receipts and traces,
// json_rpc_logs.cc the logs of a block range).
// json_rpc_wire.cc builds request bodies, reads answers (one response object or a batch array,
// matched by id) and classifies failures (HTTP status, JSON-RPC error objects) per the table in
// json_rpc.h; it also holds the simdjson helpers and the one scan of a block's JSON the client
// needs (number, hash, transaction hashes). Not a public header: nothing outside rpc/ includes it.
//
// Strings handed to simdjson carry SIMDJSON_PADDING bytes of spare capacity (Padded grows them
// when short), so answers are parsed in place without copies.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "rpc/http_transport.h"
#include "rpc/json_rpc.h"

namespace gapless {

// The client's JSON parser (one per client: simdjson parsers are not thread-safe).
struct JsonRpcClient::Parser {
  simdjson::ondemand::parser parser;
};

namespace json_rpc_wire {

inline constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;

// Printable, bounded excerpt of untrusted text for error messages.
std::string Snippet(std::string_view s, size_t max = 160);
// "method(params)" of the call, or "batch of n calls first .. last" for calls[pending].
std::string DescribeCalls(std::span<const RpcRequest> calls, const std::vector<size_t>& pending,
                          bool single);
bool IsNullJson(std::string_view json);
// ASCII lower case.
std::string Lower(std::string_view s);
// "0x" followed by one or more hex digits.
bool IsHexData(std::string_view s);

// Appends {"jsonrpc":"2.0","id":id,"method":...,"params":...} to body.
void AppendRequest(std::string& body, const RpcRequest& call, uint64_t id);
// Interprets the HTTP status. OK means "parse the body"; a failure carries HttpStatusReason.
Status CheckHttpStatus(const HttpResponse& r, const std::string& what, const std::string& endpoint);
// Parses the answer to calls[pending[k]] (sent with id base_id + k) into results. A failure is
// the answer's as a whole (malformed, unknown ids, a batch rejected with one error object); an
// element's own JSON-RPC error goes into its result.
Status ParseAnswer(simdjson::ondemand::parser& parser, std::string& body, bool single,
                   uint64_t base_id, std::span<const RpcRequest> calls,
                   const std::vector<size_t>& pending, std::vector<Result<std::string>>& results,
                   const std::string& what, const std::string& endpoint);

// The code and message of the error object of a single JSON-RPC response (body, as ParseAnswer
// read it), or nullopt when it has none or is not one. The message whole (up to 4096 bytes, where
// the failure's text quotes 300): a provider's suggested range comes at the end of a long one.
struct RpcErrorObject {
  int64_t code = 0;
  std::string message;
};
std::optional<RpcErrorObject> ReadRpcError(simdjson::ondemand::parser& parser, std::string& body);

// What the client needs to know about a block's JSON.
struct BlockSummary {
  uint64_t number = 0;
  std::string hash;
  std::vector<std::string> tx_hashes;
};
// Reads json (an eth_getBlockByNumber result, padded in place) into out. InvalidData naming the
// problem when it is not a block with a number and well-formed transaction hashes.
Status ScanBlock(simdjson::ondemand::parser& parser, std::string& json, BlockSummary* out);

}  // namespace json_rpc_wire
}  // namespace gapless

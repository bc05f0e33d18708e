// ReplayTransport: an HttpTransport that answers JSON-RPC requests (single and batch) from
// recorded fixtures, without a network, so rpc/ decode/ store/ node/ tests run on real node
// answers deterministically.
//
// Answers come from, in this order of precedence:
//   1. SetChainId: eth_chainId answers the configured value.
//   2. Registrations: Add / AddFile / AddError, and the pairs of execution-apis `.io` files
//      (lines ">> request", "<< response"). A registration matches on the method and the params
//      in canonical form: whitespace outside strings removed, ASCII lower-cased (hex and tags are
//      case-insensitive), so R"([ "0x1036640", true ])" matches ["0x1036640",true].
//   3. ethereum-etl mock directories: the request maps to the file
//      `web3_response.<method>_<params joined by "_">.json` as ethereum-etl's mock provider names
//      them (see fixtures/MANIFEST.md §1: strings lower-cased, booleans true/false, dict params as
//      sorted key_value pairs, lists flattened); the file holds the whole envelope.
//   4. Anything else: JSON-RPC error -32601 "method not found". This is what a node without
//      eth_getBlockReceipts answers, so ethereum-etl fixtures (which only have
//      eth_getTransactionReceipt files) exercise the client's receipt fallback path.
// Answers echo the request's id. Post always returns HTTP 200 (a malformed request body gets a
// JSON-RPC -32700 answer, as a node would).
//
// Thread-safety: thread-safe; the indexer's worker threads may share one instance. Registration
// while requests are served is allowed.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "rpc/http_transport.h"

namespace gapless {

// One request of a JSON-RPC body, as raw JSON pieces.
struct JsonRpcCall {
  std::string id_json;  // raw JSON of "id" ("1", "\"a\"", "null")
  std::string method;
  std::string params_json = "[]";  // raw JSON of "params"; "[]" when absent
};

// Parses a JSON-RPC request body: one object, or a batch array (*is_batch = true). InvalidData
// when it is not valid JSON-RPC.
Result<std::vector<JsonRpcCall>> ParseJsonRpcRequests(std::string_view body, bool* is_batch);

class ReplayTransport : public HttpTransport {
 public:
  ReplayTransport() = default;

  // (a) Indexes every web3_response.*.json file of an ethereum-etl test case directory. May be
  // called for several directories (e.g. a block case and its receipts case).
  Status AddEthereumEtlDirectory(const std::string& dir);

  // (b) Registers result_json (any JSON text) as the answer to method(params_json).
  Status Add(std::string_view method, std::string_view params_json, std::string_view result_json);
  // The same, reading the result from a file, e.g. fixtures/mainnet/17000000/block.json.
  Status AddFile(std::string_view method, std::string_view params_json, const std::string& path);
  // Registers a JSON-RPC error answer.
  Status AddError(std::string_view method, std::string_view params_json, int64_t code,
                  std::string_view message);

  // (c) Registers the request/response pairs of one execution-apis .io file, or of every .io file
  // under dir (recursively).
  Status AddExecutionApisFile(const std::string& path);
  Status AddExecutionApisDirectory(const std::string& dir);

  // Answers eth_chainId with this value (ethereum-etl's mocks have a fake 0x1234).
  void SetChainId(uint64_t chain_id);

  Result<HttpResponse> Post(std::string_view body) override;
  std::string Describe() const override { return "replay://fixtures"; }

  // Requests served: HTTP posts, and JSON-RPC calls per method (a batch counts each element).
  int64_t posts() const { return posts_.load(); }
  int64_t calls(std::string_view method) const;

  // The lookup keys (exposed for tests of the naming rules).
  static std::string CanonicalParams(std::string_view params_json);
  // E.g. ("eth_getBlockByNumber", R"(["0x76250",true])") -> "eth_getblockbynumber_0x76250_true"
  // (lower-cased: file names are matched case-insensitively).
  static Result<std::string> EthereumEtlKey(std::string_view method, std::string_view params_json);

 private:
  // The part of a response after the id: "\"result\":<json>" or "\"error\":<json>".
  std::optional<std::string> Lookup(const JsonRpcCall& call) const;
  Status Register(std::string_view method, std::string_view params_json, std::string fragment);

  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::string> registered_;  // method \n canonical params
  std::unordered_map<std::string, std::string> etl_;         // lower-cased etl key
  std::optional<uint64_t> chain_id_;
  std::atomic<int64_t> posts_{0};
  mutable std::mutex counts_mu_;
  std::map<std::string, int64_t, std::less<>> counts_;
};

}  // namespace gapless

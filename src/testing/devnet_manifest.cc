#include "testing/devnet_manifest.h"

#include <simdjson.h>

#include <memory>
#include <mutex>

namespace gapless {
namespace {

std::string Text(simdjson::dom::element e) {
  if (e.is_null()) return "";
  if (e.is_string()) return std::string(std::string_view(e));
  if (e.is_uint64()) return std::to_string(uint64_t(e));
  return std::to_string(int64_t(e));
}

Result<DevnetManifest> Parse(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element m;
  if (auto error = parser.load(path).get(m); error) {
    return InvalidData("devnet manifest " + path + ": " + simdjson::error_message(error));
  }
  DevnetManifest d;
  try {
    d.chain_id = uint64_t(m["chainId"]);
    d.last_block = uint64_t(m["lastBlock"]);
    d.failed = uint64_t(m["counts"]["failed"]);
    for (simdjson::dom::element t : m["tokenTransfers"].get_array()) {
      d.transfers[{Text(t["txHash"]), uint64_t(t["logIndex"]), uint64_t(t["batchIndex"])}] =
          Text(t["standard"]) + " " + Text(t["token"]) + " " + Text(t["from"]) + " " +
          Text(t["to"]) + " " + Text(t["tokenId"]) + " " + Text(t["value"]);
    }
    for (simdjson::dom::element c : m["createdContracts"].get_array()) {
      d.created_contracts.push_back(DevnetManifest::Created{Text(c["address"]), Text(c["txHash"]),
                                                            Text(c["creator"]), Text(c["via"]),
                                                            uint64_t(c["block"])});
    }
    for (simdjson::dom::element t : m["internalTransfers"].get_array()) {
      d.internal_transfers.push_back(DevnetManifest::Internal{
          Text(t["txHash"]), Text(t["from"]), Text(t["to"]), Text(t["value"]), Text(t["type"]),
          uint64_t(t["block"]), bool(t["reverted"])});
    }
    for (simdjson::dom::element t : m["tokens"].get_array()) {
      DevnetManifest::TokenInfo info;
      info.standard = Text(t["standard"]);
      if (!t["name"].is_null()) info.name = Text(t["name"]);
      if (!t["symbol"].is_null()) info.symbol = Text(t["symbol"]);
      if (!t["decimals"].is_null()) info.decimals = uint64_t(t["decimals"]);
      d.tokens[Text(t["address"])] = info;
    }
  } catch (const simdjson::simdjson_error& e) {
    return InvalidData("devnet manifest " + path + ": missing or malformed field: " + e.what());
  }
  return d;
}

}  // namespace

Result<const DevnetManifest*> LoadDevnetManifest(const std::string& path) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::unique_ptr<DevnetManifest>>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(path);
  if (it == cache->end()) {
    GAPLESS_ASSIGN_OR_RETURN(DevnetManifest parsed, Parse(path));
    it = cache->emplace(path, std::make_unique<DevnetManifest>(std::move(parsed))).first;
  }
  return it->second.get();
}

}  // namespace gapless

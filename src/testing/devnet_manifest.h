// devnet_manifest: what devnet/traffic.js sent to an anvil devnet, read from the manifest it
// writes (--out), so tests can compare an index with the truth instead of with itself.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"

namespace gapless {

struct DevnetManifest {
  uint64_t chain_id = 0;
  uint64_t last_block = 0;  // the last block traffic.js mined, padding included
  uint64_t failed = 0;      // transactions with status 0
  // (tx hash, log index, batch index) -> "standard token from to token_id value", lower-case hex,
  // decimal numbers, the way the token_transfers table holds them.
  std::map<std::tuple<std::string, uint64_t, uint64_t>, std::string> transfers;

  // Every contract created (deployment transactions and factory-made ones), in chain order.
  struct Created {
    std::string address, tx_hash, creator, via;  // via: transaction, create, create2
    uint64_t block = 0;
  };
  std::vector<Created> created_contracts;
  // Every call frame below the top level that carried value (reverted ones too).
  struct Internal {
    std::string tx_hash, from, to, value, type;  // type: call, create, create2, selfdestruct
    uint64_t block = 0;
    bool reverted = false;
  };
  std::vector<Internal> internal_transfers;
  // Every token contract seen in transfers: address -> standard and its methods' answers ("" and
  // false for null).
  struct TokenInfo {
    std::string standard;
    std::optional<std::string> name, symbol;
    std::optional<uint64_t> decimals;
  };
  std::map<std::string, TokenInfo> tokens;
};

// Reads the manifest at `path` once per path and process (it does not change while tests run).
// InvalidData naming the path and field when it is unreadable or malformed.
Result<const DevnetManifest*> LoadDevnetManifest(const std::string& path);

}  // namespace gapless

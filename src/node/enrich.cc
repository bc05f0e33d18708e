#include "node/enrich.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <optional>
#include <string_view>

#include "decode/contracts.h"
#include "store/queries.h"

namespace gapless {
namespace {

constexpr std::string_view kTokenSelectors[] = {
    kSelectorName,     kSelectorNameUpper,     kSelectorSymbol,     kSelectorSymbolUpper,
    kSelectorDecimals, kSelectorDecimalsUpper, kSelectorTotalSupply};

// See the header: a revert is an answer (the method is missing or refuses), anything else is not.
bool IsRevert(const Status& st) { return st.reason() == kRpcRevertedReason; }

// "\"0x..\"" -> "0x..".
Result<std::string> HexString(const std::string& json, const std::string& what) {
  if (json.size() < 4 || json.front() != '"' || json.back() != '"' || json[1] != '0' ||
      json[2] != 'x') {
    return InvalidData(fmt::format("{}: expected a 0x-hex string, got {}", what,
                                   json.substr(0, std::min<size_t>(json.size(), 40))));
  }
  return json.substr(1, json.size() - 2);
}

void SayLatestOnce(const std::string& what) {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  spdlog::warn(
      "{}; asked at \"latest\" instead (the node seems to lack that block's state: an archive "
      "node gives what the block saw). Said once per process",
      what);
}

// One call per (address, block) pair; a call whose error is neither a revert, a missing method nor
// a rate limit is asked again at "latest". Fills answers[i] (nullopt for a revert). Errors: the
// batch's own, a rate limit, a call failing at "latest" too, or -32601: the node does not serve
// the method at all (asking at "latest" cannot help), FailedPrecondition saying `without`, what
// does without the method.
Status CallAll(JsonRpcClient& rpc, std::vector<RpcRequest> calls,
               const std::vector<std::string>& latest_params, const std::vector<std::string>& names,
               std::string_view without, std::vector<std::optional<std::string>>* answers) {
  answers->assign(calls.size(), std::nullopt);
  std::vector<size_t> again;
  for (int round = 0; round < 2 && !calls.empty(); ++round) {
    GAPLESS_ASSIGN_OR_RETURN(auto results, rpc.Batch(calls, /*retry_rpc_errors=*/false));
    std::vector<RpcRequest> next;
    std::vector<size_t> next_index;
    for (size_t k = 0; k < results.size(); ++k) {
      const size_t i = round == 0 ? k : again[k];
      Result<std::string>& r = results[k];
      if (r.ok()) {
        GAPLESS_ASSIGN_OR_RETURN((*answers)[i], HexString(*r, names[i]));
        continue;
      }
      if (IsRevert(r.status())) continue;
      if (RpcErrorCode(r.status()) == -32601) {
        return FailedPrecondition(fmt::format(
            "{}: the node at {} does not serve {} (a missing method, not missing state); {}: {}",
            names[i], rpc.Describe(), calls[k].method, without, r.status().message()));
      }
      if (r.status().reason() == kRpcRateLimitedReason || round == 1) {
        return r.status().WithContext(names[i]);  // its code is the retry policy
      }
      SayLatestOnce(fmt::format("{}: {}", names[i], r.status().message()));
      next.push_back(RpcRequest{calls[k].method, latest_params[i]});
      next_index.push_back(i);
    }
    calls = std::move(next);
    again = std::move(next_index);
  }
  return Status::Ok();
}

Status FetchCode(JsonRpcClient& rpc, std::vector<BlockData>* blocks) {
  std::vector<Contract*> missing;
  for (BlockData& d : *blocks) {
    for (Contract& c : d.contracts) {
      if (!c.bytecode.has_value()) missing.push_back(&c);
    }
  }
  if (missing.empty()) return Status::Ok();
  std::vector<RpcRequest> calls;
  std::vector<std::string> latest, names;
  for (const Contract* c : missing) {
    calls.push_back(RpcRequest{
        "eth_getCode", fmt::format(R"(["{}","{}"])", c->address, HexQuantity(c->block_number))});
    latest.push_back(fmt::format(R"(["{}","latest"])", c->address));
    names.push_back(
        fmt::format("eth_getCode of contract {} at block {}", c->address, c->block_number));
  }
  std::vector<std::optional<std::string>> answers;
  GAPLESS_RETURN_IF_ERROR(
      CallAll(rpc, std::move(calls), latest, names,
              "contracts' code needs it, unless --traces gives the code from the creating traces, "
              "or use a node (or add an --rpc endpoint) that serves it",
              &answers));
  for (size_t i = 0; i < missing.size(); ++i) {
    if (!answers[i].has_value()) {
      return InvalidData(fmt::format("{}: the node refused it", names[i]));
    }
    SetBytecode(missing[i], std::move(*answers[i]));
  }
  return Status::Ok();
}

Status ReadTokens(JsonRpcClient& rpc, const EnrichOptions& options,
                  std::vector<BlockData>* blocks) {
  // First appearance in the range: the block's position and the standard it appeared as.
  struct Seen {
    size_t block = 0;
    std::string standard;
  };
  std::map<std::string, Seen> seen;
  for (size_t b = 0; b < blocks->size(); ++b) {
    const BlockData& d = (*blocks)[b];
    for (const TokenTransfer& t : d.token_transfers) {
      seen.try_emplace(t.token_address, Seen{b, TokenStandardName(t.standard)});
    }
    for (const Contract& c : d.contracts) {
      if (c.is_erc20 || c.is_erc721) {
        seen.try_emplace(c.address, Seen{b, c.is_erc20 ? "erc20" : "erc721"});
      }
    }
  }
  if (seen.empty()) return Status::Ok();
  if (options.stored_tokens) {
    std::vector<std::string> addresses;
    for (const auto& [address, s] : seen) addresses.push_back(address);
    GAPLESS_ASSIGN_OR_RETURN(auto stored, options.stored_tokens(addresses));
    const uint64_t from = blocks->front().block.number;
    for (const auto& [address, block] : stored) {
      if (block < from) seen.erase(address);
    }
  }
  if (seen.empty()) return Status::Ok();

  std::vector<RpcRequest> calls;
  std::vector<std::string> latest, names;
  for (const auto& [address, s] : seen) {
    const uint64_t number = (*blocks)[s.block].block.number;
    for (std::string_view selector : kTokenSelectors) {
      calls.push_back(RpcRequest{"eth_call", fmt::format(R"([{{"to":"{}","data":"{}"}},"{}"])",
                                                         address, selector, HexQuantity(number))});
      latest.push_back(fmt::format(R"([{{"to":"{}","data":"{}"}},"latest"])", address, selector));
      names.push_back(
          fmt::format("eth_call {} of token {} at block {}", selector, address, number));
    }
  }
  std::vector<std::optional<std::string>> answers;
  GAPLESS_RETURN_IF_ERROR(
      CallAll(rpc, std::move(calls), latest, names,
              "--token-metadata off reads no token metadata and needs no "
              "eth_call, or use a node (or add an --rpc endpoint) that serves it",
              &answers));
  size_t k = 0;
  for (const auto& [address, s] : seen) {
    const size_t first = k;
    TokenMetadata m = ReadTokenMetadata([&](std::string_view selector) {
      for (size_t j = 0; j < std::size(kTokenSelectors); ++j) {
        if (kTokenSelectors[j] == selector) return answers[first + j];
      }
      return std::optional<std::string>();
    });
    k += std::size(kTokenSelectors);
    BlockData& d = (*blocks)[s.block];
    Token t;
    t.address = address;
    t.block_number = d.block.number;
    t.standard = s.standard;
    t.name = std::move(m.name);
    t.symbol = std::move(m.symbol);
    t.decimals = m.decimals;
    t.total_supply = m.total_supply;
    d.tokens.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

EnrichOptions EnrichWithStore(bool token_metadata, PgPool* pool) {
  EnrichOptions options;
  options.token_metadata = token_metadata;
  options.stored_tokens = [pool](const std::vector<std::string>& addresses) {
    auto conn = pool->Acquire();
    return StoredTokenBlocks(*conn, addresses);
  };
  return options;
}

Status EnrichRange(JsonRpcClient& rpc, const EnrichOptions& options,
                   std::vector<BlockData>* blocks) {
  if (blocks->empty()) return Status::Ok();
  for (BlockData& d : *blocks) d.tokens.clear();  // a retried enrichment starts again
  GAPLESS_RETURN_IF_ERROR(FetchCode(rpc, blocks));
  if (options.token_metadata) GAPLESS_RETURN_IF_ERROR(ReadTokens(rpc, options, blocks));
  return Status::Ok();
}

}  // namespace gapless

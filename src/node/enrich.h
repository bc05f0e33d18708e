// enrich: what a range's decoded blocks need from the node's state besides the blocks (issue 18),
// asked after decoding and before the write, so a range is still fetched whole or not at all:
//   - the deployed code of contracts created without traces (decode/contracts.h DeriveContracts
//     leaves it unknown): eth_getCode(address, block);
//   - the metadata of every token the range shows (a transfer of it, or an ERC-20/721 contract it
//     created) that is not stored below the range: name, symbol, decimals and total supply by
//     eth_call at the block of its first appearance in the range (decode/contracts.h
//     ReadTokenMetadata), into that block's BlockData::tokens. The store keeps each token's lowest
//     block (store/writer.h), so the result does not depend on which range commits first.
//
// "Stored below the range" is asked of PostgreSQL (store/queries.h StoredTokenBlocks), not a cache:
// a re-org's rollback deletes the tokens first seen above its fork point, and a range written
// again (replace mode deletes its tokens) must carry its own again.
//
// Answers: a call that reverts (rpc/json_rpc.h kRpcRevertedReason: JSON-RPC error 3, or geth's
// -32000 "execution reverted") is a missing method of the token, NULL. A node that does not serve
// eth_getCode or eth_call at all (-32601 "method not found"; over an RPC pool, no endpoint serves
// it) is no missing state: the range fails at once, FailedPrecondition, naming the method and what
// does without it (--token-metadata off; --traces gives contracts' code). Any other error of a
// call (a node without the state of that block: "missing trie node", "header not found"; a per-call
// limit) asks that contract or token again at "latest", logged once per process; an error there too
// fails the range with that error's code (Unavailable: retried), naming the method, address and
// block. Nothing is written without it.
//
// Thread-safety: stateless; the client is the caller's (one thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "rpc/json_rpc.h"
#include "store/pg.h"

namespace gapless {

struct EnrichOptions {
  // Read token metadata (--token-metadata, default on). Contracts' code is always asked.
  bool token_metadata = true;
  // The lowest block each of these token addresses is stored at (absent: not stored). nullptr:
  // none is known stored (every token of the range is read).
  std::function<Result<std::map<std::string, uint64_t>>(const std::vector<std::string>&)>
      stored_tokens;
};

// The options of a process that writes through `pool`: stored_tokens asks it.
EnrichOptions EnrichWithStore(bool token_metadata, PgPool* pool);

// Fills in the contracts' code and the tokens of `blocks` (a range, in order) over `rpc`.
Status EnrichRange(JsonRpcClient& rpc, const EnrichOptions& options,
                   std::vector<BlockData>* blocks);

}  // namespace gapless

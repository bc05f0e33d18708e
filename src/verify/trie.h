// trie: the root hash of a Merkle-Patricia trie (yellow paper, appendix D) built in one pass from
// all its key/value pairs, as Ethereum's "derivable lists" need (transactions, receipts,
// withdrawals: key = RLP(index), value = the item's encoding).
//
// Hexary nodes: a leaf [hex-prefix(path, leaf), value], an extension [hex-prefix(path), child],
// a branch [child0..child15, value]; a child whose encoding is under 32 bytes is inlined, others
// are referenced by their Keccak-256. The root is always hashed. Stateless, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "verify/keccak.h"

namespace gapless::verify {

// keccak(RLP("")): the root of a trie with no entries (an empty list's root).
inline constexpr std::string_view kEmptyTrieRootHex =
    "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421";

// The root of the trie holding these pairs. Keys must be distinct (a later duplicate is ignored:
// callers pass distinct keys by construction). Values must be non-empty.
Hash32 TrieRoot(const std::vector<std::pair<std::string, std::string>>& entries);

// The root of the trie mapping RLP(i) to values[i]: transactionsRoot, receiptsRoot,
// withdrawalsRoot.
Hash32 OrderedTrieRoot(const std::vector<std::string>& values);

// Hex-prefix encoding of a nibble path (each char 0..15) with the leaf flag (appendix C).
std::string HexPrefix(std::string_view nibbles, bool leaf);

}  // namespace gapless::verify

// The indexed data model: what one EVM block contributes to the database.
//
// decode/ fills these from JSON-RPC answers; store/ writes them; export reads them back.
// Hex fields (hashes, addresses, data) hold the node's hex text, lower-cased, with the "0x"
// prefix ("0x" alone for empty data). Quantities that fit 64 bits by protocol (gas, nonce,
// timestamps, indexes) are uint64_t; value-like quantities are U256. std::nullopt means the node
// did not send the field (or sent null), which is meaningful: e.g. receipt status is absent
// before Byzantium, base fee before London. Plain structs; no invariants beyond the comments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/u256.h"

namespace gapless {

struct Withdrawal {
  uint64_t index = 0;
  uint64_t validator_index = 0;
  std::string address;
  uint64_t amount_gwei = 0;
  bool operator==(const Withdrawal&) const = default;
};

struct Block {
  uint64_t number = 0;
  std::string hash;
  std::string parent_hash;
  std::string nonce;  // 8-byte hex data, not a quantity
  std::string sha3_uncles;
  std::string logs_bloom;
  std::string transactions_root;
  std::string state_root;
  std::string receipts_root;
  std::string miner;
  std::optional<std::string> mix_hash;
  U256 difficulty;
  std::optional<U256> total_difficulty;
  uint64_t size = 0;
  std::string extra_data;
  uint64_t gas_limit = 0;
  uint64_t gas_used = 0;
  uint64_t timestamp = 0;
  uint32_t transaction_count = 0;
  std::optional<U256> base_fee_per_gas;                 // London
  std::optional<std::string> withdrawals_root;          // Shanghai
  std::vector<Withdrawal> withdrawals;                  // Shanghai
  std::optional<uint64_t> blob_gas_used;                // Cancun
  std::optional<uint64_t> excess_blob_gas;              // Cancun
  std::optional<std::string> parent_beacon_block_root;  // Cancun
  std::optional<std::string> requests_hash;             // Prague
  bool operator==(const Block&) const = default;
};

// A transaction with its receipt's fields (one row in the transactions table).
struct Transaction {
  std::string hash;
  uint64_t block_number = 0;
  std::string block_hash;
  uint32_t transaction_index = 0;
  uint64_t nonce = 0;
  std::string from_address;
  std::optional<std::string> to_address;  // null for contract creation
  U256 value;
  uint64_t gas = 0;
  std::optional<U256> gas_price;
  std::string input;
  std::optional<uint8_t> transaction_type;             // null if the node omits "type"
  std::optional<U256> max_fee_per_gas;                 // type 2, 3, 4
  std::optional<U256> max_priority_fee_per_gas;        // type 2, 3, 4
  std::optional<U256> max_fee_per_blob_gas;            // type 3
  std::vector<std::string> blob_versioned_hashes;      // type 3
  std::optional<std::string> access_list_json;         // type 1+: the node's JSON, compact
  std::optional<std::string> authorization_list_json;  // type 4: the node's JSON, compact
  std::optional<uint64_t> chain_id;
  std::optional<std::string> v, r, s;
  std::optional<uint8_t> y_parity;

  // Receipt fields.
  uint64_t cumulative_gas_used = 0;
  uint64_t gas_used = 0;
  std::optional<std::string> contract_address;
  std::optional<std::string> root;  // pre-Byzantium post-state root
  std::optional<uint8_t> status;    // 1 success, 0 failure; null pre-Byzantium
  std::optional<U256> effective_gas_price;
  std::string receipt_logs_bloom;
  std::optional<uint64_t> blob_gas_used;
  std::optional<U256> blob_gas_price;
  uint32_t log_count = 0;
  bool operator==(const Transaction&) const = default;
};

struct Log {
  uint64_t block_number = 0;
  std::string block_hash;
  uint32_t log_index = 0;  // block-wide
  std::string transaction_hash;
  uint32_t transaction_index = 0;
  std::string address;
  std::string data;
  std::vector<std::string> topics;  // 0..4 entries
  bool removed = false;
  bool operator==(const Log&) const = default;
};

enum class TokenStandard : uint16_t { kErc20 = 20, kErc721 = 721, kErc1155 = 1155 };

const char* TokenStandardName(TokenStandard standard);  // "erc20", "erc721", "erc1155"

// One token movement. ERC-1155 TransferBatch yields one row per id (batch_index 0..n-1); every
// other kind has batch_index 0.
struct TokenTransfer {
  uint64_t block_number = 0;
  uint32_t log_index = 0;
  uint32_t batch_index = 0;
  std::string transaction_hash;
  std::string token_address;
  std::string from_address;
  std::string to_address;
  std::optional<std::string> operator_address;  // ERC-1155 only
  std::optional<U256> token_id;                 // ERC-721 and ERC-1155
  U256 value;                                   // ERC-20 amount, 1 for ERC-721, ERC-1155 amount
  TokenStandard standard = TokenStandard::kErc20;
  bool operator==(const TokenTransfer&) const = default;
};

// One trace: a call frame, a contract creation, a self-destruct, or a block or uncle reward (the
// last only from trace_block), in ethereum-etl's shape (issue 18). std::nullopt is an empty
// cell there. trace_address is the path of child indexes from the transaction's top frame ([] for
// the top frame itself).
struct Trace {
  uint64_t block_number = 0;
  std::optional<std::string> transaction_hash;  // none for rewards
  std::optional<uint32_t> transaction_index;    // none for rewards
  std::optional<std::string> from_address;
  std::optional<std::string> to_address;
  std::optional<U256> value;
  std::optional<std::string> input;
  std::optional<std::string> output;
  std::string trace_type;                  // call, create, create2, suicide, reward
  std::optional<std::string> call_type;    // call, callcode, delegatecall, staticcall
  std::optional<std::string> reward_type;  // block, uncle
  std::optional<uint64_t> gas;
  std::optional<uint64_t> gas_used;
  uint32_t subtraces = 0;
  std::vector<uint32_t> trace_address;
  std::optional<std::string> error;  // as the node wrote it ("Out of gas", "execution reverted")
  std::optional<int> status;         // 1, or 0 when it or an ancestor failed
  std::optional<std::string> trace_id;
  bool operator==(const Trace&) const = default;
};

// An internal transfer (issue 18, trace.internal_transfer events): a frame below the top level
// that moved value, i.e. a successful call (CALL: not DELEGATECALL, STATICCALL, or CALLCODE, which
// keeps the value in the caller), create, create2 or self-destruct with a value above 0. The SQL
// twin is kInternalTransferSql.
bool IsInternalTransfer(const Trace& t);
// The same predicate over the traces table's columns.
inline constexpr const char* kInternalTransferSql =
    "(trace_address <> '{}' AND value > 0 AND status = 1 AND"
    " (trace_type IN ('create', 'create2', 'suicide') OR call_type = 'call'))";

// One contract creation (issue 18): a deployment transaction's (from its receipt's
// contractAddress, or its top-level create trace) or a contract's CREATE/CREATE2 (from a trace,
// with --traces), successful only. A contract re-created at one address (CREATE2 after a
// self-destruct) has a row per creation.
struct Contract {
  uint64_t block_number = 0;
  std::string transaction_hash;
  uint32_t transaction_index = 0;
  std::vector<uint32_t> trace_address;  // the creating frame's; [] for a deployment transaction
  std::string address;
  std::string creator_address;  // who executed the creation: the sender, or the factory contract
  std::string creation_type;    // "create" or "create2"
  // The deployed code: the create trace's output, or eth_getCode at the block (node/enrich.h);
  // nullopt while not known (no traces and no RPC to ask).
  std::optional<std::string> bytecode;
  // From the bytecode (decode/contracts.h AnalyzeBytecode), as ethereum-etl derives them; empty
  // and false while the bytecode is not known.
  std::vector<std::string> function_sighashes;
  bool is_erc20 = false;
  bool is_erc721 = false;
  bool operator==(const Contract&) const = default;
};

// A token's metadata as read when it first appeared (issue 18: a transfer of it, or its creation
// as an ERC-20/721 contract): eth_call of its methods at that block (node/enrich.h). A method that
// is missing, reverts or answers garbage is nullopt (decode/contracts.h ReadTokenMetadata).
struct Token {
  std::string address;
  uint64_t block_number = 0;  // where it first appeared
  std::string standard;       // "erc20", "erc721", "erc1155"
  std::optional<std::string> name;
  std::optional<std::string> symbol;
  std::optional<uint32_t> decimals;
  std::optional<U256> total_supply;
  bool operator==(const Token&) const = default;
};

// Everything one block contributes: written in one transaction with the rest of its range.
struct BlockData {
  Block block;
  std::vector<Transaction> transactions;
  std::vector<Log> logs;
  std::vector<TokenTransfer> token_transfers;
  std::vector<Trace> traces;        // with --traces only; trace_index = the position here
  std::vector<Contract> contracts;  // contract_index = the position here
  // Written: the tokens first seen in this block, as far as the worker knew (node/enrich.h; the
  // store keeps each token's lowest block). Read back (store/reader.h ReadOptions::tokens): the
  // stored metadata of every token the block's transfers move, for the events.
  std::vector<Token> tokens;
  bool operator==(const BlockData&) const = default;
};

}  // namespace gapless

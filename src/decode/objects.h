// The readers of the JSON-RPC objects in a block's answers, one file per object: blocks.cc (a
// block, its transaction list and withdrawals), transactions.cc (a transaction), receipts.cc (a
// receipt and its logs). decode.cc parses the documents, calls these, and cross-checks what one
// object says about another.
//
// Internal to decode/. Each reader reads an object field by field in the order the node wrote it,
// looks the field up in a small per-object table and parses it straight into the model; unknown
// fields are skipped. Errors are InvalidData (FailedPrecondition for another chain's id) prefixed
// with where they happened (Where). Stateless, thread-safe.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "decode/json_fields.h"

namespace gapless::decode_internal {

namespace dom = simdjson::dom;

inline constexpr size_t kHashBytes = 32;
inline constexpr size_t kAddressBytes = 20;
inline constexpr size_t kMaxTopics = 4;

// Where an error happened; formatted only when one does:
// "block 17000000: receipt 3 (tx 0xab..): log 2".
struct Where {
  std::optional<uint64_t> block;
  const char* item = nullptr;  // "transaction", "receipt", "withdrawal"
  std::optional<size_t> index;
  std::string_view tx_hash;
  std::optional<size_t> log;

  std::string Prefix() const {
    std::string s;
    if (block || item == nullptr) {
      s = "block";
      if (block) s += " " + std::to_string(*block);
    }
    if (item != nullptr) {
      if (!s.empty()) s += ": ";
      s += item;
      if (index) s += " " + std::to_string(*index);
      if (!tx_hash.empty()) {
        s += " (tx ";
        s.append(tx_hash);
        s += ")";
      }
    }
    if (log) s += ": log " + std::to_string(*log);
    return s;
  }

  Status Wrap(const Status& st) const { return st.ok() ? st : st.WithContext(Prefix()); }
  Status Error(std::string_view field, const std::string& what) const {
    return Wrap(FieldError(field, what));
  }
};

inline std::string Mismatch(std::string_view got, std::string_view what,
                            std::string_view expected) {
  std::string s = QuoteForMessage(got);
  s += " does not match ";
  s.append(what);
  s += " ";
  s.append(expected);
  return s;
}

// What a receipt and its logs must agree with.
struct Expect {
  std::string_view block_hash;
  uint64_t block_number = 0;
  std::string_view tx_hash;
  uint32_t tx_index = 0;
  // False for a log read on its own (eth_getLogs): nothing to compare its fields with.
  bool compare = true;
};

enum class TxMode { kFull, kHeaderOnly };

// One log object of an eth_getLogs answer (expect.compare false).
Status DecodeLog(dom::element v, const Where& where, const Expect& expect, int64_t* last_log_index,
                 Log* log);

// Merges one receipt into *tx (which already holds the transaction) and appends its logs.
Status DecodeReceipt(dom::element v, const Where& where, const Expect& expect,
                     int64_t* last_log_index, Transaction* tx, std::vector<Log>* logs);

// Reads one transaction object. When a field is bad, the message still names the transaction by
// its hash if the object has a valid one (geth writes "hash" after blockHash, from, gas...).
Status DecodeTransaction(dom::element v, Where where, Transaction* tx);

// FailedPrecondition when the transaction names a chain id other than `expected` (when both are
// known).
Status CheckChainId(const Transaction& tx, std::optional<uint64_t> expected, const Where& where);

// Reads a block object. where->block is the requested number when known; otherwise it is set as
// soon as the number is read, so later messages name the block.
Status DecodeBlockObject(dom::element v, TxMode mode, Where* where, Block* block,
                         std::vector<Transaction>* txs);

}  // namespace gapless::decode_internal

// Block verification against the header (see verify.h).
#include "verify/verify.h"

#include <secp256k1.h>
#include <secp256k1_recovery.h>

#include <algorithm>
#include <cstring>

#include "verify/encode.h"
#include "verify/keccak.h"
#include "verify/trie.h"

namespace gapless {
namespace {

using verify::Bloom;
using verify::Hash32;

std::string BlockContext(const Block& block) { return "block " + std::to_string(block.number); }

std::string TxContext(const Transaction& tx, size_t i) {
  return "transaction " + std::to_string(i) + " (" + tx.hash + ")";
}

// Case-insensitive comparison of two hex texts (the model holds lower-case, a database row might
// not).
bool SameHex(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x >= 'A' && x <= 'Z' ? x + 32 : x) == (y >= 'A' && y <= 'Z' ? y + 32 : y);
         });
}

Status Mismatch(std::string message) {
  return InvalidData(std::move(message)).WithReason(std::string(kVerifyMismatchReason));
}

std::string BloomHex(const Bloom& bloom) {
  return verify::ToHex(std::string_view(reinterpret_cast<const char*>(bloom.data()), bloom.size()));
}

// The encodings of all transactions, in order; errors name the transaction.
Status EncodeTransactions(const std::vector<Transaction>& transactions,
                          std::vector<std::string>* encoded) {
  encoded->resize(transactions.size());
  for (size_t i = 0; i < transactions.size(); ++i) {
    Status st = verify::EncodeTransaction(transactions[i], &(*encoded)[i]);
    if (!st.ok()) return st.WithContext(TxContext(transactions[i], i));
  }
  return Status::Ok();
}

// data.logs grouped by transaction_index, each group in data.logs order.
Status GroupLogs(const BlockData& data, std::vector<std::vector<const Log*>>* groups) {
  groups->assign(data.transactions.size(), {});
  for (const Log& log : data.logs) {
    if (log.transaction_index >= data.transactions.size()) {
      return InvalidData("log " + std::to_string(log.log_index) + " names transaction index " +
                         std::to_string(log.transaction_index) + " but the block has " +
                         std::to_string(data.transactions.size()) + " transactions");
    }
    (*groups)[log.transaction_index].push_back(&log);
  }
  return Status::Ok();
}

// The receipts' encodings and blooms; with check_blooms, each computed bloom must equal the
// receipt's stored logsBloom.
Status EncodeReceipts(const BlockData& data, bool check_blooms, std::vector<std::string>* encoded,
                      Bloom* block_bloom) {
  std::vector<std::vector<const Log*>> groups;
  GAPLESS_RETURN_IF_ERROR(GroupLogs(data, &groups));
  encoded->resize(data.transactions.size());
  block_bloom->fill(0);
  for (size_t i = 0; i < data.transactions.size(); ++i) {
    const Transaction& tx = data.transactions[i];
    Bloom bloom;
    Status st = verify::BloomOfLogs(groups[i], &bloom);
    if (st.ok() && check_blooms) {
      std::string computed = BloomHex(bloom);
      if (!SameHex(computed, tx.receipt_logs_bloom)) {
        st = Mismatch("the receipt's logsBloom does not match its " +
                      std::to_string(groups[i].size()) + " logs");
      }
    }
    if (st.ok()) st = verify::EncodeReceipt(tx, bloom, groups[i], &(*encoded)[i]);
    if (!st.ok()) return st.WithContext(TxContext(tx, i));
    for (size_t b = 0; b < bloom.size(); ++b) (*block_bloom)[b] |= bloom[b];
  }
  return Status::Ok();
}

Status EncodeWithdrawals(const std::vector<Withdrawal>& withdrawals,
                         std::vector<std::string>* encoded) {
  encoded->resize(withdrawals.size());
  for (size_t i = 0; i < withdrawals.size(); ++i) {
    Status st = verify::EncodeWithdrawal(withdrawals[i], &(*encoded)[i]);
    if (!st.ok()) return st.WithContext("withdrawal " + std::to_string(i));
  }
  return Status::Ok();
}

Status CheckSender(const Transaction& tx) {
  GAPLESS_ASSIGN_OR_RETURN(std::string sender, RecoverSender(tx));
  if (!SameHex(sender, tx.from_address)) {
    return Mismatch("from is " + tx.from_address + " but the signature gives " + sender);
  }
  return Status::Ok();
}

Status VerifyBlockUncontexted(const BlockData& data, const VerifyOptions& options) {
  const Block& block = data.block;
  std::vector<std::string> encoded;
  GAPLESS_RETURN_IF_ERROR(EncodeTransactions(data.transactions, &encoded));
  for (size_t i = 0; i < encoded.size(); ++i) {
    std::string hash = verify::ToHex(verify::Keccak256(encoded[i]));
    const Transaction& tx = data.transactions[i];
    if (!SameHex(hash, tx.hash)) {
      return Mismatch(TxContext(tx, i) + ": hash is " + tx.hash + " but its fields give " + hash);
    }
  }
  bool has_blobs = std::any_of(data.transactions.begin(), data.transactions.end(),
                               [](const Transaction& tx) { return tx.transaction_type == 3; });
  std::string root = verify::ToHex(verify::OrderedTrieRoot(encoded));
  if (!(options.anvil_blob_sidecar_quirk && has_blobs) && !SameHex(root, block.transactions_root)) {
    return Mismatch("transactionsRoot is " + block.transactions_root +
                    " but the transactions give " + root);
  }

  Bloom bloom;
  GAPLESS_RETURN_IF_ERROR(EncodeReceipts(data, /*check_blooms=*/true, &encoded, &bloom));
  root = verify::ToHex(verify::OrderedTrieRoot(encoded));
  if (!SameHex(root, block.receipts_root)) {
    return Mismatch("receiptsRoot is " + block.receipts_root + " but the receipts give " + root);
  }
  if (!SameHex(BloomHex(bloom), block.logs_bloom)) {
    return Mismatch("logsBloom does not match the block's " + std::to_string(data.logs.size()) +
                    " logs");
  }

  if (block.withdrawals_root) {
    GAPLESS_RETURN_IF_ERROR(EncodeWithdrawals(block.withdrawals, &encoded));
    root = verify::ToHex(verify::OrderedTrieRoot(encoded));
    if (!SameHex(root, *block.withdrawals_root)) {
      return Mismatch("withdrawalsRoot is " + *block.withdrawals_root +
                      " but the withdrawals give " + root);
    }
  } else if (!block.withdrawals.empty()) {
    return Mismatch("the block has " + std::to_string(block.withdrawals.size()) +
                    " withdrawals but no withdrawalsRoot");
  }

  GAPLESS_ASSIGN_OR_RETURN(std::string hash, ComputeBlockHash(block));
  if (!SameHex(hash, block.hash)) {
    return Mismatch("hash is " + block.hash + " but the header gives " + hash);
  }

  if (options.recover_senders) {
    for (size_t i = 0; i < data.transactions.size(); ++i) {
      Status st = CheckSender(data.transactions[i]);
      if (!st.ok()) return st.WithContext(TxContext(data.transactions[i], i));
    }
  }
  return Status::Ok();
}

}  // namespace

Status VerifyBlock(const BlockData& data, const VerifyOptions& options) {
  return VerifyBlockUncontexted(data, options).WithContext(BlockContext(data.block));
}

Result<std::string> ComputeTransactionHash(const Transaction& tx) {
  std::string encoded;
  GAPLESS_RETURN_IF_ERROR(verify::EncodeTransaction(tx, &encoded));
  return verify::ToHex(verify::Keccak256(encoded));
}

Result<std::string> ComputeTransactionsRoot(const std::vector<Transaction>& transactions) {
  std::vector<std::string> encoded;
  GAPLESS_RETURN_IF_ERROR(EncodeTransactions(transactions, &encoded));
  return verify::ToHex(verify::OrderedTrieRoot(encoded));
}

Result<std::string> ComputeReceiptsRoot(const BlockData& data) {
  std::vector<std::string> encoded;
  Bloom bloom;
  GAPLESS_RETURN_IF_ERROR(EncodeReceipts(data, /*check_blooms=*/false, &encoded, &bloom));
  return verify::ToHex(verify::OrderedTrieRoot(encoded));
}

Result<std::string> ComputeWithdrawalsRoot(const std::vector<Withdrawal>& withdrawals) {
  std::vector<std::string> encoded;
  GAPLESS_RETURN_IF_ERROR(EncodeWithdrawals(withdrawals, &encoded));
  return verify::ToHex(verify::OrderedTrieRoot(encoded));
}

Result<std::string> ComputeLogsBloom(const std::vector<Log>& logs) {
  std::vector<const Log*> pointers;
  pointers.reserve(logs.size());
  for (const Log& log : logs) pointers.push_back(&log);
  Bloom bloom;
  GAPLESS_RETURN_IF_ERROR(verify::BloomOfLogs(pointers, &bloom));
  return BloomHex(bloom);
}

Result<std::string> ComputeValueBloom(std::string_view hex) {
  std::string bytes;
  if (!HexToBytes(hex, &bytes) || (bytes.size() != 20 && bytes.size() != 32)) {
    return InvalidData("\"" + std::string(hex) + "\" is not 0x hex of an address or a topic");
  }
  Bloom bloom;
  bloom.fill(0);
  verify::AddToBloom(&bloom, bytes);
  return BloomHex(bloom);
}

bool BloomContains(std::string_view bloom, std::string_view subset) {
  if (bloom.size() != subset.size() || subset.size() < 2) return false;
  auto digit = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t i = 2; i < subset.size(); ++i) {
    const int want = digit(subset[i]);
    if ((digit(bloom[i]) & want) != want) return false;
  }
  return true;
}

Result<std::string> ComputeBlockHash(const Block& block) {
  std::string encoded;
  GAPLESS_RETURN_IF_ERROR(verify::EncodeHeader(block, &encoded));
  return verify::ToHex(verify::Keccak256(encoded));
}

Result<std::string> RecoverSender(const Transaction& tx) {
  std::string payload;
  int recovery_id = 0;
  GAPLESS_RETURN_IF_ERROR(verify::EncodeSigningPayload(tx, &payload, &recovery_id));
  Hash32 message = verify::Keccak256(payload);
  std::string r, s;
  if (!tx.r || !verify::QuantityToBytes(*tx.r, &r)) return InvalidData("field \"r\" is malformed");
  if (!tx.s || !verify::QuantityToBytes(*tx.s, &s)) return InvalidData("field \"s\" is malformed");
  unsigned char compact[64] = {};
  memcpy(compact + 32 - r.size(), r.data(), r.size());
  memcpy(compact + 64 - s.size(), s.data(), s.size());
  // Recovery needs no precomputed tables: the static context serves it.
  const secp256k1_context* ctx = secp256k1_context_static;
  secp256k1_ecdsa_recoverable_signature signature;
  secp256k1_pubkey pubkey;
  if (!secp256k1_ecdsa_recoverable_signature_parse_compact(ctx, &signature, compact, recovery_id) ||
      !secp256k1_ecdsa_recover(ctx, &pubkey, &signature, message.data())) {
    return Mismatch("the signature (r, s, v) does not recover a public key");
  }
  unsigned char uncompressed[65];
  size_t size = sizeof uncompressed;
  secp256k1_ec_pubkey_serialize(ctx, uncompressed, &size, &pubkey, SECP256K1_EC_UNCOMPRESSED);
  Hash32 hash = verify::Keccak256(
      std::string_view(reinterpret_cast<const char*>(uncompressed) + 1, size - 1));
  return verify::ToHex(std::string_view(reinterpret_cast<const char*>(hash.data()) + 12, 20));
}

}  // namespace gapless

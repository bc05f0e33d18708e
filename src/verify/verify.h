// verify: proves a decoded block against its own header. Recomputes the transactionsRoot,
// receiptsRoot and withdrawalsRoot (RLP + Merkle-Patricia trie, typed transactions and receipts
// of types 0-4), each receipt's and the block's logsBloom from the logs, every transaction's hash
// and the block hash from the RLP of the header (every fork's fields up to Prague), and
// optionally each transaction's sender from its signature (secp256k1 recovery).
//
// It reads only the decoded model (core/model.h), so the same call serves a block straight from
// the node before its range commits and one rebuilt from PostgreSQL rows (`verify --deep`).
// See docs/verify.md for what is checked per fork and what is skipped for which chains.
//
// Errors (core/status.h retry policy):
//   kInvalidData        a mismatch (the node, the wire or the database changed something) or a
//                       field the encodings need is malformed: "block 17000000: receiptsRoot is
//                       0x.. but the receipts give 0x..". reason() is kVerifyMismatchReason for a
//                       mismatch. Retry the range a bounded number of times, then dead-letter it.
//   kFailedPrecondition the block does not follow Ethereum's rules, so it cannot be verified
//                       (OP deposit transactions 0x7e, Arbitrum's 0x64-0x6a, a header without
//                       mixHash): reason() is verify::kUnsupportedTxTypeReason or
//                       verify::kUnsupportedHeaderReason. A caller skips verification for such
//                       a chain (or block) rather than retrying.
// Thread-safe; allocates per call (no shared state beyond thread-local JSON parsers).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace gapless {

// Status::reason() of a verification mismatch (as opposed to a malformed field).
inline constexpr std::string_view kVerifyMismatchReason = "verify:mismatch";

struct VerifyOptions {
  // Also recover every transaction's sender from its signature and compare it with `from`
  // (--verify-senders). The most expensive check: one secp256k1 recovery per transaction.
  bool recover_senders = false;
  // anvil (checked with 1.7.1) keeps a blob transaction's sidecar (blobs, commitments, proofs)
  // in its blocks and computes transactionsRoot over that network form instead of the consensus
  // encoding, so no block of its holding a type-3 transaction has a canonical transactionsRoot
  // (the sidecar is not in the decoded model: the root cannot be rebuilt). With this set,
  // transactionsRoot is not compared for blocks holding a type-3 transaction; each transaction's
  // hash, the receipts root (which fixes the count and order through cumulativeGasUsed) and the
  // block hash still are. For anvil devnets only; a real chain never needs it.
  bool anvil_blob_sidecar_quirk = false;
};

// Runs every check, in this order, and returns the first failure: each transaction's hash,
// transactionsRoot (see anvil_blob_sidecar_quirk), each receipt's logsBloom, receiptsRoot, the
// block's logsBloom, withdrawalsRoot (a block without one must have no withdrawals), the block
// hash, and with recover_senders each sender. The logs are attached to their receipts by
// transaction_index, in the order of data.logs.
Status VerifyBlock(const BlockData& data, const VerifyOptions& options = {});

// The individual values, as lower-case 0x hex, for callers and tests. Errors as for VerifyBlock.
Result<std::string> ComputeTransactionHash(const Transaction& tx);
Result<std::string> ComputeTransactionsRoot(const std::vector<Transaction>& transactions);
// Receipts come from the transactions' receipt fields and data.logs; each receipt's bloom is
// computed from its logs.
Result<std::string> ComputeReceiptsRoot(const BlockData& data);
Result<std::string> ComputeWithdrawalsRoot(const std::vector<Withdrawal>& withdrawals);
Result<std::string> ComputeLogsBloom(const std::vector<Log>& logs);
// The bloom of one value as a log puts it into logsBloom (its three bits): an address or a topic,
// as 0x hex of 20 or 32 bytes. InvalidData naming the value when it is neither.
Result<std::string> ComputeValueBloom(std::string_view hex);
// True when every bit set in `subset` is set in `bloom` (both 0x hex of the same length, any
// case): the bloom admits what `subset` holds. A bloom has no false negatives: a log whose
// address or topic is missing from its block's logsBloom is not the block's. False when the
// lengths differ.
bool BloomContains(std::string_view bloom, std::string_view subset);
// keccak(RLP(header)) from the header's fields as stored (its roots are taken as they are).
Result<std::string> ComputeBlockHash(const Block& block);
// The address (lower-case 0x hex) that signed the transaction; InvalidData for a signature that
// does not recover.
Result<std::string> RecoverSender(const Transaction& tx);

}  // namespace gapless

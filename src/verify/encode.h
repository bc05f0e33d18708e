// encode: the consensus encodings of the decoded model's pieces, the bytes under every hash and
// root that verify.h checks: transactions (legacy and typed envelopes 0x01-0x04), their signing
// payloads, receipts, withdrawals, headers, and the 2048-bit logs bloom.
//
// Inputs are the decoded model (core/model.h), so the same code serves a block straight from the
// node and one read back from PostgreSQL. Errors:
//   kInvalidData        a field the encoding needs is missing or malformed; the message names it
//   kFailedPrecondition the block does not follow Ethereum's rules (a transaction type other than
//                       0-4, a header without mixHash), with reason() kUnsupportedTxTypeReason or
//                       kUnsupportedHeaderReason so a caller can skip such chains without parsing
//                       the message.
// Stateless, thread-safe (each thread reuses its own JSON parser).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/model.h"
#include "core/status.h"

namespace gapless::verify {

inline constexpr std::string_view kUnsupportedTxTypeReason = "verify:unsupported-tx-type";
inline constexpr std::string_view kUnsupportedHeaderReason = "verify:unsupported-header";

// The type a transaction is encoded as: its transaction_type, 0 when the node sent none
// (pre-Berlin nodes). FailedPrecondition (kUnsupportedTxTypeReason) for a type other than 0-4,
// e.g. OP's deposit 0x7e or Arbitrum's 0x64-0x6a.
Result<uint8_t> EncodedType(const Transaction& tx);

// The transaction as the trie and its hash hold it: RLP([...]) for legacy, type || RLP([...])
// for typed ones. Access and authorization lists are parsed from their JSON text.
Status EncodeTransaction(const Transaction& tx, std::string* out);

// What the sender signed (its keccak is the message hash) and the recovery id (0 or 1): EIP-155
// legacy with the chain id from v, pre-EIP-155 legacy (v 27/28), typed: type || RLP(fields
// without yParity, r, s).
Status EncodeSigningPayload(const Transaction& tx, std::string* out, int* recovery_id);

// 2048-bit bloom filter, big-endian as logsBloom is written.
using Bloom = std::array<uint8_t, 256>;
// Adds a value (an address or a topic) to the bloom: 3 bits from keccak(value).
void AddToBloom(Bloom* bloom, std::string_view bytes);
// The bloom of the logs' addresses and topics. InvalidData naming the log on bad hex.
Status BloomOfLogs(std::span<const Log* const> logs, Bloom* bloom);

// The receipt as the trie holds it: [type ||] RLP([status or post-state root,
// cumulativeGasUsed, bloom, [[address, [topics], data], ...]]), with the bloom given (the caller
// computed and checked it) and the transaction's logs in order.
Status EncodeReceipt(const Transaction& tx, const Bloom& bloom, std::span<const Log* const> logs,
                     std::string* out);

// RLP([index, validatorIndex, address, amountGwei]).
Status EncodeWithdrawal(const Withdrawal& withdrawal, std::string* out);

// RLP of the header with every field the block has, in fork order (Frontier's 15, then
// baseFeePerGas, withdrawalsRoot, blobGasUsed, excessBlobGas, parentBeaconBlockRoot,
// requestsHash). The later fields must be a contiguous run (InvalidData otherwise). A header
// without mixHash is FailedPrecondition (kUnsupportedHeaderReason).
Status EncodeHeader(const Block& block, std::string* out);

}  // namespace gapless::verify

// decode: turns JSON-RPC answers (blocks, transactions, receipts, logs) into the data model.
//
// The input is untrusted: every function validates what it reads (hex syntax and sizes, quantity
// ranges, JSON types, required fields) and the cross-references between a block, its transactions,
// receipts and logs, and returns an error instead of guessing. Errors carry the retry policy of
// core/status.h:
//   kInvalidData        malformed or inconsistent answer (retry the range a bounded number of
//                       times, then dead-letter it); the message names the block, the transaction
//                       (index and hash) or log where relevant, and the JSON field.
//   kNotFound           the node answered null: the block (or its receipts) does not exist yet.
//   kFailedPrecondition a transaction carries another chain's id: the node serves the wrong chain.
// Output hex text is lower-case with the 0x prefix. Quantities are exact (U256, never a double);
// 64-bit fields are stored as PostgreSQL BIGINT, so any above 2^63-1 is rejected.
//
// Both dialects in the wild decode: geth (removed, blockTimestamp, receipt from/to/type, no
// totalDifficulty) and Parity/OpenEthereum (author, sealFields, publicKey, raw, standardV,
// condition, creates, chainId:null, transactionLogIndex, log type:"mined"). Unknown fields are
// ignored without being parsed.
//
// All functions are thread-safe: each thread reuses its own parser (thread-local), so a decode
// allocates little beyond its output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace gapless {

struct DecodeOptions {
  uint64_t expected_number = 0;               // the block number that was requested
  std::optional<uint64_t> expected_chain_id;  // if set, every tx carrying chainId must match
};

// Decodes the `result` of eth_getBlockByNumber(n, true) and the block's receipts (a JSON array in
// transaction order, as eth_getBlockReceipts returns it; "[]" for a block without transactions)
// into one BlockData: the block (with withdrawals), its transactions merged with their receipt
// fields, its logs (block-wide log_index) and the token transfers extracted from the logs.
//
// Checks, besides the syntax of every field: block number == expected_number; one receipt per
// transaction; tx i and receipt i have transactionIndex i, the same hash, and the block's hash
// and number; every log has the block's hash and number and its receipt's transaction hash and
// index; log indexes strictly increase across the block; chainId (when present and not null) ==
// expected_chain_id when that is set (FailedPrecondition otherwise). A "null" block or receipts
// answer is NotFound. A block fetched with full=false (transaction hashes instead of objects) is
// InvalidData here: use DecodeBlockHeader for those.
//
// Takes std::string so it can use the string's spare capacity as simdjson padding: the text is
// copied only if capacity() - size() < SIMDJSON_PADDING (64). Reserve that much to avoid the copy.
Result<BlockData> DecodeBlock(const std::string& block_json, const std::string& receipts_json,
                              const DecodeOptions& options);

// Decodes only the header of an eth_getBlockByNumber / eth_getBlockByHash result, fetched with
// full=false (a list of transaction hashes) or full=true (transaction objects, which are counted
// but not decoded). transaction_count is the list's length. Checks the number against
// expected_number when that is set. "null" is NotFound.
Result<Block> DecodeBlockHeader(const std::string& block_json,
                                std::optional<uint64_t> expected_number = std::nullopt);

// Decodes an eth_getBlockReceipts result on its own, without the block's transactions (the
// events mode's --verify-complete: node/events_complete.cc): one Transaction per receipt holding
// only what the receipt says (hash, index, the receipt's "type", status or root,
// cumulativeGasUsed, gasUsed, logsBloom: what verify/ ComputeReceiptsRoot encodes), its block's
// hash and number, and the logs. Checks as DecodeBlock's for receipts: receipt i has
// transactionIndex i and the block's hash and number; every log its receipt's transaction hash
// and index and the block's hash and number; log indexes strictly increase. "null" is NotFound.
Result<BlockData> DecodeBlockReceipts(const std::string& receipts_json, std::string_view block_hash,
                                      uint64_t block_number);

// Decodes an eth_getLogs result (a JSON array of log objects) into logs, each field checked as in
// a receipt. The answer must be in chain order, each (block, log index) once, one hash per block;
// a log marked removed (the chain re-orged under the request) is InvalidData, so the request is
// made again.
Result<std::vector<Log>> DecodeLogsResult(const std::string& json);

// One transaction with its receipt, logs and token transfers.
struct TransactionData {
  Transaction transaction;
  std::vector<Log> logs;
  std::vector<TokenTransfer> token_transfers;
};

// Decodes an eth_getTransactionByHash result with its eth_getTransactionReceipt result (a mined
// transaction: blockHash, blockNumber and transactionIndex are required). Checks that the receipt
// and its logs belong to the transaction (hash, index, block hash and number) and, when
// expected_chain_id is set, the transaction's chainId. Either answer "null" is NotFound.
Result<TransactionData> DecodeTransactionWithReceipt(
    const std::string& tx_json, const std::string& receipt_json,
    std::optional<uint64_t> expected_chain_id = std::nullopt);

// Event signatures (keccak-256 of the canonical event signature), lower-case.
// Transfer(address,address,uint256): ERC-20 and ERC-721.
inline constexpr std::string_view kTransferTopic =
    "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
// TransferSingle(address,address,address,uint256,uint256): ERC-1155.
inline constexpr std::string_view kTransferSingleTopic =
    "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62";
// TransferBatch(address,address,address,uint256[],uint256[]): ERC-1155.
inline constexpr std::string_view kTransferBatchTopic =
    "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb";

// Token transfers carried by one log (topic comparison is case-insensitive):
//   ERC-20 Transfer: 3 topics + exactly 1 data word; value = the word.
//   ERC-721 Transfer: 4 topics + empty data; token_id = topic3, value = 1.
//   ERC-1155 TransferSingle: 4 topics (operator, from, to) + exactly 2 data words (id, value).
//   ERC-1155 TransferBatch: 4 topics + ABI-encoded (uint256[] ids, uint256[] values); one row per
//   id, batch_index 0..n-1. Offsets and lengths are bounds-checked, the arrays must be equally
//   long.
// Addresses are the low 20 bytes of a topic (the upper 12 bytes are not checked, as
// ethereum-etl does). A log of any other shape (e.g. a Transfer with 2 data words, malformed batch
// data, bad hex) yields nothing: that is not an error, the log itself is still stored.
std::vector<TokenTransfer> ExtractTokenTransfers(const Log& log);
// Same, appending to *out (no temporary vector).
void AppendTokenTransfers(const Log& log, std::vector<TokenTransfer>* out);

// Parses a block number quantity ("0x10d4f", e.g. eth_blockNumber's result without the quotes):
// InvalidData unless it is 0x-prefixed hex and at most 2^63-1.
Result<uint64_t> ParseBlockNumberQuantity(std::string_view hex);

// Parses a JSON-RPC result that is one quantity string, e.g. eth_blockNumber's or eth_chainId's
// `"0x36"` (with the quotes, as it appears in the response). `what` names it in error messages.
// InvalidData for anything else, or for a value above 2^63-1.
Result<uint64_t> DecodeQuantityResult(const std::string& json, std::string_view what);

}  // namespace gapless

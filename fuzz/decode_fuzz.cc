// libFuzzer target for decode/: feeds arbitrary bytes to DecodeBlock, DecodeBlockHeader,
// DecodeTransactionWithReceipt, DecodeQuantityResult and ExtractTokenTransfers. Nothing may crash,
// hang, leak or trip ASan/UBSan, and a successful decode must satisfy the invariants checked below
// (a violation aborts, so the fuzzer reports it like a crash).
//
// Input layout: <block JSON> NUL <receipts JSON> [NUL <selector byte> <ABI data bytes>]
//   - the first two parts also serve as <transaction JSON> NUL <receipt JSON>;
//   - the optional third part builds one log: the selector picks the event (Transfer,
//     TransferSingle, TransferBatch) and the topic count, the bytes become the log's hex data,
//     so the fuzzer drives the ABI decoding of ERC-1155 batches directly.
// run.sh builds this with clang-14 and seeds the corpus from the shared fixtures.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "decode/decode.h"

namespace {

using namespace gapless;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "decode_fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

bool IsLowerHex(const std::string& s, size_t bytes) {
  if (s.size() < 2 || s[0] != '0' || s[1] != 'x' || s.size() % 2 != 0) return false;
  if (bytes != 0 && s.size() != 2 + 2 * bytes) return false;
  for (size_t i = 2; i < s.size(); ++i) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void CheckTransfers(const Log& log, const std::vector<TokenTransfer>& transfers) {
  for (size_t i = 0; i < transfers.size(); ++i) {
    const TokenTransfer& t = transfers[i];
    Check(t.log_index == log.log_index, "transfer log_index");
    Check(t.standard == TokenStandard::kErc1155 || t.batch_index == 0,
          "batch_index only in batches");
    Check(IsLowerHex(t.from_address, 20) && IsLowerHex(t.to_address, 20), "transfer addresses");
    Check(t.standard != TokenStandard::kErc721 || t.value == U256(1), "ERC-721 value is 1");
  }
}

void CheckBlockData(const BlockData& data, const DecodeOptions& options) {
  const Block& b = data.block;
  Check(b.number == options.expected_number, "block number");
  Check(IsLowerHex(b.hash, 32) && IsLowerHex(b.parent_hash, 32), "block hashes");
  Check(IsLowerHex(b.miner, 20), "miner");
  Check(b.transaction_count == data.transactions.size(), "transaction_count");
  Check(b.number <= static_cast<uint64_t>(INT64_MAX), "BIGINT range");
  size_t logs = 0;
  for (size_t i = 0; i < data.transactions.size(); ++i) {
    const Transaction& tx = data.transactions[i];
    Check(tx.transaction_index == i, "transaction_index");
    Check(tx.block_hash == b.hash && tx.block_number == b.number, "transaction block");
    Check(IsLowerHex(tx.hash, 32) && IsLowerHex(tx.from_address, 20), "transaction hex");
    Check(IsLowerHex(tx.input, 0), "input");
    Check(!tx.status || *tx.status <= 1, "status");
    Check(!options.expected_chain_id || !tx.chain_id || tx.chain_id == options.expected_chain_id,
          "chain id");
    logs += tx.log_count;
  }
  Check(logs == data.logs.size(), "log_count sum");
  size_t transfers = 0;
  for (size_t i = 0; i < data.logs.size(); ++i) {
    const Log& log = data.logs[i];
    Check(i == 0 || log.log_index > data.logs[i - 1].log_index, "log indexes increase");
    Check(log.block_hash == b.hash && log.block_number == b.number, "log block");
    Check(log.topics.size() <= 4, "topics");
    Check(IsLowerHex(log.address, 20) && IsLowerHex(log.data, 0), "log hex");
    std::vector<TokenTransfer> t = ExtractTokenTransfers(log);
    CheckTransfers(log, t);
    transfers += t.size();
  }
  Check(transfers == data.token_transfers.size(), "token transfers");
}

const std::string kTopicFrom = "0x0000000000000000000000001111111111111111111111111111111111111111";
const std::string kTopicTo = "0x0000000000000000000000002222222222222222222222222222222222222222";
const std::string kTopicOperator =
    "0x0000000000000000000000003333333333333333333333333333333333333333";

void FuzzLog(std::string_view part) {
  if (part.empty()) return;
  auto selector = static_cast<uint8_t>(part[0]);
  std::string_view bytes = part.substr(1);
  Log log;
  log.log_index = selector;
  log.address = "0x4444444444444444444444444444444444444444";
  switch (selector % 3) {
    case 0:
      log.topics = {std::string(kTransferTopic), kTopicFrom, kTopicTo};
      break;
    case 1:
      log.topics = {std::string(kTransferSingleTopic), kTopicOperator, kTopicFrom, kTopicTo};
      break;
    case 2:
      log.topics = {std::string(kTransferBatchTopic), kTopicOperator, kTopicFrom, kTopicTo};
      break;
  }
  if (selector & 0x10) log.topics.push_back(kTopicTo);  // 4 topics for Transfer (ERC-721 shape)
  if (selector & 0x20) log.topics.pop_back();           // wrong topic counts
  if (selector & 0x40) {
    log.data.assign(bytes);  // raw text: bad hex, missing prefix, odd length
  } else {
    static const char* kDigits = "0123456789abcdef";
    log.data = "0x";
    for (char c : bytes) {
      log.data.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
      log.data.push_back(kDigits[static_cast<uint8_t>(c) & 0xf]);
    }
  }
  std::vector<TokenTransfer> transfers = ExtractTokenTransfers(log);
  CheckTransfers(log, transfers);
  if (transfers.size() > 1) {
    for (size_t i = 0; i < transfers.size(); ++i) {
      Check(transfers[i].batch_index == i, "batch_index runs 0..n-1");
      Check(transfers[i].standard == TokenStandard::kErc1155, "only batches yield several rows");
    }
    // At least a length word and n words (the two arrays may overlap) lie inside the data.
    Check((transfers.size() + 1) * 32 <= bytes.size(), "batch rows bounded by the data");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t sep = input.find('\0');
  std::string first(input.substr(0, sep));
  std::string second = "[]";
  std::string_view third;
  if (sep != std::string_view::npos) {
    std::string_view rest = input.substr(sep + 1);
    size_t sep2 = rest.find('\0');
    second.assign(rest.substr(0, sep2));
    if (sep2 != std::string_view::npos) third = rest.substr(sep2 + 1);
  }

  // The header decode tells the number to expect, so DecodeBlock gets past the number check.
  Result<Block> header = DecodeBlockHeader(first);
  if (header.ok()) {
    Check(header->number <= static_cast<uint64_t>(INT64_MAX), "header BIGINT range");
    Check(DecodeBlockHeader(first, header->number).ok(), "header decode is deterministic");
  }
  DecodeOptions options;
  options.expected_number = header.ok() ? header->number : 0;
  if (size % 2 == 1) options.expected_chain_id = 1;
  Result<BlockData> block = DecodeBlock(first, second, options);
  if (block.ok()) {
    CheckBlockData(*block, options);
  } else {
    Check(!block.status().message().empty(), "error message");
  }

  Result<TransactionData> tx =
      DecodeTransactionWithReceipt(first, second, options.expected_chain_id);
  if (tx.ok()) {
    Check(tx->transaction.log_count == tx->logs.size(), "single tx log_count");
    for (const Log& log : tx->logs) Check(log.transaction_hash == tx->transaction.hash, "log tx");
  }

  (void)DecodeQuantityResult(first, "fuzz");
  (void)ParseBlockNumberQuantity(first);
  FuzzLog(third);
  return 0;
}

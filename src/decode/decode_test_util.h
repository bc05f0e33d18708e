// Test helpers for decode/: fixture files, CSV and .io readers, and independent checks of a
// decoded model against the JSON it came from (re-read with simdjson's DOM API, so a bug in the
// decoder's own reading cannot hide in the check).
#pragma once

#include <simdjson.h>

#include <map>
#include <string>
#include <vector>

#include "core/model.h"

namespace gapless::testing {

// GAPLESS_FIXTURES_DIR + "/" + relative.
std::string Fixture(const std::string& relative);
// The file's content; an empty string and a test failure if it cannot be read.
std::string ReadFile(const std::string& path);

// The compact JSON text of a JSON-RPC envelope's "result" member.
std::string ResultOf(const std::string& envelope_json);

// An execution-apis .io file: ">> request" and "<< response" lines (comments skipped).
struct IoExchange {
  std::string request;
  std::string response;
};
std::vector<IoExchange> ReadIo(const std::string& path);
// The compact "result" of the first response in an .io file.
std::string IoResult(const std::string& path);

// A CSV file as rows of column -> cell (Python csv excel dialect: quotes, "" escapes).
struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};
Csv ReadCsv(const std::string& path);

// The ethereum-etl CSV cells (MANIFEST §2) of a decoded row.
std::map<std::string, std::string> BlockCells(const Block& block);
std::map<std::string, std::string> TransactionCells(const Transaction& tx, const Block& block);
std::map<std::string, std::string> ReceiptCells(const Transaction& tx);
std::map<std::string, std::string> LogCells(const Log& log);
std::map<std::string, std::string> TransferCells(const TokenTransfer& transfer);

// Expects every column of `expected` (a CSV row) to equal actual[column]; an unknown column fails.
void ExpectCells(const std::map<std::string, std::string>& expected,
                 const std::map<std::string, std::string>& actual);

// Checks every member of the JSON object against the decoded value; a member the check does not
// know fails the test (so a new field cannot go unchecked).
void ExpectBlockMatchesJson(const Block& block, simdjson::dom::object json);
// full=true block: also every transaction; receipts (may be empty for header-only checks):
// every receipt and log.
void ExpectBlockDataMatchesJson(const BlockData& data, simdjson::dom::object block_json,
                                simdjson::dom::array receipts_json);
void ExpectTransactionMatchesJson(const Transaction& tx, simdjson::dom::object json,
                                  const Block* block);
void ExpectReceiptMatchesJson(const Transaction& tx, const std::vector<Log>& tx_logs,
                              simdjson::dom::object json);
void ExpectLogMatchesJson(const Log& log, simdjson::dom::object json);

// Decimal text of a hex quantity ("0x1a" -> "26"), computed with U256 independently of decode/.
std::string HexToDecimal(std::string_view hex);
std::string Lower(std::string_view text);

// Replaces the n-th (0-based) occurrence of `from` in *text with `to`; fails the test if absent.
void ReplaceNth(std::string* text, const std::string& from, const std::string& to, size_t n = 0);

}  // namespace gapless::testing

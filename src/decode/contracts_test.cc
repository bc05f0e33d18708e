// AnalyzeBytecode and ReadTokenMetadata against ethereum-etl's contract and token cases
// (../shared/fixtures/ethereum-etl, TRACES.md), then the odd tokens: reverts, garbage, bytes32
// names, invalid UTF-8, decimals that do not fit uint8.
#include "decode/contracts.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "decode/decode_test_util.h"

namespace gapless {
namespace {

using testing::Fixture;
using testing::ReadCsv;
using testing::ReadFile;

const std::string kDir = "ethereum-etl/tests/resources/";

// The JSON string of a JSON-RPC answer's "result" (eth_getCode, eth_call).
std::string ResultString(const std::string& envelope) {
  simdjson::dom::parser parser;
  std::string_view result;
  EXPECT_EQ(parser.parse(envelope)["result"].get_string().get(result), simdjson::SUCCESS);
  return std::string(result);
}

void ExpectContractLine(const std::string& line, const ContractInfo& info) {
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  ASSERT_EQ(parser.parse(line).get(e), simdjson::SUCCESS) << line;
  std::vector<std::string> sighashes;
  simdjson::dom::array list;
  ASSERT_EQ(e["function_sighashes"].get_array().get(list), simdjson::SUCCESS);
  for (simdjson::dom::element s : list) {
    sighashes.emplace_back(s.get_string().value());
  }
  EXPECT_EQ(info.function_sighashes, sighashes);
  EXPECT_EQ(info.is_erc20, e["is_erc20"].get_bool().value());
  EXPECT_EQ(info.is_erc721, e["is_erc721"].get_bool().value());
}

TEST(ContractsTest, BytecodeAnalysisEqualsEthereumEtls) {
  // CryptoKitties, by eth_getCode: an ERC-721 with 60 selectors.
  const std::string dir = Fixture(kDir + "test_export_contracts_job/erc721_contract");
  const std::string code = ResultString(ReadFile(
      dir + "/web3_response.eth_getCode_0x06012c8cf97bead5deae237070f9587f8e7a266d_latest.json"));
  const ContractInfo kitties = AnalyzeBytecode(code);
  EXPECT_EQ(kitties.function_sighashes.size(), 60u);
  EXPECT_TRUE(kitties.is_erc721);
  ExpectContractLine(ReadFile(dir + "/expected_contracts.json"), kitties);
  // The stream cases: the bytecode is a create trace's output (in the expected line itself).
  for (const char* block : {"blocks_508110_508110", "blocks_2112234_2112234"}) {
    SCOPED_TRACE(block);
    const std::string line =
        ReadFile(Fixture(kDir + "test_stream/" + block) + "/expected_contracts.json");
    simdjson::dom::parser parser;
    std::string_view bytecode;
    ASSERT_EQ(parser.parse(line)["bytecode"].get_string().get(bytecode), simdjson::SUCCESS);
    ExpectContractLine(line, AnalyzeBytecode(bytecode));
  }
  EXPECT_TRUE(AnalyzeBytecode("0x").function_sighashes.empty());
  EXPECT_TRUE(AnalyzeBytecode("").function_sighashes.empty());
  // A PUSH4 cut off by the end of the code is not a selector; push data is skipped (the 0x63
  // inside PUSH2's operand is not an opcode); the sweep ends at the first JUMPDEST.
  EXPECT_EQ(AnalyzeBytecode("0x6163aabbccdd").function_sighashes, std::vector<std::string>{});
  EXPECT_EQ(AnalyzeBytecode("0x63AABBCCDD5b6311223344").function_sighashes,
            std::vector<std::string>{"0xaabbccdd"});
  EXPECT_EQ(AnalyzeBytecode("0x6311223344").function_sighashes,
            std::vector<std::string>{"0x11223344"});
}

// The recorded eth_call answers of a folder, by selector; a selector without a file reverted.
auto Recorded(const std::string& dir, const std::string& token, std::map<std::string, int>* asked) {
  return [dir, token, asked](std::string_view selector) -> std::optional<std::string> {
    ++(*asked)[std::string(selector)];
    const std::string path = dir + "/web3_response.eth_call_data_" + std::string(selector) +
                             "_to_" + token + "_latest.json";
    if (!std::filesystem::exists(path)) return std::nullopt;
    return ResultString(ReadFile(path));
  };
}

std::string Cell(const std::optional<std::string>& s) { return s.value_or(""); }

TEST(ContractsTest, TokenMetadataEqualsEthereumEtls) {
  struct Case {
    std::string folder, token;
  };
  for (const Case& c :
       {Case{"token_with_invalid_data", "0xf763be8b3263c268e9789abfb3934564a7b80054"},
        Case{"token_with_alternative_return_type", "0x86fa049857e0209aa7d9e616f7eb3b3b78ecfdb0"}}) {
    SCOPED_TRACE(c.folder);
    const std::string dir = Fixture(kDir + "test_export_tokens_job/" + c.folder);
    std::map<std::string, int> asked;
    const TokenMetadata m = ReadTokenMetadata(Recorded(dir, c.token, &asked));
    testing::Csv csv = ReadCsv(dir + "/expected_tokens.csv");
    ASSERT_EQ(csv.rows.size(), 1u);
    const auto& row = csv.rows[0];
    EXPECT_EQ(row.at("address"), c.token);
    EXPECT_EQ(Cell(m.symbol), row.at("symbol"));
    EXPECT_EQ(Cell(m.name), row.at("name"));
    EXPECT_EQ(m.decimals.has_value() ? std::to_string(*m.decimals) : "", row.at("decimals"));
    EXPECT_EQ(m.total_supply.has_value() ? m.total_supply->ToDecimal() : "",
              row.at("total_supply"));
    for (const auto& [selector, times] : asked) EXPECT_EQ(times, 1) << selector;
  }
  // The stream case: symbol and name an empty string (offset 0x20, length 0), 0 and 0.
  const std::string dir = Fixture(kDir + "test_stream/blocks_2112234_2112234");
  std::map<std::string, int> asked;
  const TokenMetadata m =
      ReadTokenMetadata(Recorded(dir, "0xdbdacfc9eb9d42559ac1efbdb40460c728139e6a", &asked));
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  const std::string line = ReadFile(dir + "/expected_tokens.json");
  ASSERT_EQ(parser.parse(line).get(e), simdjson::SUCCESS);
  EXPECT_EQ(m.symbol, std::string(e["symbol"].get_string().value()));
  EXPECT_EQ(m.name, std::string(e["name"].get_string().value()));
  EXPECT_EQ(m.decimals, e["decimals"].get_uint64().value());
  EXPECT_EQ(m.total_supply, U256(e["total_supply"].get_uint64().value()));
}

std::string Word(uint64_t v) {
  char buf[65];
  std::snprintf(buf, sizeof(buf), "%064llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string HexOf(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  out.resize(((out.size() + 63) / 64) * 64, '0');
  return out;
}

// Non-standard tokens never fail: what does not decode is nullopt, and the fallbacks are tried.
TEST(ContractsTest, OddTokensGiveNullsNotErrors) {
  // A token where everything reverts.
  const TokenMetadata none = ReadTokenMetadata([](std::string_view) { return std::nullopt; });
  EXPECT_EQ(none, TokenMetadata{});
  // MKR-style: bytes32 symbol and name; decimals() too large for uint8, DECIMALS() answers 9.
  std::map<std::string_view, std::string> answers = {
      {kSelectorSymbol, "0x" + HexOf("MKR")},
      {kSelectorName, "0x" + HexOf("Maker")},
      {kSelectorDecimals, "0x" + Word(256)},
      {kSelectorDecimalsUpper, "0x" + Word(9)},
      {kSelectorTotalSupply, "0x"}};  // an empty answer: not a number
  const TokenMetadata mkr =
      ReadTokenMetadata([&](std::string_view s) -> std::optional<std::string> {
        auto it = answers.find(s);
        return it == answers.end() ? std::nullopt : std::optional<std::string>(it->second);
      });
  EXPECT_EQ(mkr.symbol, "MKR");
  EXPECT_EQ(mkr.name, "Maker");
  EXPECT_EQ(mkr.decimals, 9u);
  EXPECT_FALSE(mkr.total_supply.has_value());
  // A proper string; NULs removed.
  EXPECT_EQ(AbiString("0x" + Word(32) + Word(5) + HexOf(std::string("US\0DC", 5))), "USDC");
  // An offset or a length past the data, a length above 64 bits, odd hex: no string.
  EXPECT_EQ(AbiString("0x" + Word(64) + Word(3)), std::nullopt);
  EXPECT_EQ(AbiString("0x" + Word(32) + Word(40) + HexOf("short")), std::nullopt);
  EXPECT_EQ(AbiString("0x" + Word(32) + std::string(64, 'f')), std::nullopt);
  EXPECT_EQ(AbiString("0x123"), std::nullopt);
  // Invalid UTF-8 (a lone continuation byte, an overlong NUL, a surrogate): no string.
  for (std::string bad :
       {std::string("\x80"), std::string("\xc0\x80"), std::string("\xed\xa0\x80")}) {
    EXPECT_EQ(AbiString("0x" + Word(32) + Word(bad.size()) + HexOf(bad)), std::nullopt);
    EXPECT_EQ(AbiBytes32String("0x" + HexOf(bad)), std::nullopt);
  }
  EXPECT_EQ(AbiString("0x" + Word(32) + Word(4) + HexOf("\xe2\x82\xac!")), "\xe2\x82\xac!");
  EXPECT_EQ(AbiUint("0x" + Word(255), 8), U256(255));
  EXPECT_EQ(AbiUint("0x" + Word(256), 8), std::nullopt);
  EXPECT_EQ(AbiUint("0x" + std::string(62, '0'), 256), std::nullopt);  // 31 bytes
}

}  // namespace
}  // namespace gapless

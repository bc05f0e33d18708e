#include "verify/verify_test_util.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <fstream>
#include <sstream>

#include "decode/decode.h"

namespace gapless::verify_testing {

std::string ReadFixture(const std::string& relative) {
  std::string path = std::string(GAPLESS_FIXTURES_DIR) + "/" + relative;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string IoResult(const std::string& relative) {
  std::istringstream lines(ReadFixture(relative));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("<< ", 0) != 0) continue;
    simdjson::dom::parser parser;
    simdjson::dom::element result = parser.parse(line.substr(3))["result"];
    return simdjson::minify(result);
  }
  ADD_FAILURE() << relative << " has no response line";
  return "";
}

const BlockData& Mainnet17000000() {
  static const BlockData* data = [] {
    DecodeOptions options;
    options.expected_number = 17000000;
    options.expected_chain_id = 1;
    auto decoded = DecodeBlock(ReadFixture("mainnet/17000000/block.json"),
                               ReadFixture("mainnet/17000000/receipts.json"), options);
    EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
    return new BlockData(decoded.ok() ? std::move(decoded).value() : BlockData{});
  }();
  return *data;
}

}  // namespace gapless::verify_testing

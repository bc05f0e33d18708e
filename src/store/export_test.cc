#include "store/export.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

std::string Csv(std::string_view field) {
  std::string out;
  AppendCsvField(field, &out);
  return out;
}

TEST(CsvField, QuotesLikePythonMinimalQuoting) {
  EXPECT_EQ(Csv(""), "");
  EXPECT_EQ(Csv("0xabc"), "0xabc");
  EXPECT_EQ(Csv("a,b"), "\"a,b\"");
  EXPECT_EQ(Csv("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(Csv("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(Csv("cr\r"), "\"cr\r\"");
  EXPECT_EQ(Csv("{\"index\":1}"), "\"{\"\"index\"\":1}\"");
  EXPECT_EQ(Csv("tab\there"), "tab\there");  // a tab is not special for the excel dialect
}

TEST(ParseExportTable, KnowsTheEightTables) {
  for (const char* name : {"blocks", "transactions", "receipts", "logs", "token_transfers",
                           "traces", "contracts", "tokens"}) {
    auto t = ParseExportTable(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_STREQ(ExportTableName(*t), name);
  }
  EXPECT_EQ(ParseExportTable("withdrawals").status().code(), Code::kFailedPrecondition);
}

TEST(ParseTokenStandards, AcceptsSubsetsAndRejectsTypos) {
  auto s = ParseTokenStandards("erc20, erc1155,erc20");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<TokenStandard>{TokenStandard::kErc20, TokenStandard::kErc1155}));
  auto bad = ParseTokenStandards("erc20,erc712");
  EXPECT_EQ(bad.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("erc712"), std::string::npos);
  EXPECT_FALSE(ParseTokenStandards("").ok());
}

}  // namespace
}  // namespace gapless

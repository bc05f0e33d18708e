#include <gtest/gtest.h>

#include "store/pg.h"

namespace gapless {
namespace {

TEST(PgUrlWithDatabase, ReplacesOnlyTheDatabase) {
  EXPECT_EQ(*PgUrlWithDatabase("postgresql://u:p@h:1/postgres?sslmode=disable", "t1"),
            "postgresql://u:p@h:1/t1?sslmode=disable");
  EXPECT_EQ(*PgUrlWithDatabase("postgresql://u@h:1", "t1"), "postgresql://u@h:1/t1");
  EXPECT_EQ(*PgUrlWithDatabase("host=h port=1", "t1"), "host=h port=1 dbname='t1'");
}

TEST(PgConnect, BadUrlIsFailedPreconditionWithoutThePassword) {
  auto conn = PgConn::Connect("postgresql://u:hunter2@h:notaport/db");
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), Code::kFailedPrecondition) << conn.status().ToString();
  EXPECT_EQ(conn.status().message().find("hunter2"), std::string::npos) << conn.status().ToString();
  EXPECT_NE(conn.status().message().find("postgresql://***@h:notaport/db"), std::string::npos)
      << conn.status().ToString();
}

TEST(PgQuoteIdent, DoublesQuotes) { EXPECT_EQ(PgQuoteIdent("a\"b"), "\"a\"\"b\""); }

}  // namespace
}  // namespace gapless

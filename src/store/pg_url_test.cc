#include <gtest/gtest.h>

#include "store/pg.h"

namespace gapless {
namespace {

TEST(RedactPgUrl, HidesThePasswordInEveryForm) {
  EXPECT_EQ(RedactPgUrl("postgresql://alice:s3cret@db.example:5432/chain1"),
            "postgresql://alice:***@db.example:5432/chain1");
  EXPECT_EQ(RedactPgUrl("postgres://alice:s3cret@db/x?sslmode=require&password=other"),
            "postgres://alice:***@db/x?sslmode=require&password=***");
  EXPECT_EQ(RedactPgUrl("host=db port=5432 password=s3cret dbname=x"),
            "host=db port=5432 password=*** dbname=x");
  EXPECT_EQ(RedactPgUrl("host=db password = 'it''s secret' user=a"), "host=db password=*** user=a");
  EXPECT_EQ(RedactPgUrl("password='a\\'b c' host=h"), "password=*** host=h");
  // Nothing to hide.
  EXPECT_EQ(RedactPgUrl("postgresql://gapless@127.0.0.1:55433/postgres"),
            "postgresql://gapless@127.0.0.1:55433/postgres");
}

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
  EXPECT_NE(conn.status().message().find("postgresql://u:***@h:notaport/db"), std::string::npos)
      << conn.status().ToString();
}

TEST(PgQuoteIdent, DoublesQuotes) { EXPECT_EQ(PgQuoteIdent("a\"b"), "\"a\"\"b\""); }

}  // namespace
}  // namespace gapless

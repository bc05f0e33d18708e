// Migrations against a real PostgreSQL: apply once, re-run is a no-op, concurrent starters, and
// refusing a schema newer than the binary.
#include <gtest/gtest.h>

#include <thread>

#include "store/migrate.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

std::string AppliedRows(PgConn& conn) {
  auto res = conn.Query(
      "SELECT string_agg(version || ':' || name || '@' || applied_at, ',' ORDER BY version)"
      " FROM schema_migrations");
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? std::string(res->Get(0, 0)) : "";
}

TEST(Migrate, AppliesEveryVersionOnceAndRerunIsANoOp) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  auto conn = db.Connect();
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  ASSERT_FALSE(AppliedMigrations(**conn).ok());  // no schema_migrations yet
  Status st = Migrate(**conn);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto applied = AppliedMigrations(**conn);
  ASSERT_TRUE(applied.ok());
  std::vector<int> expected;
  for (const auto& m : KnownMigrations()) expected.push_back(m.version);
  EXPECT_EQ(*applied, expected);
  EXPECT_EQ(applied->back(), LatestSchemaVersion());
  for (const char* table : {"blocks", "withdrawals", "transactions", "logs", "token_transfers",
                            "traces", "indexed_ranges", "indexer_state"}) {
    auto res = (*conn)->Query("SELECT to_regclass($1) IS NOT NULL", {std::string(table)});
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->Get(0, 0), "t") << table;
  }
  std::string before = AppliedRows(**conn);
  st = Migrate(**conn);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(AppliedRows(**conn), before);  // nothing re-applied, applied_at unchanged
}

TEST(Migrate, ConcurrentStartersAllSucceedAndApplyOnce) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  constexpr int kStarters = 4;
  std::vector<std::unique_ptr<PgConn>> conns;
  for (int i = 0; i < kStarters; ++i) {
    auto c = db.Connect();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    conns.push_back(std::move(*c));
  }
  std::vector<Status> results(kStarters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStarters; ++i) {
    threads.emplace_back([&, i] { results[i] = Migrate(*conns[i]); });
  }
  for (auto& t : threads) t.join();
  for (const auto& st : results) EXPECT_TRUE(st.ok()) << st.ToString();
  auto res = conns[0]->Query("SELECT count(*) FROM schema_migrations");
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->Get(0, 0), std::to_string(KnownMigrations().size()));
}

TEST(Migrate, RefusesASchemaNewerThanTheBinary) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  auto conn = db.ConnectMigrated();
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  ASSERT_TRUE((*conn)
                  ->Query("INSERT INTO schema_migrations (version, name) VALUES ($1, 'future')",
                          {std::to_string(LatestSchemaVersion() + 1)})
                  .ok());
  Status st = Migrate(**conn);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("future"), std::string::npos) << st.ToString();
}

TEST(Migrate, RefusesASchemaMadeByADifferentBuild) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  auto conn = db.ConnectMigrated();
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  ASSERT_TRUE((*conn)->Exec("UPDATE schema_migrations SET name = 'other' WHERE version = 1").ok());
  Status st = Migrate(**conn);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
}

// 014: ranges committed before datasets were recorded hold the blocks and (the default, which the
// rows cannot tell) token metadata, and traces where the range has a trace row.
TEST(Migrate, RangesFromBefore014GetTheDatasetsTheirRowsShow) {
  GAPLESS_PG_TEST_DB_OR_SKIP(db);
  auto conn = db.Connect();
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  ASSERT_TRUE(Migrate(**conn, 13).ok());
  ASSERT_TRUE(
      (*conn)
          ->Exec("INSERT INTO indexed_ranges (from_block, to_block) VALUES (0, 9), (10, 19);"
                 "CREATE TABLE traces_p0 PARTITION OF traces FOR VALUES FROM (0) TO (100);"
                 "INSERT INTO traces (block_number, trace_index, trace_type, subtraces,"
                 " trace_address) VALUES (12, 0, 'reward', 0, '{}')")
          .ok());
  Status st = Migrate(**conn);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto res = (*conn)->Query(
      "SELECT string_agg(from_block || ' ' || datasets::text, ', ' ORDER BY from_block)"
      " FROM indexed_ranges");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->Get(0, 0), "0 {blocks,token_metadata}, 10 {blocks,token_metadata,traces}");
}

}  // namespace
}  // namespace gapless

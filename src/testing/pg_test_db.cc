#include "testing/pg_test_db.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "store/migrate.h"
#include "store/queries.h"

namespace gapless {

PgTestDb::PgTestDb() {
  const char* env = std::getenv("GAPLESS_TEST_PG_URL");
  if (env == nullptr || *env == '\0') {
    skipped_ = true;
    return;
  }
  admin_url_ = env;
  static std::atomic<int> counter{0};
  std::random_device rd;
  name_ = "gapless_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
          std::to_string(rd() % 1000000);
  auto url = PgUrlWithDatabase(admin_url_, name_);
  if (!url.ok()) {
    error_ = url.status();
    return;
  }
  url_ = *url;
  auto admin = PgConn::Connect(admin_url_);
  if (!admin.ok()) {
    error_ = admin.status();
    return;
  }
  error_ = (*admin)->Exec("CREATE DATABASE " + PgQuoteIdent(name_));
  if (!error_.ok()) name_.clear();
}

PgTestDb::~PgTestDb() {
  if (skipped_ || name_.empty()) return;
  auto admin = PgConn::Connect(admin_url_);
  if (!admin.ok()) {
    ADD_FAILURE() << "cannot drop test database " << name_ << ": " << admin.status().ToString();
    return;
  }
  Status st = (*admin)->Exec("DROP DATABASE IF EXISTS " + PgQuoteIdent(name_) + " WITH (FORCE)");
  if (!st.ok()) ADD_FAILURE() << "cannot drop test database " << name_ << ": " << st.ToString();
}

Result<std::unique_ptr<PgConn>> PgTestDb::Connect() const {
  if (skipped_) return FailedPrecondition("GAPLESS_TEST_PG_URL is not set");
  if (!error_.ok()) return error_;
  return PgConn::Connect(url_);
}

Status PgTestDb::EndSession(PgConn& conn) const {
  GAPLESS_ASSIGN_OR_RETURN(PgResult pid, conn.Query("SELECT pg_backend_pid()"));
  const std::string backend(pid.Get(0, 0));
  GAPLESS_ASSIGN_OR_RETURN(auto killer, Connect());
  GAPLESS_RETURN_IF_ERROR(killer->Query("SELECT pg_terminate_backend($1)", {backend}).status());
  for (int i = 0; i < 1000; ++i) {
    GAPLESS_ASSIGN_OR_RETURN(
        PgResult left,
        killer->Query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int", {backend}));
    if (left.Get(0, 0) == "0") return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Internal("backend " + backend + " did not end");
}

Result<std::unique_ptr<PgConn>> PgTestDb::ConnectMigrated() const {
  GAPLESS_ASSIGN_OR_RETURN(auto conn, Connect());
  GAPLESS_RETURN_IF_ERROR(Migrate(*conn));
  return conn;
}

void PgTest::SetUp() {
  db_ = std::make_unique<PgTestDb>();
  if (db_->skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL is not set";
  ASSERT_FALSE(db_->failed()) << db_->error().ToString();
  auto conn = db_->ConnectMigrated();
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  conn_ = std::move(*conn);
}

std::map<std::string, std::string> DataChecksums(PgPool* pool, uint64_t from, uint64_t to) {
  std::map<std::string, std::string> out;
  auto conn = pool->Acquire();
  for (const char* table : {"blocks", "withdrawals", "transactions", "logs", "token_transfers",
                            "contracts", "tokens"}) {
    auto sum = TableChecksum(*conn, table, from, to);
    EXPECT_TRUE(sum.ok()) << table << ": " << sum.status().ToString();
    if (sum.ok()) out[table] = *sum;
  }
  return out;
}

int64_t QueryCount(PgConn& conn, const std::string& sql) {
  auto res = conn.Query(sql);
  EXPECT_TRUE(res.ok()) << sql << ": " << res.status().ToString();
  if (!res.ok()) return -1;
  auto n = res->GetInt64(0, 0);
  EXPECT_TRUE(n.ok()) << sql << ": " << n.status().ToString();
  return n.ok() ? *n : -1;
}

}  // namespace gapless

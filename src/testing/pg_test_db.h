// PgTestDb: a fresh, uniquely named PostgreSQL database for one test, dropped afterwards.
//
// The server comes from the environment variable GAPLESS_TEST_PG_URL (set by CTest for the
// integration tests, see cmake/gapless.cmake; the `pg` fixture starts the server). Without it the
// test is skipped, not failed, so `ctest -L unit` and plain runs work anywhere. Each database is
// named gapless_test_<pid>_<n>_<random>, so tests (and parallel ctest runs) never share state.
// The destructor drops the database WITH (FORCE), closing connections a test left open.
//
// Use PgTest as the fixture base (it skips in SetUp), or a PgTestDb directly with
// GAPLESS_PG_TEST_DB_OR_SKIP(db). Not thread-safe; one per test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "store/pg.h"

namespace gapless {

class PgTestDb {
 public:
  // Creates the database. skipped() when GAPLESS_TEST_PG_URL is unset; failed() (with the reason
  // in error()) when the server cannot be reached or the database cannot be created.
  PgTestDb();
  ~PgTestDb();
  PgTestDb(const PgTestDb&) = delete;
  PgTestDb& operator=(const PgTestDb&) = delete;

  bool skipped() const { return skipped_; }
  bool failed() const { return !error_.ok(); }
  const Status& error() const { return error_; }

  // The database's URL and name.
  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }

  // A new connection to the database.
  Result<std::unique_ptr<PgConn>> Connect() const;
  // A new connection with the schema migrated (store/migrate.h).
  Result<std::unique_ptr<PgConn>> ConnectMigrated() const;
  // Ends `conn`'s session from another connection (pg_terminate_backend) and waits until its
  // backend is gone, so the server's FATAL message and the end are in conn's socket. `conn` is
  // left alone (its next statement finds out).
  Status EndSession(PgConn& conn) const;

 private:
  bool skipped_ = false;
  Status error_;
  std::string admin_url_;
  std::string url_;
  std::string name_;
};

// A fixture with a migrated database and one open connection (conn()).
// Every data table's checksum (store/queries.h TableChecksum) over blocks from..to, by table name:
// two databases hold the same rows iff these are equal. A failed query is a test failure.
std::map<std::string, std::string> DataChecksums(PgPool* pool, uint64_t from, uint64_t to);

class PgTest : public ::testing::Test {
 protected:
  void SetUp() override;
  PgTestDb& db() { return *db_; }
  PgConn& conn() { return *conn_; }

 private:
  std::unique_ptr<PgTestDb> db_;
  std::unique_ptr<PgConn> conn_;
};

// The first column of the first row of `sql` as a number (a count); -1, with a test failure, when
// the query fails.
int64_t QueryCount(PgConn& conn, const std::string& sql);

}  // namespace gapless

// Declares a PgTestDb named `var` and skips (or fails) the current test if it is not usable.
#define GAPLESS_PG_TEST_DB_OR_SKIP(var)                                \
  ::gapless::PgTestDb var;                                             \
  if (var.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL is not set"; \
  ASSERT_FALSE(var.failed()) << var.error().ToString()

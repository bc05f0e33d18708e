// RedisTestDb: an isolated namespace on the shared test redis-server for one test.
//
// The server comes from GAPLESS_TEST_REDIS_URL (set by CTest for the integration tests; the
// `redis` fixture starts it). Without it the test is skipped, not failed. Isolation comes from
// the key layout: every coordination key is under "gapless:{chain-<id>}:" (coord/keys.h), and
// each RedisTestDb picks a chain id no other test (or parallel ctest run) uses. The destructor
// deletes every key under that prefix.
//
// Tests that change server-wide state (CONFIG SET, SCRIPT FLUSH, FLUSHALL, CLIENT KILL) affect
// other tests running at the same time; they restore what they change, and FLUSHALL is only used
// by tests that own a private server.
//
// Use RedisTest as the fixture base (it skips in SetUp), or GAPLESS_REDIS_TEST_DB_OR_SKIP(db).
// Not thread-safe; one per test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "coord/keys.h"
#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

class RedisTestDb {
 public:
  RedisTestDb();
  ~RedisTestDb();
  RedisTestDb(const RedisTestDb&) = delete;
  RedisTestDb& operator=(const RedisTestDb&) = delete;

  bool skipped() const { return skipped_; }
  bool failed() const { return !error_.ok(); }
  const Status& error() const { return error_; }

  const std::string& url() const { return url_; }
  // A chain id unique to this test, and its keys.
  int64_t chain_id() const { return keys_.chain_id(); }
  const Keys& keys() const { return keys_; }
  // The connection opened at construction (nullptr when skipped or failed).
  RedisConn* conn() const { return conn_.get(); }
  // A new connection.
  Result<std::unique_ptr<RedisConn>> Connect(const RedisOptions& options = {}) const;
  // Deletes every key under keys().prefix(); returns how many.
  Result<int64_t> DeleteKeys();

 private:
  bool skipped_ = false;
  Status error_;
  std::string url_;
  Keys keys_;
  std::unique_ptr<RedisConn> conn_;
};

// A fixture with a RedisTestDb (db()) and its connection (conn()).
class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override;
  RedisTestDb& db() { return *db_; }
  RedisConn& conn() { return *db_->conn(); }
  const Keys& keys() { return db_->keys(); }
  // Another connection to the test's Redis (for threads of their own); nullptr, with a test
  // failure, if it cannot connect.
  std::unique_ptr<RedisConn> NewConnection();

 private:
  std::unique_ptr<RedisTestDb> db_;
};

}  // namespace gapless

#define GAPLESS_REDIS_TEST_DB_OR_SKIP(var)                                \
  ::gapless::RedisTestDb var;                                             \
  if (var.skipped()) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL is not set"; \
  ASSERT_FALSE(var.failed()) << var.error().ToString()

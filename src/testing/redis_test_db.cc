#include "testing/redis_test_db.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>

namespace gapless {
namespace {

// Far above real chain ids; pid and a counter keep tests and parallel runs apart.
int64_t UniqueChainId() {
  static std::atomic<int64_t> counter{0};
  std::random_device rd;
  return 900'000'000'000 + (static_cast<int64_t>(getpid()) % 100'000) * 1'000'000 +
         (counter++ % 1000) * 1000 + rd() % 1000;
}

}  // namespace

RedisTestDb::RedisTestDb() : keys_(UniqueChainId()) {
  const char* env = std::getenv("GAPLESS_TEST_REDIS_URL");
  if (env == nullptr || *env == '\0') {
    skipped_ = true;
    return;
  }
  url_ = env;
  auto conn = RedisConn::Connect(url_);
  if (!conn.ok()) {
    error_ = conn.status();
    return;
  }
  conn_ = std::move(*conn);
  auto deleted = DeleteKeys();  // a clean slate even if an earlier run crashed with this id
  if (!deleted.ok()) error_ = deleted.status();
}

RedisTestDb::~RedisTestDb() {
  if (skipped_ || !conn_) return;
  auto deleted = DeleteKeys();
  if (!deleted.ok()) {
    ADD_FAILURE() << "cannot delete test keys " << keys_.prefix()
                  << "*: " << deleted.status().ToString();
  }
}

Result<std::unique_ptr<RedisConn>> RedisTestDb::Connect(const RedisOptions& options) const {
  if (skipped_) return FailedPrecondition("GAPLESS_TEST_REDIS_URL is not set");
  if (!error_.ok()) return error_;
  return RedisConn::Connect(url_, options);
}

Result<int64_t> RedisTestDb::DeleteKeys() {
  if (!conn_) return FailedPrecondition("no connection");
  int64_t deleted = 0;
  std::string cursor = "0";
  do {
    GAPLESS_ASSIGN_OR_RETURN(RedisReply r, conn_->Command({"SCAN", cursor, "MATCH",
                                                           keys_.prefix() + "*", "COUNT", "1000"}));
    if (r.type != RedisReply::Type::kArray || r.elements.size() != 2) {
      return Internal("unexpected SCAN reply");
    }
    cursor = r.elements[0].str;
    if (!r.elements[1].elements.empty()) {
      std::vector<std::string> argv = {"DEL"};
      for (const auto& k : r.elements[1].elements) argv.push_back(k.str);
      GAPLESS_ASSIGN_OR_RETURN(RedisReply d, conn_->Command(argv));
      deleted += d.integer;
    }
  } while (cursor != "0");
  return deleted;
}

std::unique_ptr<RedisConn> RedisTest::NewConnection() {
  auto conn = db_->Connect();
  if (!conn.ok()) {
    ADD_FAILURE() << conn.status().ToString();
    return nullptr;
  }
  return std::move(conn).value();
}

void RedisTest::SetUp() {
  db_ = std::make_unique<RedisTestDb>();
  if (db_->skipped()) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL is not set";
  ASSERT_FALSE(db_->failed()) << db_->error().ToString();
}

}  // namespace gapless

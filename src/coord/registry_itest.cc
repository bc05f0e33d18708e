#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "coord/registry.h"

namespace gapless {
namespace {

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("GAPLESS_TEST_REDIS_URL");
    if (url == nullptr) {
      GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
    }
    auto conn = RedisConn::Connect(url);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    redis_ = std::move(conn).value();
    // A chain id of its own: the test's keys do not collide with other tests'.
    keys_ = std::make_unique<Keys>(900000 + (std::random_device{}() % 100000));
  }
  void TearDown() override {
    if (redis_) {
      (void)redis_->Command({"DEL", keys_->registry(), keys_->registry_expiries(),
                             keys_->heartbeat("a"), keys_->heartbeat("b"),
                             keys_->heartbeat("survivor")});
    }
  }
  std::unique_ptr<RedisConn> redis_;
  std::unique_ptr<Keys> keys_;
};

TEST_F(RegistryTest, LiveWorkersAreListedAndDeadOnesPruned) {
  Registry registry(redis_.get(), keys_.get());
  ASSERT_TRUE(registry.Beat({"a", "host-1", 11, "100-149", 12.5, 0}, 60'000).ok());
  ASSERT_TRUE(registry.Beat({"b", "host-2", 22, "", 0, 0}, 150).ok());
  auto list = registry.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].worker, "a");
  EXPECT_EQ((*list)[0].host, "host-1");
  EXPECT_EQ((*list)[0].pid, 11);
  EXPECT_EQ((*list)[0].range, "100-149");
  EXPECT_DOUBLE_EQ((*list)[0].blocks_per_s, 12.5);
  EXPECT_GT((*list)[0].updated_ms, 1'600'000'000'000);  // stamped with Redis TIME

  // b stops beating: its heartbeat expires and the next List() drops it from the hash too.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // A read-only listing (status on a replica) leaves it out but writes nothing.
  list = registry.List(/*prune_dead=*/false);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].worker, "a");
  EXPECT_EQ(redis_->Command({"HLEN", keys_->registry()})->integer, 2) << "not pruned";
  list = registry.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].worker, "a");
  auto fields = redis_->Command({"HLEN", keys_->registry()});
  EXPECT_EQ(fields->integer, 1) << "the dead entry must be pruned";
  EXPECT_EQ(redis_->Command({"ZCARD", keys_->registry_expiries()})->integer, 1)
      << "and its expiry with it";
  auto ttl = redis_->Command({"PTTL", keys_->heartbeat("a")});
  EXPECT_GT(ttl->integer, 0) << "a heartbeat always has a TTL";

  ASSERT_TRUE(registry.Leave("a").ok());
  EXPECT_TRUE(registry.List()->empty());
}

// Every process start adds an entry under a new worker id. Processes that start, beat and die,
// with nobody ever listing the registry (no `gapless status`), must not grow it without bound:
// the beats of the others prune the dead.
TEST_F(RegistryTest, ProcessesThatDieWithoutAnyoneListingLeaveTheRegistryBounded) {
  Registry registry(redis_.get(), keys_.get());
  constexpr int kProcesses = 300;
  constexpr int64_t kTtlMs = 20;
  int64_t largest = 0;
  for (int i = 0; i < kProcesses; ++i) {
    std::string worker = "p" + std::to_string(i);
    ASSERT_TRUE(registry.Beat({worker, "host", i, "", 0, 0}, kTtlMs).ok());
    // Ten processes at a time, then they die: their heartbeats expire.
    if (i % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTtlMs));
    auto len = redis_->Command({"HLEN", keys_->registry()});
    ASSERT_TRUE(len.ok());
    largest = std::max(largest, len->integer);
  }
  // At most ten alive at once, plus the expired ones the next beats have not pruned yet.
  EXPECT_LE(largest, 10 + Registry::kMaxPrunePerBeat) << "of " << kProcesses << " registrations";
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTtlMs));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(registry.Beat({"survivor", "host", 1, "", 0, 0}, 60'000).ok());
  }
  EXPECT_EQ(redis_->Command({"HLEN", keys_->registry()})->integer, 1) << "only the survivor";
  EXPECT_EQ(redis_->Command({"ZCARD", keys_->registry_expiries()})->integer, 1);
}

TEST(RegistryEncoding, RoundTripsFreeText) {
  WorkerInfo in{"w", "ho\"st\\x", 7, "1-2", 3.25, 99};
  WorkerInfo out;
  ASSERT_TRUE(Registry::Decode("w", Registry::Encode(in), &out));
  EXPECT_EQ(out.host, in.host);
  EXPECT_EQ(out.range, "1-2");
  EXPECT_EQ(out.pid, 7);
  EXPECT_DOUBLE_EQ(out.blocks_per_s, 3.25);
  EXPECT_FALSE(Registry::Decode("w", "{}", &out));
}

}  // namespace
}  // namespace gapless

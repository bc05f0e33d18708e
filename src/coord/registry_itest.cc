#include <gtest/gtest.h>

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
      (void)redis_->Command(
          {"DEL", keys_->registry(), keys_->heartbeat("a"), keys_->heartbeat("b")});
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
  list = registry.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].worker, "a");
  auto fields = redis_->Command({"HLEN", keys_->registry()});
  EXPECT_EQ(fields->integer, 1) << "the dead entry must be pruned";
  auto ttl = redis_->Command({"PTTL", keys_->heartbeat("a")});
  EXPECT_GT(ttl->integer, 0) << "a heartbeat always has a TTL";

  ASSERT_TRUE(registry.Leave("a").ok());
  EXPECT_TRUE(registry.List()->empty());
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

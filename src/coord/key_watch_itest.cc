// The memory watch against a private redis-server (exact key counts: nothing else writes to it):
// the sample list's bounds (size, interval, TTL), a corrupt entry refused, and the prefix sample.
#include <gtest/gtest.h>

#include "coord/key_watch.h"
#include "testing/redis_server.h"

namespace gapless {
namespace {

class KeyWatchItest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    auto conn = RedisConn::Connect(server_->url());
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
  }
  void Add(const std::string& prefix, int n, int64_t ttl_s = 0) {
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> argv = {"SET", prefix + std::to_string(i), "v"};
      if (ttl_s > 0) argv.insert(argv.end(), {"EX", std::to_string(ttl_s)});
      ASSERT_TRUE(conn_->Command(argv).ok());
    }
  }
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisConn> conn_;
  Keys keys_{7};
};

TEST_F(KeyWatchItest, SamplesTheKeyCountAtMostOncePerIntervalAndKeepsABoundedList) {
  Add("k:", 10);
  auto first = RecordKeyCountSample(*conn_, keys_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->recorded);
  ASSERT_EQ(first->samples.size(), 1u);
  EXPECT_EQ(first->samples[0].keys, 10) << "DBSIZE before the sample list existed";
  EXPECT_EQ(first->samples[0].time_ms, first->now_ms);
  // Within the minimum interval (60 s by default): nothing recorded.
  Add("more:", 5);
  auto again = RecordKeyCountSample(*conn_, keys_);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->recorded);
  EXPECT_EQ(again->samples.size(), 1u);

  KeyWatchOptions every_call;
  every_call.min_interval_ms = 0;
  every_call.max_samples = 5;
  every_call.ttl_ms = 60'000;
  for (int i = 0; i < 12; ++i) {
    Add("grow" + std::to_string(i) + ":", 1);
    auto r = RecordKeyCountSample(*conn_, keys_, every_call);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->recorded);
    EXPECT_LE(r->samples.size(), 5u) << "the list is trimmed to max_samples";
  }
  auto len = conn_->Command({"LLEN", keys_.key_count_samples()});
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(len->integer, 5);
  auto ttl = conn_->Command({"PTTL", keys_.key_count_samples()});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 0) << "the history expires when nobody samples";
  EXPECT_LE(ttl->integer, 60'000);
  auto last = RecordKeyCountSample(*conn_, keys_, every_call);
  ASSERT_TRUE(last.ok());
  // 10 + 5 + 12 keys and the sample list itself, newest last, each sample one more than before.
  EXPECT_EQ(last->samples.back().keys, 10 + 5 + 12 + 1);
  for (size_t i = 1; i < last->samples.size(); ++i) {
    EXPECT_GE(last->samples[i].time_ms, last->samples[i - 1].time_ms);
  }
}

TEST_F(KeyWatchItest, ACorruptSampleIsRefusedBeforeAnyWrite) {
  ASSERT_TRUE(conn_->Command({"RPUSH", keys_.key_count_samples(), "not-a-sample"}).ok());
  auto r = RecordKeyCountSample(*conn_, keys_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss) << r.status().ToString();
  auto len = conn_->Command({"LLEN", keys_.key_count_samples()});
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(len->integer, 1);
}

TEST_F(KeyWatchItest, ThePrefixSampleNamesTheLargestGroupsAndTheirKeysWithoutTtl) {
  Add("leaky:", 300);
  Add("session:", 50, /*ttl_s=*/3600);
  Add(keys_.heartbeat("w"), 10, /*ttl_s=*/30);
  auto sample = SampleKeyPrefixes(*conn_);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->keys_scanned, 360);
  ASSERT_EQ(sample->top.size(), 3u);
  EXPECT_EQ(sample->top[0].prefix, "leaky:*");
  EXPECT_EQ(sample->top[0].keys_seen, 300);
  EXPECT_EQ(sample->top[0].ttl_checked, 20);
  EXPECT_EQ(sample->top[0].without_ttl, 20);
  EXPECT_EQ(sample->top[1].prefix, "session:*");
  EXPECT_EQ(sample->top[1].without_ttl, 0);
  EXPECT_EQ(sample->top[2].prefix, keys_.prefix() + "heartbeat:*");
  EXPECT_EQ(sample->top[2].keys_seen, 10);
  // Bounded: a scan stops after max_keys (a page may overshoot by its COUNT).
  auto bounded = SampleKeyPrefixes(*conn_, /*max_keys=*/100, /*top=*/1, /*ttl_checks=*/5);
  ASSERT_TRUE(bounded.ok());
  EXPECT_LT(bounded->keys_scanned, 360);
  EXPECT_EQ(bounded->top.size(), 1u);
  EXPECT_LE(bounded->top[0].ttl_checked, 5);
}

}  // namespace
}  // namespace gapless

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "coord/redis.h"
#include "events/event.h"
#include "events/redis_bus.h"
#include "fmt/format.h"
#include "testing/redis_server.h"

namespace gapless {
namespace {

std::vector<OutgoingEvent> Events(std::string_view type, uint64_t chain, int from, int count) {
  std::vector<OutgoingEvent> out;
  for (int i = from; i < from + count; ++i) {
    std::string id = EventId(chain, type, std::to_string(i));
    out.push_back(MakeEvent(chain, type, id, IsoTime(i), fmt::format(R"({{"n":{}}})", i)));
  }
  return out;
}

std::vector<Delivery> PollAll(Subscriber& s, size_t want, int max_polls = 50) {
  std::vector<Delivery> out;
  for (int i = 0; i < max_polls && out.size() < want; ++i) {
    Result<std::vector<Delivery>> r = s.Poll(64, 200);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) break;
    for (Delivery& d : *r) out.push_back(std::move(d));
  }
  return out;
}

class RedisBusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  std::unique_ptr<Subscriber> Subscribe(std::string consumer, int64_t claim_idle_ms = 60'000) {
    SubscribeOptions o;
    o.group = "g";
    o.topics = {"block.new.7", "token.transfer.7"};
    o.consumer_name = std::move(consumer);
    auto s = OpenRedisSubscriber(server_->url(), o, claim_idle_ms);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisBusTest, EveryEventArrivesInOrderPerTopic) {
  auto pub = OpenRedisPublisher(server_->url(), {});
  ASSERT_TRUE(pub.ok());
  std::vector<OutgoingEvent> batch = Events(kBlockNew, 7, 0, 100);
  for (OutgoingEvent& e : Events(kTokenTransfer, 7, 0, 100)) batch.push_back(std::move(e));
  // Subscribed before or after publishing: a new group reads from the beginning.
  ASSERT_TRUE((*pub)->Publish(batch).ok());
  auto sub = Subscribe("c1");
  std::vector<Delivery> got = PollAll(*sub, 200);
  ASSERT_EQ(got.size(), 200u);
  std::map<std::string, std::vector<std::string>> bodies;
  for (const Delivery& d : got) bodies[d.topic].push_back(d.body);
  ASSERT_EQ(bodies["block.new.7"].size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(bodies["block.new.7"][i], batch[i].body);
    EXPECT_EQ(bodies["token.transfer.7"][i], batch[100 + i].body);
  }
  Result<int64_t> lag = sub->Lag();
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(*lag, 200);  // delivered, not acknowledged
  for (const Delivery& d : got) ASSERT_TRUE(sub->Ack(d).ok());
  lag = sub->Lag();
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(*lag, 0);
}

TEST_F(RedisBusTest, UnackedEntriesOfADeadConsumerComeAgain) {
  auto pub = OpenRedisPublisher(server_->url(), {});
  ASSERT_TRUE(pub.ok());
  std::vector<OutgoingEvent> batch = Events(kBlockNew, 7, 0, 10);
  ASSERT_TRUE((*pub)->Publish(batch).ok());
  std::set<std::string> acked;
  {
    auto first = Subscribe("dead", /*claim_idle_ms=*/100);
    std::vector<Delivery> got = PollAll(*first, 10);
    ASSERT_EQ(got.size(), 10u);
    for (size_t i = 0; i < got.size(); i += 2) {
      ASSERT_TRUE(first->Ack(got[i]).ok());
      acked.insert(got[i].body);
    }
  }  // "dies" with 5 entries pending
  usleep(200'000);
  auto second = Subscribe("alive", /*claim_idle_ms=*/100);
  std::vector<Delivery> again = PollAll(*second, 5, 10);
  ASSERT_EQ(again.size(), 5u);
  for (const Delivery& d : again) {
    EXPECT_TRUE(d.redelivered);
    EXPECT_FALSE(acked.contains(d.body));
    ASSERT_TRUE(second->Ack(d).ok());
  }
  EXPECT_TRUE(PollAll(*second, 1, 3).empty());
}

TEST_F(RedisBusTest, ARestartedConsumerOfTheSameNameGetsItsPendingEntries) {
  auto pub = OpenRedisPublisher(server_->url(), {});
  ASSERT_TRUE(pub.ok());
  ASSERT_TRUE((*pub)->Publish(Events(kBlockNew, 7, 0, 3)).ok());
  { ASSERT_EQ(PollAll(*Subscribe("same"), 3).size(), 3u); }
  auto again = Subscribe("same");
  std::vector<Delivery> got = PollAll(*again, 3, 3);
  ASSERT_EQ(got.size(), 3u);
  for (const Delivery& d : got) EXPECT_TRUE(d.redelivered);
}

TEST_F(RedisBusTest, DeadLetterKeepsBodyAndError) {
  auto pub = OpenRedisPublisher(server_->url(), {});
  ASSERT_TRUE(pub.ok());
  std::vector<OutgoingEvent> batch = Events(kTokenTransfer, 7, 0, 1);
  ASSERT_TRUE((*pub)->Publish(batch).ok());
  auto sub = Subscribe("c");
  std::vector<Delivery> got = PollAll(*sub, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(sub->DeadLetter(got[0], "process failed: boom").ok());
  auto conn = RedisConn::Connect(server_->url());
  ASSERT_TRUE(conn.ok());
  Result<RedisReply> r = (*conn)->Command({"XRANGE", "token.transfer.7.dlq", "-", "+"});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->elements.size(), 1u);
  std::map<std::string, std::string> fields;
  const RedisReply& f = r->elements[0].elements[1];
  for (size_t i = 0; i + 1 < f.elements.size(); i += 2)
    fields[f.elements[i].str] = f.elements[i + 1].str;
  EXPECT_EQ(fields["body"], batch[0].body);
  EXPECT_EQ(fields["error"], "process failed: boom");
  EXPECT_EQ(fields["event_id"], batch[0].event_id);
}

TEST_F(RedisBusTest, PublishFailsUnavailableWhileTheServerIsDownAndWorksAfter) {
  PublisherOptions options;
  options.confirm_timeout_ms = 500;
  auto pub = OpenRedisPublisher(server_->url(), options);
  ASSERT_TRUE(pub.ok());
  server_->Kill();
  Status down = (*pub)->Publish(Events(kBlockNew, 7, 0, 5));
  EXPECT_EQ(down.code(), Code::kUnavailable) << down.ToString();
  ASSERT_TRUE(server_->Restart().ok());
  EXPECT_TRUE((*pub)->Publish(Events(kBlockNew, 7, 0, 5)).ok());
}

}  // namespace
}  // namespace gapless

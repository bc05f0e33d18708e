// The Kafka bus (events/kafka_bus.h) against librdkafka's mock Kafka cluster, run in a helper
// process per test (testing/kafka_mock.h): ordering, out-of-order acks and where a group resumes,
// dead letters, a partition leader's broker going down, lag, fencing of transactional producers.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "events/kafka_bus.h"
#include "testing/kafka_mock.h"
#include "testing/tcp_proxy.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using testing_util::NowMs;

OutgoingEvent Event(const std::string& topic, int i, const std::string& key = "1") {
  OutgoingEvent e;
  e.topic = topic;
  e.key = key;
  e.event_type = "block.new";
  e.event_id = topic + "#" + std::to_string(i);
  e.body = "{\"topic\":\"" + topic + "\",\"i\":" + std::to_string(i) + "}";
  return e;
}

std::vector<OutgoingEvent> Events(const std::string& topic, int from, int to) {
  std::vector<OutgoingEvent> out;
  for (int i = from; i < to; ++i) out.push_back(Event(topic, i));
  return out;
}

std::vector<std::string> Bodies(const std::vector<Delivery>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.body);
  return out;
}

std::vector<std::string> Bodies(const std::vector<OutgoingEvent>& es) {
  std::vector<std::string> out;
  for (const auto& e : es) out.push_back(e.body);
  return out;
}

class KafkaBusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = KafkaMockCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
  }

  std::unique_ptr<Publisher> OpenPublisher(int64_t confirm_timeout_ms = 10'000,
                                           const std::string& query = "",
                                           const std::string& txn_id = "gapless-relay") {
    PublisherOptions options;
    options.confirm_timeout_ms = confirm_timeout_ms;
    options.kafka_transactional_id = txn_id;
    auto pub = OpenKafkaPublisher(cluster_->url() + query, options);
    EXPECT_TRUE(pub.ok()) << pub.status().ToString();
    return pub.ok() ? std::move(*pub) : nullptr;
  }

  std::unique_ptr<Subscriber> OpenSubscriber(const std::string& group,
                                             std::vector<std::string> topics,
                                             bool from_beginning = true) {
    SubscribeOptions options;
    options.group = group;
    options.topics = std::move(topics);
    options.from_beginning = from_beginning;
    // The mock's group coordinator waits (session timeout - 1 s) for a member that left before
    // it lets a new one in; a short session keeps the tests quick. It must stay above the mock's
    // 3 s initial rebalance delay, or a first member times out while it waits to join.
    auto sub = OpenKafkaSubscriber(
        cluster_->url() + "?session.timeout.ms=4500&heartbeat.interval.ms=1000", options);
    EXPECT_TRUE(sub.ok()) << sub.status().ToString();
    return sub.ok() ? std::move(*sub) : nullptr;
  }

  // Polls until `n` deliveries have come or `ms` have passed.
  static std::vector<Delivery> PollN(Subscriber& sub, size_t n, int64_t ms) {
    std::vector<Delivery> out;
    int64_t end = NowMs() + ms;
    while (out.size() < n && NowMs() < end) {
      auto got = sub.Poll(n - out.size(), 200);
      if (!got.ok()) continue;  // transient (a broker down); the subscriber reconnects
      for (auto& d : *got) out.push_back(std::move(d));
    }
    return out;
  }

  std::unique_ptr<KafkaMockCluster> cluster_;
};

TEST(KafkaUrlTest, ParsesHostsAndTransactionalAndNamesTheProblem) {
  auto url = ParseKafkaUrl("kafka://h1:9092,h2:9093?transactional=1");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->bootstrap, "h1:9092,h2:9093");
  EXPECT_TRUE(url->transactional);
  url = ParseKafkaUrl("kafka://127.0.0.1:9092");
  ASSERT_TRUE(url.ok());
  EXPECT_FALSE(url->transactional);

  for (const char* bad :
       {"amqp://h:1", "kafka://", "kafka://h1", "kafka://h1:0", "kafka://h1:99999",
        "kafka://h1:9092,", "kafka://h1:9x92", "kafka://h1:9092?acks=1"}) {
    auto r = ParseKafkaUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
  url = ParseKafkaUrl("kafka://h1:9092?session.timeout.ms=6000&transactional=0");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  ASSERT_EQ(url->properties.size(), 1u);
  EXPECT_EQ(url->properties[0].first, "session.timeout.ms");
  EXPECT_EQ(url->properties[0].second, "6000");
  // Properties gapless relies on cannot be overridden.
  EXPECT_EQ(ParseKafkaUrl("kafka://h1:9092?enable.auto.commit=true").status().code(),
            Code::kFailedPrecondition);
  PublisherOptions options;
  auto pub = OpenKafkaPublisher("kafka:/h:1", options);
  EXPECT_EQ(pub.status().code(), Code::kFailedPrecondition);
}

// The chaos harness's hook (kafka_bus.h "Testing"): with GAPLESS_TEST_KAFKA_CONNECT every
// connection to a broker goes through the proxy named for its port, the bootstrap and the
// advertised addresses alike, so cutting the proxies cuts the client off from the whole cluster.
TEST_F(KafkaBusTest, TheTestConnectMapSendsEveryBrokerConnectionThroughItsProxy) {
  const std::string topic = "block.new.proxied";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 3).ok());
  std::vector<std::unique_ptr<TcpProxy>> proxies;
  std::string map;
  const std::string bootstrap = cluster_->bootstrap();
  for (size_t at = 0; at < bootstrap.size();) {
    size_t end = bootstrap.find(',', at);
    if (end == std::string::npos) end = bootstrap.size();
    const int port = std::stoi(bootstrap.substr(bootstrap.rfind(':', end - 1) + 1, end));
    proxies.push_back(std::make_unique<TcpProxy>("127.0.0.1", port));
    map += (map.empty() ? "" : ",") + std::to_string(port) + "=" +
           std::to_string(proxies.back()->port());
    at = end + 1;
  }
  ASSERT_EQ(proxies.size(), 3u);
  // Read when each client is made (the publisher makes its own at the first Publish); unset at
  // the end whatever happens, so that no other test is proxied.
  struct ConnectMap {
    explicit ConnectMap(const std::string& map) {
      setenv("GAPLESS_TEST_KAFKA_CONNECT", map.c_str(), 1);
    }
    ~ConnectMap() { unsetenv("GAPLESS_TEST_KAFKA_CONNECT"); }
  } scoped(map);
  auto pub = OpenPublisher(/*confirm_timeout_ms=*/3'000);
  ASSERT_NE(pub, nullptr);
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 30)).ok());
  int64_t accepted = 0;
  for (const auto& p : proxies) accepted += p->connections_accepted();
  // One broker may be both the bootstrap and the partition's leader: one connection at least.
  EXPECT_GE(accepted, 1) << "no broker was reached by proxy";

  // Every link black-holed: nothing is confirmed, although the brokers are up.
  for (const auto& p : proxies) {
    p->Pause();
    p->CloseAll();
  }
  Status cut = pub->Publish(Events(topic, 30, 40));
  EXPECT_EQ(cut.code(), Code::kUnavailable) << cut.ToString();
  for (const auto& p : proxies) p->Heal();
  ASSERT_TRUE(pub->Publish(Events(topic, 30, 40)).ok());
  auto sub = OpenSubscriber("proxied", {topic});
  ASSERT_NE(sub, nullptr);
  std::set<std::string> seen;
  for (const Delivery& d : PollN(*sub, 40, 20'000)) seen.insert(d.body);
  EXPECT_EQ(seen.size(), 40u);
}

TEST_F(KafkaBusTest, DeliversEveryEventInPublishOrderPerTopic) {
  const std::vector<std::string> topics = {"block.new.1", "block.new.2"};
  for (const auto& t : topics) ASSERT_TRUE(cluster_->CreateTopic(t, 3).ok());
  auto pub = OpenPublisher();
  ASSERT_NE(pub, nullptr);
  EXPECT_EQ(pub->name(), cluster_->url());
  // 200 events, the two topics interleaved, in four batches.
  std::vector<OutgoingEvent> all;
  for (int i = 0; i < 100; ++i) {
    all.push_back(Event(topics[0], i, "1"));
    all.push_back(Event(topics[1], i, "2"));
  }
  for (size_t b = 0; b < all.size(); b += 50) {
    std::vector<OutgoingEvent> batch(all.begin() + b, all.begin() + b + 50);
    Status st = pub->Publish(batch);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  auto sub = OpenSubscriber("order", topics);
  ASSERT_NE(sub, nullptr);
  std::vector<Delivery> got = PollN(*sub, 200, 30'000);
  ASSERT_EQ(got.size(), 200u);
  std::map<std::string, std::vector<std::string>> bodies;
  for (const auto& d : got) bodies[d.topic].push_back(d.body);
  for (int t = 0; t < 2; ++t) {
    std::vector<std::string> want;
    for (int i = 0; i < 100; ++i) want.push_back(Event(topics[t], i).body);
    EXPECT_EQ(bodies[topics[t]], want) << topics[t];
  }
  std::vector<std::string> assignment = sub->Assignment();
  EXPECT_EQ(assignment.size(), 6u);  // 2 topics x 3 partitions, one consumer
  std::set<std::string> set(assignment.begin(), assignment.end());
  EXPECT_EQ(set.count("block.new.1[0]"), 1u);
  EXPECT_EQ(set.count("block.new.2[2]"), 1u);
  // Nothing more comes.
  auto more = sub->Poll(10, 300);
  ASSERT_TRUE(more.ok());
  EXPECT_TRUE(more->empty());
}

TEST_F(KafkaBusTest, OutOfOrderAcksCommitOnlyUpToTheLowestUnacked) {
  const std::string topic = "block.new.3";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish(Events(topic, 1, 6)).ok());  // events 1..5 at offsets 0..4

  auto want = [&](int from, int to) { return Bodies(Events(topic, from, to)); };

  {
    // Acks 2 and 3, not 1: nothing may be committed.
    auto a = OpenSubscriber("acks", {topic});
    auto got = PollN(*a, 5, 20'000);
    ASSERT_EQ(Bodies(got), want(1, 6));
    ASSERT_TRUE(a->Ack(got[1]).ok());
    ASSERT_TRUE(a->Ack(got[2]).ok());
  }
  {
    // Starts again from 1. Acks 5, 3, 1, 2 but not 4: the group resumes at 4.
    auto b = OpenSubscriber("acks", {topic});
    auto got = PollN(*b, 5, 20'000);
    ASSERT_EQ(Bodies(got), want(1, 6));
    for (int i : {4, 2, 0, 1}) ASSERT_TRUE(b->Ack(got[i]).ok());
    // Acking twice is harmless.
    ASSERT_TRUE(b->Ack(got[0]).ok());
  }
  {
    auto c = OpenSubscriber("acks", {topic});
    auto got = PollN(*c, 2, 20'000);
    ASSERT_EQ(Bodies(got), want(4, 6));
    for (const auto& d : got) ASSERT_TRUE(c->Ack(d).ok());
  }
  {
    // Everything acknowledged: a new member of the group gets nothing.
    auto d = OpenSubscriber("acks", {topic});
    std::vector<Delivery> got;
    // Polls until it has joined and been assigned the partition, then a little longer.
    for (int64_t end = NowMs() + 15'000; d->Assignment().empty() && NowMs() < end;) {
      auto more = d->Poll(10, 100);
      if (more.ok()) got.insert(got.end(), more->begin(), more->end());
    }
    ASSERT_EQ(d->Assignment().size(), 1u);
    for (const auto& m : PollN(*d, 1, 1'000)) got.push_back(m);
    EXPECT_TRUE(got.empty()) << got.front().body;
    auto lag = d->Lag();
    ASSERT_TRUE(lag.ok()) << lag.status().ToString();
    EXPECT_EQ(*lag, 0);
  }
}

// Reads every message on partition 0 of `topic` with a plain librdkafka consumer, headers
// included (the bus's Delivery does not carry headers).
struct RawMessage {
  std::string body;
  std::map<std::string, std::string> headers;
};
std::vector<RawMessage> ReadPartition(const std::string& bootstrap, const std::string& topic,
                                      size_t n, int64_t ms) {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), errstr, sizeof(errstr));
  rd_kafka_conf_set(conf, "group.id", "raw-reader", errstr, sizeof(errstr));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  std::vector<RawMessage> out;
  int64_t end = NowMs() + ms;
  while (out.size() < n && NowMs() < end) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(rk, 200);
    if (msg == nullptr) continue;
    if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      RawMessage m;
      m.body.assign(static_cast<const char*>(msg->payload), msg->len);
      rd_kafka_headers_t* hdrs = nullptr;
      if (rd_kafka_message_headers(msg, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* value;
        size_t size;
        for (size_t i = 0; !rd_kafka_header_get_all(hdrs, i, &name, &value, &size); ++i) {
          m.headers[name] = std::string(static_cast<const char*>(value), size);
        }
      }
      out.push_back(std::move(m));
    }
    rd_kafka_message_destroy(msg);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

// HandBack (the Kafka worker's back-pressure under its memory budget): the delivery comes again,
// with everything after it in its partition and in order, and the commit stays below it until it
// is acknowledged.
TEST_F(KafkaBusTest, AHandedBackDeliveryComesAgainWithWhatFollowsItInOrder) {
  const std::string topic = "block.new.handback";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 10)).ok());  // offsets 0..9
  auto want = [&](int from, int to) { return Bodies(Events(topic, from, to)); };
  {
    auto sub = OpenSubscriber("hand-back", {topic});
    auto got = PollN(*sub, 6, 20'000);
    ASSERT_EQ(Bodies(got), want(0, 6));
    for (int i : {0, 1, 2}) ASSERT_TRUE(sub->Ack(got[i]).ok());
    // Handed back out of order: 4, then 3 (the seek goes to 3), then 5 (covered: no seek). 3
    // comes again, and 4 and 5 after it.
    for (int i : {4, 3, 5}) ASSERT_TRUE(sub->HandBack(got[i]).ok());
    auto again = PollN(*sub, 7, 20'000);
    ASSERT_EQ(Bodies(again), want(3, 10));
    // 4..9 acknowledged, 3 not: the group must resume at 3.
    for (size_t i = 1; i < again.size(); ++i) ASSERT_TRUE(sub->Ack(again[i]).ok());
  }
  {
    auto sub = OpenSubscriber("hand-back", {topic});
    auto got = PollN(*sub, 7, 20'000);
    ASSERT_EQ(Bodies(got), want(3, 10)) << "the commit passed a delivery handed back";
  }
}

TEST_F(KafkaBusTest, PublishedMessagesCarryTheEventHeaders) {
  const std::string topic = "block.new.4";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish({Event(topic, 7)}).ok());
  auto raw = ReadPartition(cluster_->bootstrap(), topic, 1, 10'000);
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0].body, Event(topic, 7).body);
  EXPECT_EQ(raw[0].headers["event_type"], "block.new");
  EXPECT_EQ(raw[0].headers["event_id"], topic + "#7");
}

TEST_F(KafkaBusTest, DeadLetterPutsTheBodyAndErrorOnTheDlqTopic) {
  const std::string topic = "block.new.5";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  ASSERT_TRUE(cluster_->CreateTopic(topic + ".dlq", 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 3)).ok());
  auto sub = OpenSubscriber("dlq", {topic});
  auto got = PollN(*sub, 3, 20'000);
  ASSERT_EQ(got.size(), 3u);
  Status st = sub->DeadLetter(got[1], "decode: field \"number\" missing");
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sub->Ack(got[1]).ok());

  auto raw = ReadPartition(cluster_->bootstrap(), topic + ".dlq", 1, 10'000);
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(raw[0].body, Event(topic, 1).body);
  EXPECT_EQ(raw[0].headers["error"], "decode: field \"number\" missing");
  EXPECT_EQ(raw[0].headers["event_id"], topic + "#1");
}

TEST_F(KafkaBusTest, LeaderBrokerDownFailsWithinTheTimeoutAndNothingIsLost) {
  const std::string topic = "block.new.6";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1, 3).ok());
  ASSERT_TRUE(cluster_->SetLeader(topic, 0, 2).ok());
  const int64_t timeout_ms = 2'000;
  auto pub = OpenPublisher(timeout_ms);
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 10)).ok());

  ASSERT_TRUE(cluster_->SetBrokerDown(2).ok());
  auto batch = Events(topic, 10, 20);
  int64_t start = NowMs();
  Status st = pub->Publish(batch);
  int64_t took = NowMs() - start;
  // The mock moves no leadership by itself, so this normally fails; either way it must answer
  // within the confirm timeout (plus scheduling slack), and a failure is retriable.
  EXPECT_LT(took, timeout_ms + 1'500);
  if (!st.ok()) {
    EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find(topic), std::string::npos) << st.ToString();
  }

  ASSERT_TRUE(cluster_->SetBrokerUp(2).ok());
  // The caller resends the whole batch until it is confirmed (librdkafka's reconnect backoff may
  // take a few seconds after a broker comes back).
  bool sent = false;
  for (int64_t end = NowMs() + 20'000; !sent && NowMs() < end;) {
    Status again = pub->Publish(batch);
    sent = again.ok();
    if (!sent) {
      EXPECT_EQ(again.code(), Code::kUnavailable) << again.ToString();
    }
  }
  ASSERT_TRUE(sent);
  ASSERT_TRUE(pub->Publish(Events(topic, 20, 25)).ok());

  auto sub = OpenSubscriber("failover", {topic});
  std::set<std::string> ids;
  for (int64_t end = NowMs() + 20'000; ids.size() < 25 && NowMs() < end;) {
    auto got = sub->Poll(100, 200);
    if (!got.ok()) continue;
    for (const auto& d : *got) ids.insert(d.body);
  }
  for (int i = 0; i < 25; ++i) EXPECT_EQ(ids.count(Event(topic, i).body), 1u) << "event " << i;
}

TEST_F(KafkaBusTest, PublishSucceedsAfterTheLeaderMoves) {
  const std::string topic = "block.new.7";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1, 3).ok());
  ASSERT_TRUE(cluster_->SetLeader(topic, 0, 1).ok());
  auto pub = OpenPublisher(5'000);
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 5)).ok());
  ASSERT_TRUE(cluster_->SetBrokerDown(1).ok());
  ASSERT_TRUE(cluster_->SetLeader(topic, 0, 3).ok());
  // The producer learns the new leader from metadata (NOT_LEADER or a refresh) and retries.
  bool sent = false;
  for (int64_t end = NowMs() + 20'000; !sent && NowMs() < end;) {
    Status st = pub->Publish(Events(topic, 5, 10));
    sent = st.ok();
    if (!sent) {
      EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
    }
  }
  ASSERT_TRUE(sent);
  auto sub = OpenSubscriber("moved", {topic});
  std::set<std::string> ids;
  for (int64_t end = NowMs() + 20'000; ids.size() < 10 && NowMs() < end;) {
    auto got = sub->Poll(100, 200);
    if (!got.ok()) continue;
    for (const auto& d : *got) ids.insert(d.body);
  }
  EXPECT_EQ(ids.size(), 10u);
}

TEST_F(KafkaBusTest, LagCountsUnacknowledgedEvents) {
  const std::string topic = "block.new.8";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 30)).ok());
  auto sub = OpenSubscriber("lag", {topic});
  auto got = PollN(*sub, 10, 20'000);
  ASSERT_EQ(got.size(), 10u);
  auto lag = sub->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(*lag, 30);  // delivered is not acknowledged
  for (const auto& d : got) ASSERT_TRUE(sub->Ack(d).ok());
  lag = sub->Lag();
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(*lag, 20);
  ASSERT_TRUE(pub->Publish(Events(topic, 30, 35)).ok());
  EXPECT_TRUE(testing_util::WaitFor(
      [&] {
        auto l = sub->Lag();
        return l.ok() && *l == 25;
      },
      5'000));
}

TEST_F(KafkaBusTest, PausedPartitionDeliversNothingUntilResumed) {
  const std::string topic = "block.new.10";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 2)).ok());
  auto sub = OpenSubscriber("pause", {topic});
  ASSERT_EQ(PollN(*sub, 2, 20'000).size(), 2u);
  ASSERT_TRUE(sub->Pause(topic, 0).ok());
  ASSERT_TRUE(pub->Publish(Events(topic, 2, 4)).ok());
  EXPECT_TRUE(PollN(*sub, 1, 1'500).empty());
  ASSERT_TRUE(sub->Resume(topic, 0).ok());
  EXPECT_EQ(PollN(*sub, 2, 10'000).size(), 2u);
}

// A partition paused (an event being retried in order) when a rebalance takes it away, resumed
// while this member holds nothing, and then assigned back must deliver again. librdkafka keeps
// a partition's pause across the re-assignment, and the subscriber used to resume only the
// partitions it held, so that resume was lost and the partition stayed paused for good. The
// chaos harness found it: after a consumer of the group was killed during a retry, a balances
// consumer received nothing more, with its group 72 events behind.
TEST_F(KafkaBusTest, APartitionResumedWhileRevokedDeliversWhenAssignedBack) {
  const std::string topic = "block.new.11";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 2)).ok());
  auto a = OpenSubscriber("rebalance", {topic});
  auto first = PollN(*a, 2, 20'000);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_TRUE(a->AckAll(first).ok());
  ASSERT_TRUE(a->Pause(topic, 0).ok());
  // Another member joins: a's partition is revoked. Resumed while a holds nothing.
  auto b = OpenSubscriber("rebalance", {topic});
  const bool revoked = testing_util::WaitFor(
      [&] {
        (void)b->Poll(10, 50);
        (void)a->Poll(10, 50);
        return a->Assignment().empty();
      },
      30'000);
  ASSERT_TRUE(revoked) << "the partition was never revoked from the first member";
  ASSERT_TRUE(a->Resume(topic, 0).ok());
  b.reset();  // leaves: the partition comes back to a
  ASSERT_TRUE(pub->Publish(Events(topic, 2, 4)).ok());
  bool last = false;
  const int64_t end = NowMs() + 40'000;
  while (!last && NowMs() < end) {
    auto got = a->Poll(10, 200);
    if (!got.ok()) continue;
    for (const Delivery& d : *got) last = last || d.body == Event(topic, 3).body;
  }
  EXPECT_TRUE(last) << "the partition stayed paused after it was assigned back";
}

// Every partition a member is assigned delivers. Found by the chaos harness (seed 1 in the CI run,
// beside another deployment): the subscriber resumed every partition right after assigning it,
// and a pause or resume in quick succession of assign() can make librdkafka ignore the assign's
// fetch start (its operation version is outdated): the balances consumer's token.transfer
// partition never delivered a message, 405 behind at the end. The pause state is now set before
// the assign, and only where it differs from what librdkafka holds. (This test did not fail
// before the fix on a quiet machine: the race needs a busy one. It keeps the property.)
TEST_F(KafkaBusTest, EveryAssignedPartitionDeliversFromTheStart) {
  const std::vector<std::string> topics = {"token.transfer.13", "block.reverted.13",
                                           "block.new.13"};
  auto pub = OpenPublisher();
  for (const std::string& t : topics) {
    ASSERT_TRUE(cluster_->CreateTopic(t, 1).ok());
    ASSERT_TRUE(pub->Publish(Events(t, 0, 5)).ok());
  }
  for (int round = 0; round < 3; ++round) {
    auto sub = OpenSubscriber("fresh-" + std::to_string(round), topics);
    auto got = PollN(*sub, 15, 20'000);
    std::map<std::string, int> per_topic;
    for (const Delivery& d : got) ++per_topic[d.topic];
    for (const std::string& t : topics) {
      EXPECT_EQ(per_topic[t], 5) << "round " << round << ": " << t << " delivered too little";
    }
  }
}

// An acknowledgement whose asynchronous commit the broker refuses (a rebalance in progress) is
// committed again by the subscriber: otherwise an idle group stays behind for good, its lag a
// lie (the chaos harness's balances consumers looked stuck), and a restart delivers it all again.
TEST_F(KafkaBusTest, ARefusedCommitIsSentAgain) {
  const std::string topic = "block.new.12";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto pub = OpenPublisher();
  ASSERT_TRUE(pub->Publish(Events(topic, 0, 3)).ok());
  auto sub = OpenSubscriber("recommit", {topic});
  auto got = PollN(*sub, 3, 20'000);
  ASSERT_EQ(got.size(), 3u);
  // The next OffsetCommit (API key 8) fails with REBALANCE_IN_PROGRESS (27).
  ASSERT_TRUE(cluster_->PushRequestErrors(8, {27}).ok());
  ASSERT_TRUE(sub->AckAll(got).ok());
  SubscribeOptions group;
  group.group = "recommit";
  group.topics = {topic};
  const bool caught_up = testing_util::WaitFor(
      [&] {
        (void)sub->Poll(10, 100);  // idle: nothing more to deliver
        auto lag = KafkaGroupLag(cluster_->url(), group);
        return lag.ok() && *lag == 0;
      },
      15'000);
  EXPECT_TRUE(caught_up) << "the refused commit was never sent again";
}

TEST_F(KafkaBusTest, TransactionalPublisherCommitsBatchesAndStopsWhenFenced) {
  const std::string topic = "block.new.11";
  ASSERT_TRUE(cluster_->CreateTopic(topic, 1).ok());
  auto old_pub = OpenPublisher(5'000, "?transactional=1", "relay-a");
  Status st = old_pub->Publish(Events(topic, 0, 3));
  ASSERT_TRUE(st.ok()) << st.ToString();
  // The mock does not fence by itself (a second producer with the same transactional.id does
  // not invalidate the first one's epoch), so the broker's answer is injected: the next EndTxn
  // (API key 26) says PRODUCER_FENCED (90), as a real broker does once a newer producer has
  // called InitProducerId.
  ASSERT_TRUE(cluster_->PushRequestErrors(26, {90}).ok());
  st = old_pub->Publish(Events(topic, 100, 101));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), kKafkaFencedReason) << st.ToString();
  EXPECT_NE(st.message().find("relay-a"), std::string::npos) << st.ToString();

  auto new_pub = OpenPublisher(5'000, "?transactional=1", "relay-a");
  st = new_pub->Publish(Events(topic, 3, 6));
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto sub = OpenSubscriber("txn", {topic});
  std::set<std::string> bodies;
  for (const auto& d : PollN(*sub, 7, 5'000)) bodies.insert(d.body);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bodies.count(Event(topic, i).body), 1u) << i;
}

}  // namespace
}  // namespace gapless

// The RabbitMQ bus against real brokers: the shared fixture node (GAPLESS_TEST_AMQP_URL, started
// by scripts/rabbitmq.sh) and, for the stop/restart test, a private node (RabbitMqServer).
// Every test uses its own queue and routing keys, so tests do not see each other's messages.
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "events/amqp_bus.h"
#include "testing/rabbitmq_server.h"
#include "testing/tls_certs.h"
#include "testing/wait_for.h"

namespace gapless {
namespace {

using testing_util::NowMs;

std::string SharedUrl() {
  const char* url = std::getenv("GAPLESS_TEST_AMQP_URL");
  return url == nullptr ? "" : url;
}

#define REQUIRE_AMQP()                                                           \
  do {                                                                           \
    if (SharedUrl().empty()) GTEST_SKIP() << "GAPLESS_TEST_AMQP_URL is not set"; \
  } while (0)

// A name no other test (or earlier run) uses.
std::string Unique(const std::string& prefix) {
  static int counter = 0;
  return prefix + "." + std::to_string(getpid()) + "x" + std::to_string(NowMs()) + "x" +
         std::to_string(counter++);
}

OutgoingEvent Event(const std::string& topic, int n) {
  OutgoingEvent e;
  e.topic = topic;
  e.key = "1";
  e.event_type = "block.new";
  e.event_id = topic + "#" + std::to_string(n);
  e.body = R"({"n":)" + std::to_string(n) + R"(,"topic":")" + topic + R"(","pad":")" +
           std::string(n % 50, 'x') + R"("})";
  return e;
}

std::unique_ptr<Subscriber> Subscribe(const std::string& url, const std::string& group,
                                      std::vector<std::string> topics) {
  SubscribeOptions options;
  options.group = group;
  options.topics = std::move(topics);
  auto sub = OpenAmqpSubscriber(url, options);
  EXPECT_TRUE(sub.ok()) << sub.status().ToString();
  return sub.ok() ? std::move(*sub) : nullptr;
}

std::unique_ptr<Publisher> Publish(const std::string& url, int64_t confirm_timeout_ms = 10'000) {
  PublisherOptions options;
  options.confirm_timeout_ms = confirm_timeout_ms;
  auto pub = OpenAmqpPublisher(url, options);
  EXPECT_TRUE(pub.ok()) << pub.status().ToString();
  return pub.ok() ? std::move(*pub) : nullptr;
}

// Polls until `want` deliveries arrived or `ms` passed (errors are retried: the subscriber
// reconnects on the next call).
std::vector<Delivery> PollUntil(Subscriber& sub, size_t want, int64_t ms) {
  std::vector<Delivery> out;
  int64_t end = NowMs() + ms;
  while (out.size() < want && NowMs() < end) {
    auto got = sub.Poll(want - out.size(), 200);
    if (!got.ok()) continue;
    for (auto& d : *got) out.push_back(std::move(d));
  }
  return out;
}

TEST(AmqpUrlTest, ParsesAndHidesThePassword) {
  auto url = ParseAmqpUrl("amqp://alice:s%40cret@broker.example:5673/prod%2Fevents");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "broker.example");
  EXPECT_EQ(url->port, 5673);
  EXPECT_EQ(url->user, "alice");
  EXPECT_EQ(url->password, "s@cret");
  EXPECT_EQ(url->vhost, "prod/events");
  EXPECT_EQ(url->Name().find("cret"), std::string::npos) << url->Name();

  auto defaults = ParseAmqpUrl("amqp://127.0.0.1");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->port, 5672);
  EXPECT_EQ(defaults->user, "guest");
  EXPECT_EQ(defaults->password, "guest");
  EXPECT_EQ(defaults->vhost, "/");
  EXPECT_EQ(ParseAmqpUrl("amqp://h:1/%2F")->vhost, "/");

  for (const char* bad :
       {"http://h:1", "amqp://", "amqp://h:", "amqp://h:99999", "amqp://h:x", "amqp://h:1/a/b",
        "amqp://h:1/%zz", "amqp://h:1?heartbeat=5", "amqp://:pw@h:1"}) {
    auto r = ParseAmqpUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << bad;
    }
  }
  auto tls =
      ParseAmqpUrl("amqps://u:p@mq.example/v?cacertfile=/etc/ca%20dir/ca.pem&verify=verify_peer");
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->port, 5671);
  EXPECT_EQ(tls->cacertfile, "/etc/ca dir/ca.pem");
  EXPECT_TRUE(tls->verify);
  EXPECT_EQ(tls->Name(), "amqps://u@mq.example:5671/v");
  EXPECT_FALSE(ParseAmqpUrl("amqps://h?verify=verify_none")->verify);
  for (const char* bad : {"amqps://h?cafile=x", "amqps://h?verify=maybe", "amqps://h?certfile=c",
                          "amqps://h?cacertfile"}) {
    auto r = ParseAmqpUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(ParseAmqpUrl("amqps://h?cafile=x").status().message().find("cafile"),
            std::string::npos);
  auto open = OpenAmqpPublisher("amqp://h:1/a/b", PublisherOptions{});
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(open.status().message().find("vhost"), std::string::npos);
}

TEST(AmqpBusTest, ConnectErrorsSayWhatToDo) {
  REQUIRE_AMQP();
  auto url = ParseAmqpUrl(SharedUrl());
  ASSERT_TRUE(url.ok());
  std::string wrong = "amqp://guest:wrong@" + url->host + ":" + std::to_string(url->port);
  auto refused = OpenAmqpPublisher(wrong, PublisherOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition) << refused.status().ToString();
  EXPECT_EQ(refused.status().message().find("wrong"), std::string::npos);

  // Nothing listens on port 1: opening succeeds (the relay must start while its broker is
  // down), publishing is Unavailable.
  auto down = OpenAmqpPublisher("amqp://127.0.0.1:1", PublisherOptions{});
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  Status publish = (*down)->Publish({OutgoingEvent{"block.new.1", "1", "block.new", "id", "{}"}});
  EXPECT_EQ(publish.code(), Code::kUnavailable) << publish.ToString();
}

TEST(AmqpBusTest, DeliversEveryEventInOrderPerRoutingKey) {
  REQUIRE_AMQP();
  std::string blocks = Unique("block.new"), txs = Unique("tx.new");
  std::string group = Unique("group");
  auto sub = Subscribe(SharedUrl(), group, {blocks, txs});
  auto pub = Publish(SharedUrl());
  ASSERT_TRUE(sub && pub);
  EXPECT_EQ(pub->name().find(":guest@"), std::string::npos) << pub->name();
  EXPECT_EQ(sub->Assignment(), std::vector<std::string>{"queue " + group});

  std::map<std::string, std::string> sent;  // event id -> body
  for (int batch = 0; batch < 4; ++batch) {
    std::vector<OutgoingEvent> events;
    for (int i = 0; i < 50; ++i) {
      int n = batch * 25 + i / 2;
      events.push_back(Event(i % 2 == 0 ? blocks : txs, n));
      sent[events.back().topic + "#" + std::to_string(n)] = events.back().body;
    }
    Status st = pub->Publish(events);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  ASSERT_EQ(sent.size(), 200u);

  std::vector<Delivery> got = PollUntil(*sub, 200, 20'000);
  ASSERT_EQ(got.size(), 200u);
  std::map<std::string, int> next = {{blocks, 0}, {txs, 0}};
  std::set<std::string> positions;
  for (const Delivery& d : got) {
    ASSERT_TRUE(next.count(d.topic)) << d.topic;
    std::string id = d.topic + "#" + std::to_string(next[d.topic]);
    EXPECT_EQ(d.body, sent[id]) << "out of order or altered at " << id;
    ++next[d.topic];
    EXPECT_FALSE(d.redelivered);
    positions.insert(d.position);
    EXPECT_TRUE(sub->Ack(d).ok());
  }
  EXPECT_EQ(next[blocks], 100);
  EXPECT_EQ(next[txs], 100);
  EXPECT_EQ(positions.size(), 200u);  // delivery tags are distinct
  // Nothing more.
  auto more = sub->Poll(10, 300);
  ASSERT_TRUE(more.ok());
  EXPECT_TRUE(more->empty());
}

TEST(AmqpBusTest, UnackedDeliveriesComeAgainToTheGroupMarkedRedelivered) {
  REQUIRE_AMQP();
  std::string topic = Unique("block.new"), group = Unique("group");
  auto first = Subscribe(SharedUrl(), group, {topic});
  auto pub = Publish(SharedUrl());
  ASSERT_TRUE(first && pub);
  std::vector<OutgoingEvent> events;
  for (int i = 0; i < 10; ++i) events.push_back(Event(topic, i));
  ASSERT_TRUE(pub->Publish(events).ok());

  std::vector<Delivery> got = PollUntil(*first, 10, 10'000);
  ASSERT_EQ(got.size(), 10u);
  std::set<std::string> unacked;
  for (size_t i = 0; i < got.size(); ++i) {
    if (i % 2 == 0) {
      ASSERT_TRUE(first->Ack(got[i]).ok());
    } else {
      unacked.insert(got[i].body);
    }
  }
  first.reset();  // a consumer that stops without acking the rest

  auto second = Subscribe(SharedUrl(), group, {topic});
  ASSERT_TRUE(second);
  std::vector<Delivery> again = PollUntil(*second, 10, 3'000);  // asks for more than expected
  ASSERT_EQ(again.size(), unacked.size());
  std::set<std::string> bodies;
  for (const Delivery& d : again) {
    EXPECT_TRUE(d.redelivered) << d.body;
    bodies.insert(d.body);
    EXPECT_TRUE(second->Ack(d).ok());
  }
  EXPECT_EQ(bodies, unacked);
}

// Reads one message from `queue` with basic.get: its body and its x-error header.
void GetOne(const std::string& url_text, const std::string& queue, std::string* body,
            std::string* error) {
  auto url = ParseAmqpUrl(url_text);
  ASSERT_TRUE(url.ok());
  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(conn);
  ASSERT_EQ(amqp_socket_open(socket, url->host.c_str(), url->port), AMQP_STATUS_OK);
  ASSERT_EQ(amqp_login(conn, "/", 0, AMQP_DEFAULT_FRAME_SIZE, 0, AMQP_SASL_METHOD_PLAIN,
                       url->user.c_str(), url->password.c_str())
                .reply_type,
            AMQP_RESPONSE_NORMAL);
  amqp_channel_open(conn, 1);
  ASSERT_EQ(amqp_get_rpc_reply(conn).reply_type, AMQP_RESPONSE_NORMAL);
  amqp_rpc_reply_t r = amqp_basic_get(conn, 1, amqp_cstring_bytes(queue.c_str()), /*no_ack=*/1);
  ASSERT_EQ(r.reply_type, AMQP_RESPONSE_NORMAL);
  ASSERT_EQ(r.reply.id, AMQP_BASIC_GET_OK_METHOD) << "the queue " << queue << " is empty";
  amqp_message_t message;
  ASSERT_EQ(amqp_read_message(conn, 1, &message, 0).reply_type, AMQP_RESPONSE_NORMAL);
  body->assign(static_cast<const char*>(message.body.bytes), message.body.len);
  const amqp_table_t& headers = message.properties.headers;
  for (int i = 0; i < headers.num_entries; ++i) {
    const amqp_table_entry_t& e = headers.entries[i];
    std::string key(static_cast<const char*>(e.key.bytes), e.key.len);
    if (key == "x-error" && e.value.kind == AMQP_FIELD_KIND_UTF8) {
      error->assign(static_cast<const char*>(e.value.value.bytes.bytes), e.value.value.bytes.len);
    }
  }
  EXPECT_EQ(message.properties.delivery_mode, AMQP_DELIVERY_PERSISTENT);
  amqp_destroy_message(&message);
  amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn);
}

TEST(AmqpBusTest, DeadLetterLandsInTheGroupsDlqWithTheError) {
  REQUIRE_AMQP();
  std::string topic = Unique("block.new"), group = Unique("group");
  auto sub = Subscribe(SharedUrl(), group, {topic});
  auto pub = Publish(SharedUrl());
  ASSERT_TRUE(sub && pub);
  ASSERT_TRUE(pub->Publish({Event(topic, 7)}).ok());
  std::vector<Delivery> got = PollUntil(*sub, 1, 10'000);
  ASSERT_EQ(got.size(), 1u);
  Status st = sub->DeadLetter(got[0], "decode failed: field logs");
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sub->Ack(got[0]).ok());

  std::string body, error;
  GetOne(SharedUrl(), group + ".dlq", &body, &error);
  EXPECT_EQ(body, Event(topic, 7).body);
  EXPECT_EQ(error, "decode failed: field logs");
  // The original is gone from the group (acked on the wire: a new member sees nothing).
  sub.reset();
  auto next = Subscribe(SharedUrl(), group, {topic});
  ASSERT_TRUE(next);
  auto lag = next->Lag();
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(*lag, 0);
}

TEST(AmqpBusTest, LagCountsWhatTheGroupHasNotAcked) {
  REQUIRE_AMQP();
  std::string topic = Unique("block.new"), group = Unique("group");
  auto sub = Subscribe(SharedUrl(), group, {topic});
  auto pub = Publish(SharedUrl());
  ASSERT_TRUE(sub && pub);
  auto lag = sub->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(*lag, 0);

  std::vector<OutgoingEvent> events;
  for (int i = 0; i < 7; ++i) events.push_back(Event(topic, i));
  ASSERT_TRUE(pub->Publish(events).ok());
  lag = sub->Lag();
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(*lag, 7);

  std::vector<Delivery> got = PollUntil(*sub, 3, 5'000);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(*sub->Lag(), 7);  // polled is not acked
  for (const Delivery& d : got) ASSERT_TRUE(sub->Ack(d).ok());
  EXPECT_EQ(*sub->Lag(), 4);
  // The broker agrees: the acks reached it (a new member of the group sees 4 ready).
  sub.reset();
  sub = Subscribe(SharedUrl(), group, {topic});
  ASSERT_TRUE(sub);
  EXPECT_EQ(*sub->Lag(), 4);
  got = PollUntil(*sub, 4, 5'000);
  ASSERT_EQ(got.size(), 4u);
  for (const Delivery& d : got) ASSERT_TRUE(sub->Ack(d).ok());
  EXPECT_EQ(*sub->Lag(), 0);
}

TEST(AmqpBusTest, PauseStopsDeliveriesUntilResume) {
  REQUIRE_AMQP();
  std::string topic = Unique("block.new"), group = Unique("group");
  auto sub = Subscribe(SharedUrl(), group, {topic});
  auto pub = Publish(SharedUrl());
  ASSERT_TRUE(sub && pub);
  ASSERT_TRUE(sub->Pause(topic, 0).ok());
  std::vector<OutgoingEvent> events;
  for (int i = 0; i < 5; ++i) events.push_back(Event(topic, i));
  ASSERT_TRUE(pub->Publish(events).ok());
  auto none = sub->Poll(10, 300);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(*sub->Lag(), 5);
  ASSERT_TRUE(sub->Resume(topic, 0).ok());
  std::vector<Delivery> got = PollUntil(*sub, 5, 5'000);
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].body, events[i].body);
}

// The broker stops (gracefully) while a publisher sends batches: the batch in flight fails with
// Unavailable within the confirm timeout, publishing while it is down fails fast, and after the
// restart the same publisher works again. Every batch that was confirmed is in the durable
// queue after the restart.
TEST(AmqpBusTest, BrokerStopAndRestartLosesNothingConfirmed) {
  auto server = RabbitMqServer::Start();
  if (!server.ok() && server.status().code() == Code::kFailedPrecondition) {
    GTEST_SKIP() << server.status().ToString();
  }
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string url = (*server)->url();
  std::string topic = Unique("block.new"), group = Unique("group");
  constexpr int64_t kConfirmTimeoutMs = 3'000;
  auto sub = Subscribe(url, group, {topic});
  auto pub = Publish(url, kConfirmTimeoutMs);
  ASSERT_TRUE(sub && pub);

  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    (*server)->Stop();
  });
  std::set<std::string> confirmed;
  Status failure;
  int n = 0;
  int64_t end = NowMs() + 20'000;
  while (failure.ok() && NowMs() < end) {
    std::vector<OutgoingEvent> batch;
    for (int i = 0; i < 20; ++i) batch.push_back(Event(topic, n++));
    int64_t start = NowMs();
    failure = pub->Publish(batch);
    EXPECT_LT(NowMs() - start, kConfirmTimeoutMs + 2'000) << "Publish hung";
    if (failure.ok()) {
      for (auto& e : batch) confirmed.insert(e.body);
    }
  }
  stopper.join();
  ASSERT_FALSE(failure.ok()) << "the broker stopped but every Publish succeeded";
  EXPECT_EQ(failure.code(), Code::kUnavailable) << failure.ToString();
  EXPECT_GT(confirmed.size(), 0u);

  // Down: fails fast, and the next call tries again.
  int64_t start = NowMs();
  Status down = pub->Publish({Event(topic, n++)});
  EXPECT_EQ(down.code(), Code::kUnavailable) << down.ToString();
  EXPECT_LT(NowMs() - start, kConfirmTimeoutMs + 1'000);

  ASSERT_TRUE((*server)->Restart().ok());
  std::vector<OutgoingEvent> after;
  for (int i = 0; i < 5; ++i) after.push_back(Event(topic, n++));
  Status st = pub->Publish(after);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (auto& e : after) confirmed.insert(e.body);

  // The subscriber's connection died with the broker; Poll reconnects and reads everything.
  std::set<std::string> received;
  end = NowMs() + 20'000;
  while (NowMs() < end &&
         !std::includes(received.begin(), received.end(), confirmed.begin(), confirmed.end())) {
    auto got = sub->Poll(500, 200);
    if (!got.ok()) continue;
    for (const Delivery& d : *got) {
      received.insert(d.body);
      ASSERT_TRUE(sub->Ack(d).ok());
    }
  }
  for (const std::string& body : confirmed) {
    EXPECT_TRUE(received.count(body)) << "confirmed but lost: " << body;
  }
}

// amqps:// against a node that serves AMQPS only, with a throwaway CA: events go through with the
// CA that signed the node's certificate; another CA is refused at once (FailedPrecondition, not a
// retried outage); a plain amqp:// connection gets nowhere.
TEST(AmqpBusTest, AmqpsVerifiesTheBrokerAndCarriesEvents) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/amqp_bus_itest-certs";
  std::filesystem::remove_all(dir);
  auto certs = MakeTlsCertificates(dir);
  ASSERT_TRUE(certs.ok()) << certs.status().ToString();
  auto server = RabbitMqServer::StartTls(*certs);
  if (!server.ok() && server.status().code() == Code::kFailedPrecondition) {
    GTEST_SKIP() << server.status().ToString();
  }
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string base = "amqps://guest:guest@localhost:" + std::to_string((*server)->port());
  const std::string url = base + "?cacertfile=" + certs->ca;
  std::string topic = Unique("block.new"), group = Unique("group");
  auto sub = Subscribe(url, group, {topic});
  auto pub = Publish(url);
  ASSERT_TRUE(sub && pub);
  std::vector<OutgoingEvent> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(Event(topic, i));
  Status st = pub->Publish(batch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto got = PollUntil(*sub, batch.size(), 20'000);
  ASSERT_EQ(got.size(), batch.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].body, batch[i].body);

  // Another CA: the broker's certificate does not verify, which no retry changes.
  auto refused = OpenAmqpPublisher(base + "?cacertfile=" + certs->other_ca, PublisherOptions{});
  Status refused_st = refused.ok() ? (*refused)->Publish({Event(topic, 99)}) : refused.status();
  ASSERT_FALSE(refused_st.ok());
  EXPECT_EQ(refused_st.code(), Code::kFailedPrecondition) << refused_st.ToString();
  EXPECT_NE(refused_st.message().find("does not verify"), std::string::npos)
      << refused_st.ToString();
  // Plain AMQP to the TLS port gets no AMQP answer.
  auto plain =
      OpenAmqpPublisher("amqp://guest:guest@127.0.0.1:" + std::to_string((*server)->port()),
                        PublisherOptions{.confirm_timeout_ms = 2'000});
  Status plain_st = plain.ok() ? (*plain)->Publish({Event(topic, 100)}) : plain.status();
  EXPECT_FALSE(plain_st.ok());
}

}  // namespace
}  // namespace gapless

// amqp_bus: the RabbitMQ (AMQP 0-9-1) implementation of events/bus.h, on rabbitmq-c.
//
// URL: amqp://[user:pass@]host[:port][/vhost]. user, pass and vhost are percent-decoded
// ("/%2F" is the vhost "/"); defaults guest/guest, port 5672, vhost "/". No query parameters.
// A malformed URL is FailedPrecondition naming the problem; name() never shows the password.
//
// Publisher. One connection, one channel in confirm mode (confirm.select). It declares the
// durable topic exchange `explorer.events` and publishes each event there with routing key =
// topic, mandatory=false (a routing key no queue is bound to is not an error), delivery_mode 2
// (persistent), content_type application/json, message_id = event_id, type = event_type, and
// the headers event_type and event_id. Publish sends the whole batch, then waits for the
// broker's basic.ack of every message (single or multiple acks) until confirm_timeout_ms has
// passed since the call began. A basic.nack, a basic.return, a channel or connection close, a
// socket error or the timeout is Unavailable naming the problem; the connection is then dropped
// and the next Publish opens a new one (and declares again). Bad credentials, a missing vhost
// or an exchange declared with other properties are FailedPrecondition.
//
// Subscriber. One connection; channel 1 declares the durable queue `options.group` (and the
// exchange), binds it to `explorer.events` once per topic (routing key = the topic), sets
// basic.qos prefetch 256 and consumes with manual acks. Poll reads deliveries
// (Delivery.position = the delivery tag in decimal, redelivered as the broker says, topic = the
// routing key). Ack is basic.ack of that one tag (acks in any order are fine in AMQP). A
// delivery from before a reconnect cannot be acked any more: the broker requeued it when the old
// connection died and delivers it again, so Ack of it is a no-op that returns Ok. DeadLetter
// publishes the body to the durable queue "{group}.dlq" through the default exchange, with the
// headers x-error (the error) and x-original-topic, persistent, on a second connection that it
// opens when first needed (a confirm channel of its own, so publisher confirms never mix with
// deliveries); it waits for the confirm (10 s).
//   Pause cancels the consumer (basic.cancel) and Resume consumes again (basic.consume):
// while paused the broker sends this subscriber nothing new and Poll waits out its timeout and
// returns no deliveries; deliveries the broker sent before the cancel stay unacked with us and
// are returned by the first Poll after Resume (nothing is lost, nothing requeued). Pause and
// Resume record the state even when the connection is down (the reconnect honours it).
//   Lag = messages ready in the queue (queue.declare passive: message_count) + deliveries this
// subscriber holds unacked: polled, or sent by the broker (prefetch) and not yet polled (Lag
// reads those off the socket into a buffer that Poll returns first). A delivery between the
// broker's queue and our socket at that moment is missed, so Lag is exact only when idle.
//   options.transient (events tail): the queue is exclusive and auto-deleted instead of durable.
//   Assignment() = {"queue <group>"}. from_beginning means nothing here: a queue holds what was
// routed to it since it was declared (by any subscriber of the group), no more.
//   A broken connection makes the call Unavailable; the next Poll (or Ack, Lag) reconnects and
// declares again, and the broker redelivers every unacked delivery (redelivered = true).
//
// Heartbeats: 60 s, serviced while the library is called (Poll, Publish); a subscriber that does
// not call Poll for two minutes may find its connection closed by the broker (its deliveries
// requeued; at least once, consumers dedup by event_id).
//
// Thread-safety: one thread at a time per Publisher and per Subscriber (a rabbitmq-c connection
// is not thread-safe). Different objects may be used from different threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "events/bus.h"

namespace gapless {

// The exchange every event is published to.
inline constexpr std::string_view kAmqpExchange = "explorer.events";

// A parsed amqp:// URL.
struct AmqpUrl {
  std::string host;
  int port = 5672;  // 5671 for amqps
  std::string user = "guest";
  std::string password = "guest";
  std::string vhost = "/";
  // amqps://: TLS (rabbitmq-c's OpenSSL socket). The server's certificate is verified (chain and
  // host name) against cacertfile, or the system's CAs when none is given, unless
  // verify=verify_none; certfile and keyfile: a client certificate, when the server asks for one.
  bool tls = false;
  std::string cacertfile, certfile, keyfile;
  bool verify = true;
  // "amqp://user@host:port/vhost" or "amqps://..." (vhost percent-encoded), for logs: never the
  // password. Also the bus's cursor key (node/relay.h): it must not change for a given bus.
  std::string Name() const;
};

// FailedPrecondition naming the problem when `url` is not
// amqp[s]://[user:pass@]host[:port][/vhost][?cacertfile=PATH&certfile=PATH&keyfile=PATH&verify=
// verify_peer|verify_none] (the query only for amqps, with RabbitMQ's URI parameter names).
Result<AmqpUrl> ParseAmqpUrl(std::string_view url);

// Connects, declares the exchange and enables confirms. A broker that cannot be reached is not an
// error here (the first Publish connects); FailedPrecondition for a bad URL, bad credentials or a
// missing vhost.
Result<std::unique_ptr<Publisher>> OpenAmqpPublisher(std::string_view url,
                                                     const PublisherOptions& options);

// Connects, declares the exchange, the group's queue and its bindings, and starts consuming.
// FailedPrecondition for a bad URL or an empty group; Unavailable when the broker cannot be
// reached. No topics is allowed: the queue is consumed as it is (e.g. a group's "{group}.dlq").
Result<std::unique_ptr<Subscriber>> OpenAmqpSubscriber(std::string_view url,
                                                       const SubscribeOptions& options);

// The messages ready in the group's queue (read with a passive queue.declare, without consuming);
// NotFound when there is no such queue. Deliveries a consumer holds unacked are not counted.
Result<int64_t> AmqpGroupLag(std::string_view url, const SubscribeOptions& options);

}  // namespace gapless

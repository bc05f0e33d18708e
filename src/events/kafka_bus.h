// kafka_bus: the bus interface (events/bus.h) on Kafka, through librdkafka's C API.
//
// URL: kafka://host:port[,host:port...][?transactional=1]. A malformed URL (no scheme, an empty
// host, a port that is not 1..65535, an unknown query parameter) is FailedPrecondition naming the
// problem. Further query parameters with a dot in the name are librdkafka properties passed to
// every client (e.g. ?session.timeout.ms=10000&security.protocol=ssl); librdkafka rejects unknown
// ones when the client is made (FailedPrecondition). The tests use it for a short session timeout,
// which the mock cluster's group coordinator waits out when a member leaves.
//
// Publisher: an idempotent producer (enable.idempotence=true, acks=all, max.in.flight 5, which
// with idempotence keeps order per partition, retries included). Each event is one message on
// event.topic with key event.key and headers event_type and event_id. Publish produces the whole
// batch, then serves delivery reports until every one has arrived or confirm_timeout_ms has
// passed (message.timeout.ms is set to the same value, so librdkafka itself gives up on a message
// by then). Ok only when every report succeeded. Otherwise:
//   not confirmed in time, broker/transport errors  -> Unavailable ("topic T: <librdkafka error>")
//   a message the broker refuses as too large        -> InvalidData
//   authorization, bad configuration                 -> FailedPrecondition
//   a fenced producer (transactional)                -> Aborted
// Messages still queued at the deadline are purged, so a failed Publish leaves nothing behind to
// arrive later unaccounted (though some may already be on the broker: the caller resends the
// whole batch, and consumers deduplicate by event_id). After a fatal librdkafka error (the
// idempotent producer's sequence state is broken, or it was fenced) the handle is destroyed and
// the next Publish creates a new one.
//
// Transactional mode (?transactional=1): transactional.id = PublisherOptions::kafka_transactional_
// id; init_transactions runs once per handle, each Publish is one transaction (begin, produce,
// commit), and a failed Publish aborts it, so consumers reading committed data (librdkafka's
// default isolation.level=read_committed) see a batch entirely or not at all. A newer producer
// with the same transactional.id fences this one: Publish returns Aborted with reason
// kKafkaFencedReason ("another producer with transactional.id X took over"); the caller stops
// relaying as when it loses a lease.
//
// Subscriber: a KafkaConsumer in group options.group subscribed to options.topics, with
// enable.auto.commit=false, enable.auto.offset.store=false and auto.offset.reset earliest/latest
// from from_beginning. Poll returns up to `max` messages. Acks may come in any order: per
// partition the subscriber keeps the offsets delivered and not yet acknowledged, and commits only
// up to the lowest of them (commit offset = the next offset to consume: the lowest unacked offset,
// or the highest delivered + 1 when all are acked). Commits on Ack are asynchronous (an ack does
// not wait for a round trip); on partition revocation and on close the subscriber commits
// synchronously, so a clean shutdown or rebalance loses no acks; a crash may lose the last async
// commits, and those deliveries come again (at least once). Rebalances drop the ack tracking of
// revoked partitions: an Ack of a delivery from a partition that was revoked meanwhile is a no-op
// (Ok), and the partition's new owner gets the delivery again.
//
// DeadLetter produces the body to "{topic}.dlq" (key as the original, headers error, event_id and
// event_type when the original had them) through an internal idempotent producer and waits for
// its delivery report (confirm within 10 s, else Unavailable).
// Pause/Resume pause one partition's fetching (rd_kafka_pause_partitions); the subscriber
// remembers paused partitions and pauses them again when a rebalance assigns them back.
// Lag = sum over assigned partitions of (high watermark - committed offset), where the committed
// offset is the larger of the broker's and this subscriber's latest commit (so it reflects acks
// whose async commit is still in flight). A partition without a committed offset counts from its
// low watermark when from_beginning, else as 0.
// Poll errors: a subscribed topic that does not exist (yet) is logged and skipped; other consumer
// errors with no message to return are mapped by code (transport -> Unavailable).
//
// Error codes are chosen from librdkafka's error codes, never from message text; the Status's
// reason() is "kafka:<librdkafka error name>" (e.g. "kafka:_MSG_TIMED_OUT").
//
// Testing: the environment variable GAPLESS_TEST_KAFKA_CONNECT="p=q,..." (ports on 127.0.0.1)
// sends every broker connection for 127.0.0.1:p to 127.0.0.1:q, read when each client is made.
// The chaos harness puts a proxy per broker on a process's Kafka links so; a proxy in the
// bootstrap list alone would be bypassed, since brokers advertise their own addresses.
//
// Thread-safety: one thread at a time per Publisher and per Subscriber (librdkafka's own threads
// never call back into them outside Publish/Poll/Ack/... calls, except to log).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "events/bus.h"

namespace gapless {

// The reason() of the Aborted status a fenced transactional producer returns.
inline constexpr const char* kKafkaFencedReason = "kafka:fenced";

struct KafkaUrl {
  std::string bootstrap;  // "h1:9092,h2:9092"
  bool transactional = false;
  // Other query parameters whose name has a dot: librdkafka properties for every client this bus
  // makes, set after gapless's own (session.timeout.ms=10000, security.protocol=ssl, ...).
  std::vector<std::pair<std::string, std::string>> properties;
};

// Parses kafka://host:port[,host:port...][?transactional=0|1][&<librdkafka property>=<value>...];
// FailedPrecondition on any problem, including a property gapless sets itself (group.id,
// enable.auto.commit, enable.idempotence, ...).
Result<KafkaUrl> ParseKafkaUrl(std::string_view url);

Result<std::unique_ptr<Publisher>> OpenKafkaPublisher(std::string_view url,
                                                      const PublisherOptions& options);
Result<std::unique_ptr<Subscriber>> OpenKafkaSubscriber(std::string_view url,
                                                        const SubscribeOptions& options);

// The number of partitions of `topic` (metadata). NotFound when the topic does not exist.
Result<int> KafkaPartitionCount(std::string_view url, const std::string& topic);

// The group's lag over the topics' partitions (high watermark - committed offset; a partition
// without a committed offset counts from its low watermark), read with a consumer handle that
// never joins the group. NotFound when the group has committed no offset.
Result<int64_t> KafkaGroupLag(std::string_view url, const SubscribeOptions& options);

}  // namespace gapless

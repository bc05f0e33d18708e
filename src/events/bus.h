// bus: the one interface between gapless and an event bus (Kafka, RabbitMQ, Redis Streams), for
// both sides: a Publisher sends envelopes and returns only once the broker has confirmed them; a
// Subscriber delivers them to a consumer group and takes acknowledgements. The bus is chosen by
// the URL's scheme (OpenPublisher / OpenSubscriber in events/open_bus.h):
//
//   kafka://host:port[,host:port...][?transactional=1]   librdkafka (events/kafka_bus.*)
//   amqp[s]://[user:pass@]host:port[/vhost][?tls]         rabbitmq-c (events/amqp_bus.*)
//   redis[s]://[:pass@]host:port[/db][?tls]               RedisConn  (events/redis_bus.*)
//
// Naming, the same on every bus (seed 004): the topic of an event is "{event_type}.{chain_id}"
// (block.new.1). Kafka: that topic, message key = the chain id in decimal (one partition per chain
// keeps order), headers event_type and event_id. RabbitMQ: topic exchange `explorer.events`,
// routing key = the topic, persistent messages; a consumer group is a durable queue named after
// the group, bound to its topics. Redis: one stream per topic, key = the topic, fields
// event_type, event_id, body; a consumer group is a stream consumer group.
//
// Dead letters: Kafka topic "{topic}.dlq"; RabbitMQ queue "{group}.dlq" (through the default
// exchange); Redis stream "{topic}.dlq". Each carries the original body and the error.
//
// Delivery is at least once everywhere: an event may arrive twice (a publish retried after a lost
// confirmation, a consumer that crashed before its ack), always with the same event_id, so
// consumers deduplicate by event_id (events/consumer.h does).
//
// Thread-safety: one thread at a time per Publisher and per Subscriber.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gapless {

// One event ready to send: the envelope (events/event.h) and where it goes.
struct OutgoingEvent {
  std::string topic;       // "{event_type}.{chain_id}"
  std::string key;         // the chain id in decimal (Kafka message key)
  std::string event_type;  // "block.new"
  std::string event_id;    // the envelope's event_id (a UUID)
  std::string body;        // the envelope, compact JSON
  // Kafka: the partition to write to; -1: chosen by the producer's partitioner from the key.
  int32_t partition = -1;
};

struct PublisherOptions {
  // How long Publish waits for the broker to confirm a batch before it gives up (Unavailable).
  int64_t confirm_timeout_ms = 10'000;
  // Redis Streams: XADD ... MAXLEN ~ this (0: no trim).
  uint64_t redis_max_len = 1'000'000;
  // Kafka: the transactional.id when the URL asks for ?transactional=1 (each Publish is one
  // Kafka transaction; a newer producer with the same id fences this one).
  std::string kafka_transactional_id = "gapless-relay";
};

class Publisher {
 public:
  virtual ~Publisher() = default;
  // The bus for logs and status: scheme and hosts, never a password ("kafka://h1:9092,h2:9092").
  virtual std::string name() const = 0;
  // Sends `events` in order; Ok only once the broker has confirmed every one of them (Kafka
  // acks=all with the idempotent producer, RabbitMQ publisher confirms, Redis XADD replies).
  // Unavailable when the broker cannot be reached or does not confirm within confirm_timeout_ms:
  // some prefix may have been delivered, and the caller sends the whole batch again (the same
  // event ids). The publisher reconnects by itself on the next call.
  virtual Status Publish(const std::vector<OutgoingEvent>& events) = 0;
};

struct SubscribeOptions {
  std::string group;                // consumer group (Kafka group.id, AMQP queue, stream group)
  std::vector<std::string> topics;  // "{event_type}.{chain_id}"
  // A group that has never consumed starts at the oldest retained event (true) or at new
  // events only (false). RabbitMQ: a queue only holds what was published after it was declared.
  bool from_beginning = true;
  // Redis: the consumer's name within its group; Kafka: client.id. Empty: host-pid.
  std::string consumer_name;
  // A throw-away subscription (`gapless events tail`): nothing of it outlives the subscriber.
  // RabbitMQ: an exclusive auto-delete queue; Redis: the groups are destroyed on close; Kafka:
  // offsets are never committed.
  bool transient = false;
  // Kafka: the consumer's queue of fetched messages is bounded to about this many bytes
  // (queued.max.messages.kbytes, at least 1 MiB; librdkafka then caps a fetch response, the
  // unset fetch.max.bytes, at the same), unless the URL sets it. 0: librdkafka's defaults (64 MiB
  // and 50 MiB). The other buses prefetch what their own settings say.
  uint64_t max_queue_bytes = 0;
};

// One message as the bus delivered it.
struct Delivery {
  std::string topic;
  int32_t partition = 0;     // Kafka partition; 0 on the other buses
  std::string position;      // Kafka offset, AMQP delivery tag, stream entry id (for logs)
  std::string body;          // the envelope JSON
  bool redelivered = false;  // the bus knows it delivered this before (AMQP, Redis pending list)
  uint64_t handle = 0;       // the subscriber's own reference, for Ack
};

class Subscriber {
 public:
  virtual ~Subscriber() = default;
  virtual std::string name() const = 0;
  // Up to `max` deliveries, waiting at most timeout_ms for the first; empty on timeout.
  // Unavailable when the bus is unreachable (the subscriber reconnects on the next call;
  // unacknowledged deliveries come again).
  virtual Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) = 0;
  // The delivery is done with (processed, a duplicate, or dead-lettered): the group does not get
  // it again. Acks may come in any order; Kafka commits each partition's offset only up to the
  // lowest delivery not yet acknowledged.
  virtual Status Ack(const Delivery& delivery) = 0;
  // Ack of each, in order; Kafka sends one offset commit for all of them instead of one each.
  virtual Status AckAll(const std::vector<Delivery>& deliveries) {
    Status first;
    for (const Delivery& d : deliveries) {
      Status st = Ack(d);
      if (first.ok()) first = st;
    }
    return first;
  }
  // Sends the delivery's body, with `error`, to the dead-letter destination (see the file
  // comment). The caller acks the delivery afterwards.
  virtual Status DeadLetter(const Delivery& delivery, std::string_view error) = 0;
  // Gives an unprocessed delivery back: it is delivered again later, and so is everything after
  // it in its partition (Kafka: the partition's position goes back to its offset, and the
  // offset commit stays below it; deliveries may be handed back in any order: the partition goes
  // back to the lowest; a partition revoked meanwhile needs nothing: its new owner reads from the
  // committed offset). A bounded consumer's back-pressure that does not rely on the
  // client library's pause state (node/kafka_worker.h). FailedPrecondition on the other buses.
  virtual Status HandBack(const Delivery& delivery) {
    (void)delivery;
    return FailedPrecondition(name() + " cannot hand a delivery back");
  }
  // Stops fetching from one partition (Kafka) or from the whole subscription (the other buses)
  // until Resume; deliveries already polled are unaffected.
  virtual Status Pause(const std::string& topic, int32_t partition) = 0;
  virtual Status Resume(const std::string& topic, int32_t partition) = 0;
  // Events published to the subscribed topics that this group has not yet acknowledged (Kafka:
  // high watermark - committed offset, summed; AMQP: messages ready + unacked in the queue;
  // Redis: the group's lag + pending entries).
  virtual Result<int64_t> Lag() = 0;
  // What this consumer is assigned now, for the status report ("block.new.1[0]").
  virtual std::vector<std::string> Assignment() const = 0;
};

}  // namespace gapless

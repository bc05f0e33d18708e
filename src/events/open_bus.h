// open_bus: a Publisher or Subscriber for a bus URL, chosen by its scheme (events/bus.h):
// kafka://, amqp:// and amqps:// (TLS), redis:// and rediss:// (TLS).
// FailedPrecondition naming the URL for an unknown scheme or a malformed URL.
#pragma once

#include <memory>
#include <string_view>

#include "events/bus.h"

namespace gapless {

Result<std::unique_ptr<Publisher>> OpenPublisher(std::string_view url,
                                                 const PublisherOptions& options = {});
Result<std::unique_ptr<Subscriber>> OpenSubscriber(std::string_view url,
                                                   const SubscribeOptions& options);

// Events published to `options.topics` that consumer group `options.group` has not acknowledged
// (the Subscriber::Lag of the group), read without joining the group; on RabbitMQ only the
// messages ready in the group's queue (AmqpGroupLag: deliveries consumers hold unacked cannot be
// counted from a client). NotFound when the bus has no such group.
Result<int64_t> GroupLag(std::string_view url, const SubscribeOptions& options);

// The bus URL for status output: redacted (core/redact.h), without its query ("kafka://h:9092").
std::string BusName(std::string_view url);

}  // namespace gapless

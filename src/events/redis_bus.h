// redis_bus: the Redis Streams bus (bus.h), over hiredis (coord/redis.h).
//
// Publisher: one EVAL of lua/events_publish.lua per batch (500 events at most per EVAL) appends
// every event to its topic's stream (XADD MAXLEN ~ redis_max_len, fields event_type, event_id,
// body) in one round trip; the reply is the confirmation. A batch whose reply was lost is sent
// again whole (same ids).
//
// Subscriber: a stream consumer group per topic (XGROUP CREATE ... MKSTREAM at the first poll,
// from "0" or "$"), read with XREADGROUP ... BLOCK. A consumer that restarts under the same name
// first gets its own pending entries again; entries a dead consumer left pending longer than
// claim_idle_ms are claimed by the next Poll of any consumer of the group (XAUTOCLAIM), so they
// are delivered again (redelivered = true). Ack = XACK. Dead letters go to the stream
// "{topic}.dlq" (MAXLEN ~ 100,000) with fields event_id, body, error, group. Pause stops the whole
// subscription. Lag = the group's lag (XINFO GROUPS, Redis 7) plus its pending entries, over every
// topic.
//
// Thread-safety: one thread at a time per Publisher / Subscriber (each has its own connection).
#pragma once

#include <memory>
#include <string_view>

#include "events/bus.h"

namespace gapless {

Result<std::unique_ptr<Publisher>> OpenRedisPublisher(std::string_view url,
                                                      const PublisherOptions& options);

// claim_idle_ms: how long an entry stays pending with a silent consumer before another takes it.
Result<std::unique_ptr<Subscriber>> OpenRedisSubscriber(std::string_view url,
                                                        const SubscribeOptions& options,
                                                        int64_t claim_idle_ms = 60'000);

// The lag of a consumer group (as Subscriber::Lag), read with XINFO GROUPS only.
Result<int64_t> RedisGroupLag(std::string_view url, const SubscribeOptions& options);

}  // namespace gapless

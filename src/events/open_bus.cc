#include "events/open_bus.h"

#include "core/redact.h"
#include "events/redis_bus.h"
#if GAPLESS_HAVE_KAFKA
#include "events/kafka_bus.h"
#endif
#if GAPLESS_HAVE_AMQP
#include "events/amqp_bus.h"
#endif

namespace gapless {
namespace {

enum class Scheme { kKafka, kAmqp, kRedis, kUnknown };

Scheme SchemeOf(std::string_view url) {
  if (url.starts_with("kafka://")) return Scheme::kKafka;
  if (url.starts_with("amqp://") || url.starts_with("amqps://")) return Scheme::kAmqp;
  if (url.starts_with("redis://") || url.starts_with("rediss://")) return Scheme::kRedis;
  return Scheme::kUnknown;
}

Status UnknownScheme(std::string_view url) {
  return FailedPrecondition("event bus URL \"" + BusName(url) +
                            "\": the scheme must be kafka://, amqp://, amqps://, redis:// or "
                            "rediss://");
}

}  // namespace

std::string BusName(std::string_view url) {
  // The query holds client settings (Kafka's may hold a SASL password): not part of the name.
  return RedactUrl(url.substr(0, url.find('?')));
}

Result<std::unique_ptr<Publisher>> OpenPublisher(std::string_view url,
                                                 const PublisherOptions& options) {
  switch (SchemeOf(url)) {
    case Scheme::kRedis:
      return OpenRedisPublisher(url, options);
#if GAPLESS_HAVE_KAFKA
    case Scheme::kKafka:
      return OpenKafkaPublisher(url, options);
#endif
#if GAPLESS_HAVE_AMQP
    case Scheme::kAmqp:
      return OpenAmqpPublisher(url, options);
#endif
    default:
      return UnknownScheme(url);
  }
}

Result<std::unique_ptr<Subscriber>> OpenSubscriber(std::string_view url,
                                                   const SubscribeOptions& options) {
  switch (SchemeOf(url)) {
    case Scheme::kRedis:
      return OpenRedisSubscriber(url, options);
#if GAPLESS_HAVE_KAFKA
    case Scheme::kKafka:
      return OpenKafkaSubscriber(url, options);
#endif
#if GAPLESS_HAVE_AMQP
    case Scheme::kAmqp:
      return OpenAmqpSubscriber(url, options);
#endif
    default:
      return UnknownScheme(url);
  }
}

Result<int64_t> GroupLag(std::string_view url, const SubscribeOptions& options) {
  switch (SchemeOf(url)) {
    case Scheme::kRedis:
      return RedisGroupLag(url, options);
#if GAPLESS_HAVE_AMQP
    case Scheme::kAmqp:
      return AmqpGroupLag(url, options);
#endif
#if GAPLESS_HAVE_KAFKA
    case Scheme::kKafka:
      return KafkaGroupLag(url, options);
#endif
    default:
      return UnknownScheme(url);
  }
}

}  // namespace gapless

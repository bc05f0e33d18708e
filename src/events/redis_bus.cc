#include "events/redis_bus.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "coord/redis.h"
#include "events/event.h"
#include "fmt/format.h"

namespace gapless {
namespace {

constexpr std::string_view kBusyGroup = "BUSYGROUP";
// Dead-letter streams are bounded too (DESIGN: no key without a TTL or a bound): the newest
// ~100,000 dead letters per topic are kept.
constexpr uint64_t kDeadLetterMaxLen = 100'000;

// "redis://host:port" or "rediss://..." (TLS): the bus's name, which keys the relay's cursor.
std::string BusUrlName(const RedisConn& conn) {
  return (conn.url().tls.enabled ? "rediss://" : "redis://") + conn.Describe();
}

std::string DefaultConsumerName() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("{}-{}", host, getpid());
}

// The group's lag plus its pending entries over every topic (Subscriber::Lag); NotFound when no
// topic has the group.
Result<int64_t> GroupLagOn(RedisConn& conn, const SubscribeOptions& options) {
  int64_t total = 0;
  bool found = false;
  for (const std::string& topic : options.topics) {
    Result<RedisReply> r = conn.Command({"XINFO", "GROUPS", topic});
    if (!r.ok()) {
      if (r.status().code() == Code::kInternal) continue;  // no such stream yet
      return r.status();
    }
    for (const RedisReply& group : r->elements) {
      std::map<std::string, const RedisReply*> fields;
      for (size_t i = 0; i + 1 < group.elements.size(); i += 2) {
        fields[group.elements[i].str] = &group.elements[i + 1];
      }
      auto name = fields.find("name");
      if (name == fields.end() || name->second->str != options.group) continue;
      found = true;
      if (auto it = fields.find("pending"); it != fields.end()) total += it->second->integer;
      if (auto it = fields.find("lag"); it != fields.end()) {
        // nil when Redis cannot tell (entries deleted by the trim): count the whole stream.
        if (it->second->is_nil()) {
          Result<RedisReply> len = conn.Command({"XLEN", topic});
          if (len.ok()) total += len->integer;
        } else {
          total += it->second->integer;
        }
      }
    }
  }
  if (!found) return NotFound("no consumer group " + options.group + " on " + conn.Describe());
  return total;
}

class RedisPublisher : public Publisher {
 public:
  RedisPublisher(std::unique_ptr<RedisConn> conn, PublisherOptions options)
      : conn_(std::move(conn)), options_(std::move(options)) {}

  std::string name() const override { return BusUrlName(*conn_); }

  Status Publish(const std::vector<OutgoingEvent>& events) override {
    static const RedisScript& script = LoadScript("events_publish.lua");
    // One EVAL per chunk keeps each script run short (Redis runs one script at a time).
    constexpr size_t kChunk = 500;
    for (size_t start = 0; start < events.size(); start += kChunk) {
      size_t end = std::min(events.size(), start + kChunk);
      std::vector<std::string> keys;
      std::vector<std::string> args;
      keys.reserve(end - start);
      args.reserve(1 + 3 * (end - start));
      args.push_back(std::to_string(options_.redis_max_len));
      for (size_t i = start; i < end; ++i) {
        keys.push_back(events[i].topic);
        args.push_back(events[i].event_type);
        args.push_back(events[i].event_id);
        args.push_back(events[i].body);
      }
      Result<RedisReply> r = conn_->Eval(script, keys, args);
      if (!r.ok()) {
        return r.status().WithContext(
            fmt::format("publishing {} events to {}", events.size(), name()));
      }
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<RedisConn> conn_;
  PublisherOptions options_;
};

class RedisSubscriber : public Subscriber {
 public:
  RedisSubscriber(std::unique_ptr<RedisConn> conn, SubscribeOptions options, int64_t claim_idle_ms)
      : conn_(std::move(conn)), options_(std::move(options)), claim_idle_ms_(claim_idle_ms) {
    if (options_.consumer_name.empty()) options_.consumer_name = DefaultConsumerName();
  }

  ~RedisSubscriber() override {
    if (!options_.transient || !groups_created_) return;
    for (const std::string& topic : options_.topics) {
      static_cast<void>(conn_->Command({"XGROUP", "DESTROY", topic, options_.group}));
    }
  }

  std::string name() const override { return BusUrlName(*conn_); }

  Status CreateGroups() {
    for (const std::string& topic : options_.topics) {
      Result<RedisReply> r = conn_->Command({"XGROUP", "CREATE", topic, options_.group,
                                             options_.from_beginning ? "0" : "$", "MKSTREAM"});
      if (!r.ok() && r.status().reason() != RedisErrorReason(kBusyGroup)) {
        return r.status().WithContext(
            fmt::format("creating consumer group {} on stream {}", options_.group, topic));
      }
    }
    groups_created_ = true;
    return Status::Ok();
  }

  Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) override {
    std::vector<Delivery> out;
    if (paused_) {
      SleepMs(timeout_ms);
      return out;
    }
    if (!groups_created_) GAPLESS_RETURN_IF_ERROR(CreateGroups());
    // 1. Entries a silent consumer left pending (and, at the first poll, our own: a consumer of
    // the same name that restarted).
    for (const std::string& topic : options_.topics) {
      if (out.size() >= max) break;
      GAPLESS_RETURN_IF_ERROR(Claim(topic, max - out.size(), out));
    }
    if (!out.empty()) return out;
    // 2. New entries, blocking for at most timeout_ms (kept below the socket timeout).
    std::vector<std::string> argv = {
        "XREADGROUP",   "GROUP",
        options_.group, options_.consumer_name,
        "COUNT",        std::to_string(max),
        "BLOCK",        std::to_string(std::clamp<int64_t>(timeout_ms, 1, 2'000)),
        "STREAMS"};
    for (const std::string& topic : options_.topics) argv.push_back(topic);
    for (size_t i = 0; i < options_.topics.size(); ++i) argv.push_back(">");
    Result<RedisReply> r = conn_->Command(argv, /*idempotent=*/false);
    if (!r.ok()) return r.status().WithContext("reading streams from " + name());
    // [[stream, [[id, [field, value, ...]], ...]], ...], or nil on timeout.
    for (const RedisReply& stream : r->elements) {
      if (stream.elements.size() != 2) continue;
      AppendEntries(stream.elements[0].str, stream.elements[1], /*redelivered=*/false, out);
    }
    return out;
  }

  Status Ack(const Delivery& delivery) override {
    Result<RedisReply> r =
        conn_->Command({"XACK", delivery.topic, options_.group, delivery.position});
    if (!r.ok()) return r.status().WithContext("acknowledging " + delivery.position);
    return Status::Ok();
  }

  Status DeadLetter(const Delivery& delivery, std::string_view error) override {
    // The event id for the dead-letter entry; "" when the body is not an envelope.
    Result<Envelope> envelope = ParseEnvelope(delivery.body);
    std::string event_id = envelope.ok() ? envelope->event_id : "";
    Result<RedisReply> r =
        conn_->Command({"XADD", delivery.topic + ".dlq", "MAXLEN", "~",
                        std::to_string(kDeadLetterMaxLen), "*", "event_id", event_id, "body",
                        delivery.body, "error", std::string(error), "group", options_.group},
                       /*idempotent=*/false);
    if (!r.ok()) return r.status().WithContext("dead-lettering " + delivery.position);
    return Status::Ok();
  }

  Status Pause(const std::string&, int32_t) override {
    paused_ = true;
    return Status::Ok();
  }
  Status Resume(const std::string&, int32_t) override {
    paused_ = false;
    return Status::Ok();
  }

  Result<int64_t> Lag() override { return GroupLagOn(*conn_, options_); }

  std::vector<std::string> Assignment() const override {
    std::vector<std::string> out;
    for (const std::string& topic : options_.topics) out.push_back("stream " + topic);
    return out;
  }

 private:
  void SleepMs(int64_t ms) {
    usleep(static_cast<useconds_t>(std::clamp<int64_t>(ms, 0, 1000)) * 1000);
  }

  Status Claim(const std::string& topic, size_t max, std::vector<Delivery>& out) {
    // Our own pending entries first, once (a restarted consumer of the same name): XAUTOCLAIM
    // with idle 0 would steal others' in-flight entries, so read ours with ID 0.
    if (!own_pending_read_.contains(topic)) {
      Result<RedisReply> r =
          conn_->Command({"XREADGROUP", "GROUP", options_.group, options_.consumer_name, "COUNT",
                          std::to_string(max), "STREAMS", topic, "0"},
                         /*idempotent=*/true);
      if (!r.ok()) return r.status().WithContext("reading pending entries of " + topic);
      size_t before = out.size();
      for (const RedisReply& stream : r->elements) {
        if (stream.elements.size() == 2) AppendEntries(topic, stream.elements[1], true, out);
      }
      // Read until our own pending list is drained (it is bounded by what we had in flight).
      if (out.size() == before) own_pending_read_.insert(topic);
      if (out.size() > before) return Status::Ok();
    }
    Result<RedisReply> r =
        conn_->Command({"XAUTOCLAIM", topic, options_.group, options_.consumer_name,
                        std::to_string(claim_idle_ms_), "0-0", "COUNT", std::to_string(max)},
                       /*idempotent=*/true);
    if (!r.ok()) return r.status().WithContext("claiming idle entries of " + topic);
    // [next-cursor, [[id, fields], ...], [deleted ids]]
    if (r->elements.size() >= 2) AppendEntries(topic, r->elements[1], true, out);
    return Status::Ok();
  }

  void AppendEntries(const std::string& topic, const RedisReply& entries, bool redelivered,
                     std::vector<Delivery>& out) {
    for (const RedisReply& entry : entries.elements) {
      if (entry.elements.size() != 2) continue;
      Delivery d;
      d.topic = topic;
      d.position = entry.elements[0].str;
      d.redelivered = redelivered;
      const RedisReply& fields = entry.elements[1];
      for (size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
        if (fields.elements[i].str == "body") d.body = fields.elements[i + 1].str;
      }
      if (fields.elements.empty()) continue;  // trimmed away while pending
      d.handle = ++next_handle_;
      out.push_back(std::move(d));
    }
  }

  std::unique_ptr<RedisConn> conn_;
  SubscribeOptions options_;
  int64_t claim_idle_ms_;
  bool groups_created_ = false;
  bool paused_ = false;
  std::set<std::string> own_pending_read_;
  uint64_t next_handle_ = 0;
};

}  // namespace

Result<std::unique_ptr<Publisher>> OpenRedisPublisher(std::string_view url,
                                                      const PublisherOptions& options) {
  RedisOptions redis_options;
  redis_options.command_timeout_ms = std::max<int64_t>(1'000, options.confirm_timeout_ms);
  redis_options.max_attempts = 2;
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<RedisConn> conn,
                           RedisConn::Connect(std::string(url), redis_options, false));
  return std::unique_ptr<Publisher>(new RedisPublisher(std::move(conn), options));
}

Result<int64_t> RedisGroupLag(std::string_view url, const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<RedisConn> conn, RedisConn::Connect(std::string(url)));
  return GroupLagOn(*conn, options);
}

Result<std::unique_ptr<Subscriber>> OpenRedisSubscriber(std::string_view url,
                                                        const SubscribeOptions& options,
                                                        int64_t claim_idle_ms) {
  if (options.group.empty() || options.topics.empty()) {
    return FailedPrecondition("a Redis Streams subscriber needs a group and at least one topic");
  }
  RedisOptions redis_options;
  redis_options.command_timeout_ms = 5'000;
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<RedisConn> conn,
                           RedisConn::Connect(std::string(url), redis_options, false));
  return std::unique_ptr<Subscriber>(new RedisSubscriber(std::move(conn), options, claim_idle_ms));
}

}  // namespace gapless

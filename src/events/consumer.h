// consumer: the consumer framework (seed 003's consumer side, on events/bus.h). A service
// implements EventHandler; EventConsumer feeds it the deliveries of one Subscriber with
// deduplication by event_id, bounded concurrency, retries, a dead-letter queue, error-classified
// recovery and a periodic status report.
//
// One delivery's life (a worker thread runs steps 1-5, the poll thread acks):
//   1. ParseEnvelope (events/event.h). A body that is not an envelope is dead-lettered at once
//      (retrying cannot mend it) and acked.
//   2. The processing key "{key_prefix}:processing:{event_id}" is taken with a TTL (default
//      30 s, renewed by the poll thread every third of it while the handler runs): seed 003's
//      "virtual state", nothing in any database says "processing", and the key expires by itself
//      soon after this consumer dies (a 5-minute TTL held a killed consumer's event, and its
//      group's lag, that long). The key holds a token unique to the attempt and is
//      released (compare-and-delete) when the attempt ends, whatever its outcome.
//      A key held by someone else means another consumer (or another worker of this one, for a
//      duplicate in the same batch) is working on the event right now. The delivery is NOT acked
//      and NOT dropped: it is looked at again after held_recheck_ms, when step 3 normally finds
//      the event completed (then it is acked as a duplicate), or the key has expired because its
//      holder died (then this consumer processes it). Skipping it, as seed 003 does, would lose
//      the event if the holder's copy was acked by the bus without being completed.
//   3. handler.IsCompleted(event_id): true -> acked without processing (a duplicate).
//   4. handler.Process(event), then handler.MarkCompleted(event_id), then OnSuccess -> acked.
//   5. On failure (any step's non-ok Status): OnFailed; retried after retry_base_ms * 2^(n-1)
//      (1 s, 2 s, 4 s) up to max_retries times; the failure after the last retry is sent to the
//      dead-letter destination with the event id and the error, then acked. If DeadLetter itself
//      fails, the delivery is not acked (the bus delivers it again).
//      FailedPrecondition and DataLoss ("stop until fixed", core/status.h) are not retried: the
//      consumer stops (Run returns that Status) and the delivery is left unacked.
//
// Exactly once: the Redis key only keeps two consumers from working on one event at the same
// time; the completion record is what makes a redelivery a no-op. A handler that needs exactly
// once records completion in the same database transaction as its effect (Process does it and
// MarkCompleted is the default no-op, as the balances service does), or makes Process
// idempotent. A handler whose MarkCompleted is separate may see Process run twice for an event if
// the consumer dies between the two.
//
// Recovery delays, by error class (ClassifyError, typed information only, never message text):
// rate limit 30 s, network 10 s, database 5 s, other 2 s. A failure costs its worker slot the
// delay (the slot rests: the consumer slows down while things fail, as seed 003's worker sleeps
// after an error). A critical class (rate limit, network, database) also pauses the delivery's
// partition on the bus (Subscriber::Pause) and resumes it after the delay; a retry of a delivery
// whose partition is paused waits for the resume.
//
// Ordered consumption (ConsumerOptions::ordered_topics; seed 004 wants block events processed in
// order): for a topic listed there, the deliveries of each of its partitions are applied
// strictly in the order the bus delivered them, retries included. A partition is the
// (Delivery::topic, Delivery::partition) pair: a Kafka partition of the topic, on Redis Streams
// the topic's stream, on RabbitMQ the deliveries of one routing key within the group's queue.
// From the moment a delivery of an ordered partition is handed to a worker until it is done
// with, no later delivery of that partition starts: "done with" is acked (processed, a
// duplicate), or sent to the dead-letter destination after its last retry (or found malformed),
// which then lets the next one go. While it waits for a retry, for a resume of its paused
// partition, or for a processing key another consumer holds, the partition waits with it.
// Deliveries of other partitions, and of topics not listed, go on concurrently as usual. The
// price: a partition whose head is failing makes no progress for up to the retry delays
// (1 + 2 + 4 s and the recovery delays by default), and its later deliveries, already polled,
// occupy the buffer meanwhile (if they fill it, polling waits for every partition). What the bus
// delivers again (a redelivery after a crash, Redis's claim of a dead consumer's pending entries)
// comes in the bus's order, not the original one: order holds within what one consumer received
// in sequence, and a handler that must never see an older event after a newer one still checks
// (the block number, say). Order is per consumer: Kafka gives each partition to one consumer of
// the group, but on Redis Streams and RabbitMQ the consumers of a group share each stream /
// queue and split its events, so a group that needs order runs one consumer there.
//
// Threads: Run's caller becomes the poll thread, the only one that touches the Subscriber (Poll,
// Ack, DeadLetter, Pause, Resume, Lag, Assignment); `concurrency` worker threads call the handler
// and the ProcessingLocks, and hand their outcomes back to the poll thread. At most
// `concurrency` deliveries are in the handler at once; at most max_buffered more wait for a slot
// or for their retry (the poll asks for no more than the room left).
// Time and sleeps come from options.env: on SimEnv virtual time does not move while a delivery is
// in a worker, and moves to the next timer when nothing is, so retry and pause delays are exact.
//
// Thread-safety: EventHandler and ProcessingLocks implementations must be thread-safe (called from
// every worker). EventConsumer::Run runs once; Status() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coord/redis.h"
#include "core/env.h"
#include "core/status.h"
#include "events/bus.h"
#include "events/event.h"

namespace gapless {

// What a handler sees of one delivery.
struct ConsumedEvent {
  const Delivery& delivery;
  const Envelope& envelope;  // envelope.event_id is the deduplication key
  int attempt = 0;           // 0 for the first try, n for the n-th retry
};

// The classes of failure, each with its recovery delay (ConsumerOptions).
enum class ErrorClass { kRateLimit, kNetwork, kDatabase, kOther };
const char* ErrorClassName(ErrorClass c);
// Critical classes pause the partition.
inline bool IsCritical(ErrorClass c) { return c != ErrorClass::kOther; }

// Status::reason() a handler may set to say "rate limited" when its source has no typed reason
// of its own (the RPC layer's "http:429" and "rpc:rate-limited" are recognised as they are).
inline constexpr std::string_view kRateLimitedReason = "rate-limited";

// The default classification, on the Status's reason() and code() only:
//   rate limit  reason "http:429", "rpc:rate-limited" (rpc/json_rpc.h) or kRateLimitedReason
//   database    reason "sqlstate:*" (store/pg.h PgSqlStateReason: any server error, including
//               serialization failures and deadlocks) or "redis:*" (coord/redis.h
//               RedisErrorReason: an error reply of the Redis the processing keys live in)
//   network     code Unavailable otherwise (a lost connection has no SQLSTATE), reason "http:5xx"
//   other       everything else
ErrorClass ClassifyError(const Status& status);

// What a service implements. Every method is called from worker threads, concurrently for
// different events (never concurrently for one event id within one consumer).
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  // The service's work for one event. Events the service does not care about: return Ok (they
  // are acked). A non-ok Status is retried (see the file comment); a duplicate delivery that
  // slips past IsCompleted (two consumers racing) must be harmless.
  virtual Status Process(const ConsumedEvent& event) = 0;
  // True when the event's effect is already recorded (a redelivery).
  virtual Result<bool> IsCompleted(const std::string& event_id) = 0;
  // Records completion after a successful Process. The default does nothing: for handlers whose
  // Process records completion itself, in the transaction that applies the effect.
  virtual Status MarkCompleted(const std::string& event_id) {
    (void)event_id;
    return Status::Ok();
  }
  // Hooks (logging, metrics). OnFailed is called for every failed attempt; `final` when the event
  // goes to the dead-letter destination next.
  virtual void OnSuccess(const ConsumedEvent& event) { (void)event; }
  virtual void OnFailed(const ConsumedEvent& event, const Status& error, bool final) {
    (void)event, (void)error, (void) final;
  }
  // How a failure is classified; override when the service knows more than the Status says.
  virtual ErrorClass Classify(const Status& error) { return ClassifyError(error); }
};

// The processing keys. Thread-safe.
class ProcessingLocks {
 public:
  virtual ~ProcessingLocks() = default;
  // Takes the key of `event_id` with `token` for ttl_ms. true: held by this token (also when it
  // already was); false: another token holds it.
  virtual Result<bool> TryAcquire(const std::string& event_id, const std::string& token,
                                  int64_t ttl_ms) = 0;
  // Deletes the key if `token` holds it; Ok (doing nothing) otherwise.
  virtual Status Release(const std::string& event_id, const std::string& token) = 0;
  // Gives the key ttl_ms more if `token` still holds it; false (and no key made) otherwise.
  virtual Result<bool> Renew(const std::string& event_id, const std::string& token,
                             int64_t ttl_ms) = 0;
};

// "{prefix}:processing:{event_id}".
std::string ProcessingKey(std::string_view prefix, std::string_view event_id);

// ProcessingLocks in Redis: scripts consumer_acquire.lua / consumer_release.lua /
// consumer_renew.lua (coord/lua), one
// connection per concurrent caller, opened on first use. Bound: one key per event being worked
// on, each with a TTL.
class RedisProcessingLocks : public ProcessingLocks {
 public:
  // Checks the URL only; connections open on first use.
  static Result<std::unique_ptr<RedisProcessingLocks>> Open(const std::string& url,
                                                            std::string key_prefix,
                                                            const RedisOptions& options = {});
  Result<bool> TryAcquire(const std::string& event_id, const std::string& token,
                          int64_t ttl_ms) override;
  Status Release(const std::string& event_id, const std::string& token) override;
  Result<bool> Renew(const std::string& event_id, const std::string& token,
                     int64_t ttl_ms) override;

 private:
  RedisProcessingLocks(std::string url, std::string key_prefix, const RedisOptions& options)
      : url_(std::move(url)), prefix_(std::move(key_prefix)), options_(options) {}
  Result<std::unique_ptr<RedisConn>> Take();
  void Give(std::unique_ptr<RedisConn> conn);

  std::string url_;
  std::string prefix_;
  RedisOptions options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<RedisConn>> idle_;
};

struct RecoveryDelays {
  int64_t rate_limit_ms = 30'000;
  int64_t network_ms = 10'000;
  int64_t database_ms = 5'000;
  int64_t other_ms = 2'000;
  int64_t For(ErrorClass c) const;
};

struct ConsumerStatus;

struct ConsumerOptions {
  std::string name = "consumer";  // in logs and the status report
  size_t concurrency = 4;         // worker threads (>= 1)
  size_t max_buffered = 0;  // polled deliveries waiting for a slot or a retry; 0 = 2 * concurrency
  int64_t poll_timeout_ms = 100;  // longest Poll wait while idle
  // The processing key's TTL; the poll thread renews the keys of events in a handler every
  // processing_ttl_ms / 3, so only a consumer that died leaves one for up to this long.
  int64_t processing_ttl_ms = 30'000;
  int max_retries = 3;
  int64_t retry_base_ms = 1'000;  // retry n waits retry_base_ms * 2^(n-1)
  int64_t held_recheck_ms = 1'000;
  RecoveryDelays recovery;
  int64_t status_interval_ms = 30'000;
  // The topics ("{event_type}.{chain_id}") whose partitions are consumed in order (see the file
  // comment); "*" orders every topic. Empty: none, deliveries run concurrently in any order.
  std::vector<std::string> ordered_topics;
  // Called on the poll thread with each periodic report (after it is logged).
  std::function<void(const ConsumerStatus&)> on_status;
  Env* env = nullptr;  // nullptr = Env::Default()
};

// The status report (seed 003): built on the poll thread every status_interval_ms and at the end
// of Run.
struct ConsumerStatus {
  std::string name;
  size_t active = 0;           // deliveries in the handler now
  size_t resting = 0;          // worker slots resting after a failure
  size_t capacity = 0;         // concurrency
  size_t queued = 0;           // polled, waiting for a slot
  size_t blocked = 0;          // of those, behind an earlier delivery of their ordered partition
  size_t scheduled = 0;        // waiting for a retry or a recheck
  uint64_t processed = 0;      // Process succeeded
  uint64_t duplicates = 0;     // acked without processing (IsCompleted)
  uint64_t failures = 0;       // failed attempts
  uint64_t dead_lettered = 0;  // sent to the dead-letter destination
  uint64_t acked = 0;
  double per_minute = 0;     // processed per minute of uptime
  double success_ratio = 1;  // processed / (processed + failures); 1 before any attempt
  int64_t uptime_ms = 0;
  int64_t started_wall_micros = 0;
  std::vector<std::string> partitions;  // Subscriber::Assignment
  std::vector<std::string> paused;      // "topic[partition]"
  std::string last_error;               // "" if none
  int64_t last_error_age_ms = -1;       // -1 if none
  int64_t rss_bytes = 0;                // /proc/self/statm; 0 if unreadable
  std::optional<int64_t> lag;           // Subscriber::Lag; nullopt when it failed
  std::string ToString() const;         // the multi-line report that is logged
};

class EventConsumer {
 public:
  // None of the pointers is owned; all must outlive the consumer.
  EventConsumer(ConsumerOptions options, Subscriber* subscriber, ProcessingLocks* locks,
                EventHandler* handler);
  ~EventConsumer();
  EventConsumer(const EventConsumer&) = delete;
  EventConsumer& operator=(const EventConsumer&) = delete;

  // Consumes until `stop` becomes true or a failure that must stop the consumer, then stops
  // gracefully: no more polling or dispatching, in-flight deliveries finish and are acked (or
  // retried later by the bus: deliveries waiting for a slot or a retry are left unacked).
  // Returns Ok after a requested stop, or the stopping failure (FailedPrecondition, DataLoss;
  // Poll failing is not one: it is retried after the network delay).
  Status Run(const std::atomic<bool>& stop);

  // The last report built (empty before Run). Thread-safe.
  ConsumerStatus LastStatus() const;

 private:
  struct Item;
  struct Outcome;
  struct Shared;
  struct PollState;
  void WorkerLoop();
  Outcome Handle(Item item);
  void OnOutcome(Outcome outcome, PollState& st);
  bool Ordered(const std::string& topic) const;
  // Renews the processing keys the workers hold (poll thread).
  void RenewKeys();
  bool TakeTurn(const Item& item, PollState& st);
  void EndTurn(const Item& item, PollState& st);
  ConsumerStatus BuildStatus(PollState& st);
  void Report(PollState& st);

  ConsumerOptions options_;
  Env* env_;
  Subscriber* subscriber_;
  ProcessingLocks* locks_;
  EventHandler* handler_;
  std::string instance_id_;
  std::atomic<uint64_t> token_seq_{0};
  std::unique_ptr<Shared> shared_;
  mutable std::mutex status_mu_;
  ConsumerStatus last_status_;
};

}  // namespace gapless

// kafka_client: the librdkafka plumbing every client of the Kafka bus shares (events/kafka_bus.h
// is the contract): the one mapping from librdkafka error codes to Status codes, client
// configuration (SetAll, the log callback, GAPLESS_KAFKA_DEBUG, the GAPLESS_TEST_KAFKA_CONNECT
// test hook), making a client (NewClient), and producing a batch and waiting for its delivery
// reports (the publisher and the subscriber's dead-letter producer).
//
// Internal to events/ (the publisher, kafka_publisher.cc; the subscriber, kafka_subscriber.cc; the
// URL parser and the tools' queries, kafka_bus.cc). Stateless but for the test hook's port map,
// which is guarded by a mutex; a PendingBatch belongs to one handle, used by one thread at a time.
#pragma once

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace gapless::kafka_internal {

inline constexpr int kMetadataTimeoutMs = 5'000;

// Monotonic milliseconds (Env's clock).
inline int64_t NowMs() { return Env::Default()->NowMicros() / 1000; }

inline std::string ErrName(rd_kafka_resp_err_t err) { return rd_kafka_err2name(err); }

// The one place a librdkafka error code becomes a Status code (see kafka_bus.h's table).
Status KafkaStatus(rd_kafka_resp_err_t err, const std::string& message);

// Sends the connections of a client to the ports GAPLESS_TEST_KAFKA_CONNECT names (kafka_client.cc
// says how); nothing when the variable is unset.
void InstallTestConnect(rd_kafka_conf_t* conf);

// librdkafka's own log lines, through spdlog (called from librdkafka's threads; spdlog is
// thread-safe).
void LogCb(const rd_kafka_t* rk, int level, const char* fac, const char* buf);

// GAPLESS_KAFKA_DEBUG=cgrp,topic,... turns on librdkafka's debug contexts (logged at info).
void SetDebug(rd_kafka_conf_t* conf);

// The last steps of making any client (the publisher, the subscriber, its dead-letter producer,
// the tools' handles): the log callback, the test hook, GAPLESS_KAFKA_DEBUG, then rd_kafka_new.
// Takes `conf` either way (rd_kafka_new owns it on success; it is destroyed here on failure);
// the error names `what` ("kafka consumer: ...").
Result<rd_kafka_t*> NewClient(rd_kafka_type_t type, rd_kafka_conf_t* conf, const char* what);

// Sets each key; the first failure is FailedPrecondition naming the key.
Status SetAll(rd_kafka_conf_t* conf, const std::vector<std::pair<std::string, std::string>>& kv);

// Status from a rd_kafka_error_t (destroys it).
Status TakeError(rd_kafka_error_t* error, const std::string& context);

// A delivery-report tag: the batch number in the high 32 bits, the index in the low 32 (no
// allocation, so reports that never come, e.g. for messages purged at destroy, leak nothing).
inline void* Tag(uint32_t batch, uint32_t index) {
  return reinterpret_cast<void*>((static_cast<uintptr_t>(batch) << 32) | index);
}
inline uint32_t TagBatch(void* tag) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(tag) >> 32);
}
inline uint32_t TagIndex(void* tag) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(tag));
}

// The delivery reports of one batch of messages produced by one handle.
struct PendingBatch {
  uint32_t id = 0;
  std::vector<rd_kafka_resp_err_t> results;  // RD_KAFKA_RESP_ERR__IN_PROGRESS until reported
  size_t remaining = 0;

  void Start(size_t n) {
    ++id;
    results.assign(n, RD_KAFKA_RESP_ERR__IN_PROGRESS);
    remaining = n;
  }
  void Report(void* tag, rd_kafka_resp_err_t err) {
    if (TagBatch(tag) != id) return;  // a report from an earlier, abandoned batch
    uint32_t i = TagIndex(tag);
    if (i >= results.size() || results[i] != RD_KAFKA_RESP_ERR__IN_PROGRESS) return;
    results[i] = err;
    --remaining;
  }
};

// Produces one message; `headers` are (name, value) pairs, copied.
rd_kafka_resp_err_t Produce(rd_kafka_t* rk, const std::string& topic, const std::string& key,
                            const std::string& body,
                            const std::vector<std::pair<const char*, const std::string*>>& headers,
                            void* tag, int32_t partition = RD_KAFKA_PARTITION_UA);

// Produces `n` messages with produce(i) (retrying a full local queue until the deadline) and
// serves delivery reports into `batch` until all have come or the deadline passes. Returns the
// status of the first message that failed, in order, or Ok.
template <typename ProduceFn>
Status ProduceAndWait(rd_kafka_t* rk, PendingBatch& batch, size_t n, int64_t deadline,
                      bool purge_on_timeout, ProduceFn produce,
                      const std::vector<std::string>& topics) {
  batch.Start(n);
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_resp_err_t err = produce(i, Tag(batch.id, static_cast<uint32_t>(i)));
    while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && NowMs() < deadline) {
      rd_kafka_poll(rk, 50);
      err = produce(i, Tag(batch.id, static_cast<uint32_t>(i)));
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // The messages before i are already queued; abandon them (their reports are ignored).
      if (purge_on_timeout) rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      batch.Start(0);
      return KafkaStatus(
          err, "kafka produce to topic " + topics[i] + " failed: " + rd_kafka_err2str(err));
    }
  }
  while (batch.remaining > 0) {
    int64_t left = deadline - NowMs();
    if (left <= 0) break;
    rd_kafka_flush(rk, static_cast<int>(std::min<int64_t>(left, 100)));
  }
  // One more non-blocking serve: reports may have arrived during the last flush's timeout.
  if (batch.remaining > 0) rd_kafka_poll(rk, 0);
  if (batch.remaining > 0) {
    size_t first = 0;
    while (first < n && batch.results[first] != RD_KAFKA_RESP_ERR__IN_PROGRESS) ++first;
    if (purge_on_timeout) {
      rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      rd_kafka_poll(rk, 0);
    }
    size_t missing = batch.remaining;
    batch.Start(0);
    return Unavailable("kafka publish: " + std::to_string(missing) + " of " + std::to_string(n) +
                       " messages not confirmed in time (first on topic " + topics[first] + ")")
        .WithReason("kafka:" + ErrName(RD_KAFKA_RESP_ERR__TIMED_OUT));
  }
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_resp_err_t err = batch.results[i];
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return KafkaStatus(
          err, "kafka publish to topic " + topics[i] + " failed: " + rd_kafka_err2str(err));
    }
  }
  return Status::Ok();
}

}  // namespace gapless::kafka_internal

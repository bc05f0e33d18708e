#include "events/kafka_bus.h"

#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/env.h"

namespace gapless {
namespace {

constexpr int64_t kDeadLetterTimeoutMs = 10'000;
constexpr int kMetadataTimeoutMs = 5'000;

// Monotonic milliseconds (Env's clock).
int64_t NowMs() { return Env::Default()->NowMicros() / 1000; }

std::string ErrName(rd_kafka_resp_err_t err) { return rd_kafka_err2name(err); }

bool IsFenced(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__FENCED || err == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         err == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

// The one place a librdkafka error code becomes a Status code (see the header's table).
Status KafkaStatus(rd_kafka_resp_err_t err, const std::string& message) {
  Status st;
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return Status::Ok();
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
      return Aborted(message).WithReason(kKafkaFencedReason);
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
      st = InvalidData(message);
      break;
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
      st = FailedPrecondition(message);
      break;
    default:
      // Transport, timeouts, leader changes, a full local queue, a topic not yet created.
      st = Unavailable(message);
      break;
  }
  return st.WithReason("kafka:" + ErrName(err));
}

// Test hook (the chaos harness's proxies on broker links): GAPLESS_TEST_KAFKA_CONNECT="p=q,..."
// sends every connection to 127.0.0.1:p to 127.0.0.1:q instead. A broker advertises its own
// address in the metadata, so a proxy in the bootstrap list alone would be bypassed after the
// first request. Read again for every client made (a test may change it); nothing else changes.
std::mutex g_connect_mu;
std::map<int, int> g_connect_map;  // guarded by g_connect_mu

int RemappingConnect(int fd, const struct sockaddr* addr, int addrlen, const char*, void*) {
  struct sockaddr_storage target;
  std::memcpy(&target, addr, std::min<size_t>(static_cast<size_t>(addrlen), sizeof(target)));
  if (target.ss_family == AF_INET) {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&target);
    std::lock_guard<std::mutex> lock(g_connect_mu);
    auto it = g_connect_map.find(ntohs(in->sin_port));
    if (it != g_connect_map.end() && ntohl(in->sin_addr.s_addr) == INADDR_LOOPBACK) {
      in->sin_port = htons(static_cast<uint16_t>(it->second));
    }
  }
  // The socket is non-blocking, but librdkafka takes anything but 0 from a connect callback as
  // a failure (EINPROGRESS included): wait for the connection here (loopback: at once).
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&target), addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  struct pollfd pfd = {fd, POLLOUT, 0};
  const int ready = poll(&pfd, 1, 5'000);
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int error = 0;
  socklen_t len = sizeof(error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  return error;
}

void InstallTestConnect(rd_kafka_conf_t* conf) {
  const char* spec = std::getenv("GAPLESS_TEST_KAFKA_CONNECT");
  if (spec == nullptr || *spec == '\0') return;
  std::map<int, int> parsed;
  std::string text(spec);
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string pair = text.substr(at, end - at);
    const size_t eq = pair.find('=');
    if (eq != std::string::npos) {
      parsed[std::atoi(pair.substr(0, eq).c_str())] = std::atoi(pair.substr(eq + 1).c_str());
    }
    at = end + 1;
  }
  {
    std::lock_guard<std::mutex> lock(g_connect_mu);
    g_connect_map = std::move(parsed);
  }
  rd_kafka_conf_set_connect_cb(conf, &RemappingConnect);
}

// librdkafka's own log lines, through spdlog (called from librdkafka's threads; spdlog is
// thread-safe).
void LogCb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  if (level <= 4) {
    spdlog::warn("kafka {} {}: {}", rd_kafka_name(rk), fac, buf);
  } else if (std::getenv("GAPLESS_KAFKA_DEBUG") != nullptr) {
    spdlog::info("kafka {} {}: {}", rd_kafka_name(rk), fac, buf);
  } else {
    spdlog::debug("kafka {} {}: {}", rd_kafka_name(rk), fac, buf);
  }
}

// GAPLESS_KAFKA_DEBUG=cgrp,topic,... turns on librdkafka's debug contexts (logged at info).
void SetDebug(rd_kafka_conf_t* conf) {
  const char* debug = std::getenv("GAPLESS_KAFKA_DEBUG");
  if (debug == nullptr || *debug == 0) return;
  char errstr[512];
  rd_kafka_conf_set(conf, "debug", debug, errstr, sizeof(errstr));
}

std::string DefaultClientId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "gapless");
  return std::string(host) + "-" + std::to_string(getpid());
}

// Sets each key; the first failure is FailedPrecondition naming the key.
Status SetAll(rd_kafka_conf_t* conf, const std::vector<std::pair<std::string, std::string>>& kv) {
  char errstr[512];
  for (const auto& [k, v] : kv) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
      return FailedPrecondition("kafka config " + k + "=" + v + ": " + errstr);
    }
  }
  return Status::Ok();
}

// Status from a rd_kafka_error_t (destroys it).
Status TakeError(rd_kafka_error_t* error, const std::string& context) {
  if (error == nullptr) return Status::Ok();
  rd_kafka_resp_err_t code = rd_kafka_error_code(error);
  std::string text = context + ": " + rd_kafka_error_string(error);
  rd_kafka_error_destroy(error);
  return KafkaStatus(code, text);
}

// A delivery-report tag: the batch number in the high 32 bits, the index in the low 32 (no
// allocation, so reports that never come, e.g. for messages purged at destroy, leak nothing).
void* Tag(uint32_t batch, uint32_t index) {
  return reinterpret_cast<void*>((static_cast<uintptr_t>(batch) << 32) | index);
}
uint32_t TagBatch(void* tag) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(tag) >> 32);
}
uint32_t TagIndex(void* tag) { return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(tag)); }

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
                            void* tag, int32_t partition = RD_KAFKA_PARTITION_UA) {
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size());
  for (const auto& [name, value] : headers) {
    rd_kafka_header_add(hdrs, name, -1, value->data(), static_cast<ssize_t>(value->size()));
  }
  rd_kafka_resp_err_t err =
      rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic.c_str()),
                        RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
                        RD_KAFKA_V_KEY(const_cast<char*>(key.data()), key.size()),
                        RD_KAFKA_V_VALUE(const_cast<char*>(body.data()), body.size()),
                        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
                        RD_KAFKA_V_OPAQUE(tag), RD_KAFKA_V_END);
  // On success the message owns the headers; on failure they are still ours.
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_headers_destroy(hdrs);
  return err;
}

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

// ---------------------------------------------------------------------------------------------

class KafkaPublisher final : public Publisher {
 public:
  KafkaPublisher(KafkaUrl url, PublisherOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}
  ~KafkaPublisher() override { DestroyHandle(); }

  std::string name() const override { return "kafka://" + url_.bootstrap; }

  Status Publish(const std::vector<OutgoingEvent>& events) override {
    if (events.empty()) return Status::Ok();
    int64_t deadline = NowMs() + options_.confirm_timeout_ms;
    GAPLESS_RETURN_IF_ERROR(EnsureHandle(deadline));
    if (url_.transactional) {
      Status st = TakeError(rd_kafka_begin_transaction(rk_), "kafka begin_transaction");
      if (!st.ok()) return Fail(st);
    }
    std::vector<std::string> topics;
    topics.reserve(events.size());
    for (const auto& e : events) topics.push_back(e.topic);
    auto produce = [&](size_t i, void* tag) {
      const OutgoingEvent& e = events[i];
      return Produce(rk_, e.topic, e.key, e.body,
                     {{"event_type", &e.event_type}, {"event_id", &e.event_id}}, tag, e.partition);
    };
    Status st = ProduceAndWait(rk_, batch_, events.size(), deadline,
                               /*purge_on_timeout=*/!url_.transactional, produce, topics);
    if (!st.ok()) return Fail(st);
    if (url_.transactional) {
      int64_t left = std::max<int64_t>(deadline - NowMs(), 1'000);
      rd_kafka_error_t* error = rd_kafka_commit_transaction(rk_, static_cast<int>(left));
      if (error != nullptr && rd_kafka_error_is_retriable(error)) {
        // The commit's outcome is unknown (timeout); committing again is how librdkafka asks
        // to find out.
        rd_kafka_error_destroy(error);
        error = rd_kafka_commit_transaction(rk_, static_cast<int>(left));
      }
      st = TakeError(error, "kafka commit_transaction");
      if (!st.ok()) return Fail(st);
    }
    return Status::Ok();
  }

 private:
  static void DeliveryReport(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
    static_cast<KafkaPublisher*>(opaque)->batch_.Report(msg->_private, msg->err);
  }

  static void ErrorCb(rd_kafka_t* rk, int err, const char* reason, void*) {
    spdlog::warn("kafka {}: {} ({})", rd_kafka_name(rk), reason,
                 rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err)));
  }

  Status EnsureHandle(int64_t deadline) {
    if (rk_ == nullptr) {
      rd_kafka_conf_t* conf = rd_kafka_conf_new();
      std::vector<std::pair<std::string, std::string>> kv = {
          {"bootstrap.servers", url_.bootstrap},
          {"client.id", "gapless-publisher"},
          {"enable.idempotence", "true"},
          {"acks", "all"},
          {"max.in.flight.requests.per.connection", "5"},
          {"linger.ms", "5"},
          {"socket.keepalive.enable", "true"},
          {"message.timeout.ms", std::to_string(std::max<int64_t>(options_.confirm_timeout_ms, 1))},
      };
      if (url_.transactional) {
        kv.emplace_back("transactional.id", options_.kafka_transactional_id);
        kv.emplace_back("transaction.timeout.ms",
                        std::to_string(std::max<int64_t>(options_.confirm_timeout_ms, 60'000)));
      }
      kv.insert(kv.end(), url_.properties.begin(), url_.properties.end());
      Status st = SetAll(conf, kv);
      if (!st.ok()) {
        rd_kafka_conf_destroy(conf);
        return st;
      }
      rd_kafka_conf_set_opaque(conf, this);
      rd_kafka_conf_set_dr_msg_cb(conf, &KafkaPublisher::DeliveryReport);
      rd_kafka_conf_set_error_cb(conf, &KafkaPublisher::ErrorCb);
      rd_kafka_conf_set_log_cb(conf, &LogCb);
      InstallTestConnect(conf);
      SetDebug(conf);
      char errstr[512];
      rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
      if (rk_ == nullptr) {  // conf is destroyed by rd_kafka_new only on success
        rd_kafka_conf_destroy(conf);
        return FailedPrecondition(std::string("kafka producer: ") + errstr);
      }
      txn_ready_ = false;
    }
    if (url_.transactional && !txn_ready_) {
      int64_t left = std::max<int64_t>(deadline - NowMs(), 1'000);
      rd_kafka_error_t* error = rd_kafka_init_transactions(rk_, static_cast<int>(left));
      if (error != nullptr) {
        bool fatal = rd_kafka_error_is_fatal(error);
        Status st = TakeError(error, "kafka init_transactions (transactional.id " +
                                         options_.kafka_transactional_id + ")");
        if (fatal) DestroyHandle();
        return st;
      }
      txn_ready_ = true;
    }
    return Status::Ok();
  }

  // A failed Publish: abort the transaction, and drop a handle that hit a fatal error so the
  // next call starts afresh. Returns the status to report.
  Status Fail(Status st) {
    char errstr[512] = {0};
    rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(rk_, errstr, sizeof(errstr));
    if (fatal != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (url_.transactional && IsFenced(fatal)) {
        st = Aborted("kafka publisher fenced: another producer with transactional.id " +
                     options_.kafka_transactional_id + " took over (" + errstr + ")")
                 .WithReason(kKafkaFencedReason);
      } else {
        // The idempotent producer's state cannot be repaired; a new handle (next call) gets a
        // new producer id, so resending the batch is the way on.
        st = Unavailable(st.message() + " (fatal: " + errstr + ")")
                 .WithReason("kafka:" + ErrName(fatal));
      }
      DestroyHandle();
      return st;
    }
    if (url_.transactional) {
      rd_kafka_error_t* error = rd_kafka_abort_transaction(rk_, 10'000);
      if (error != nullptr) {
        spdlog::warn("kafka abort_transaction: {}", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
        // Could not abort: start over with a new handle (its init_transactions ends what is
        // still open under this transactional.id).
        DestroyHandle();
      }
    }
    return st;
  }

  void DestroyHandle() {
    if (rk_ == nullptr) return;
    // Pending messages are purged by destroy; their reports are never served, and the batch's
    // tags hold no memory.
    rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_destroy(rk_);
    rk_ = nullptr;
    txn_ready_ = false;
    batch_.Start(0);
  }

  KafkaUrl url_;
  PublisherOptions options_;
  rd_kafka_t* rk_ = nullptr;
  bool txn_ready_ = false;
  PendingBatch batch_;
};

// ---------------------------------------------------------------------------------------------

class KafkaSubscriber final : public Subscriber {
 public:
  KafkaSubscriber(KafkaUrl url, SubscribeOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  ~KafkaSubscriber() override {
    if (rk_ != nullptr) {
      (void)CommitAll(/*sync=*/true);
      // Leaves the group; the revoke callback runs inside and commits synchronously again.
      rd_kafka_consumer_close(rk_);
      rd_kafka_destroy(rk_);
    }
    if (dlq_ != nullptr) {
      rd_kafka_flush(dlq_, 1'000);
      rd_kafka_destroy(dlq_);
    }
  }

  Status Open() {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    std::string client_id =
        options_.consumer_name.empty() ? DefaultClientId() : options_.consumer_name;
    Status st =
        SetAll(conf, {
                         {"bootstrap.servers", url_.bootstrap},
                         {"group.id", options_.group},
                         {"client.id", client_id},
                         {"enable.auto.commit", "false"},
                         {"enable.auto.offset.store", "false"},
                         {"auto.offset.reset", options_.from_beginning ? "earliest" : "latest"},
                         {"socket.keepalive.enable", "true"},
                     });
    if (st.ok() && options_.max_queue_bytes > 0) {
      const uint64_t bytes = std::max<uint64_t>(options_.max_queue_bytes, 1 << 20);
      // fetch.max.bytes, left unset, follows it (librdkafka caps it at the queue's size).
      st = SetAll(conf, {{"queued.max.messages.kbytes", std::to_string(bytes / 1024)}});
    }
    if (st.ok()) st = SetAll(conf, url_.properties);
    if (!st.ok()) {
      rd_kafka_conf_destroy(conf);
      return st;
    }
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_rebalance_cb(conf, &KafkaSubscriber::RebalanceCb);
    rd_kafka_conf_set_offset_commit_cb(conf, &KafkaSubscriber::CommitCb);
    rd_kafka_conf_set_log_cb(conf, &LogCb);
    InstallTestConnect(conf);
    SetDebug(conf);
    char errstr[512];
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk_ == nullptr) {
      rd_kafka_conf_destroy(conf);
      return FailedPrecondition(std::string("kafka consumer: ") + errstr);
    }
    rd_kafka_poll_set_consumer(rk_);
    rd_kafka_topic_partition_list_t* topics =
        rd_kafka_topic_partition_list_new(static_cast<int>(options_.topics.size()));
    for (const auto& t : options_.topics) {
      rd_kafka_topic_partition_list_add(topics, t.c_str(), RD_KAFKA_PARTITION_UA);
    }
    rd_kafka_resp_err_t err = rd_kafka_subscribe(rk_, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return KafkaStatus(err, std::string("kafka subscribe: ") + rd_kafka_err2str(err));
    }
    return Status::Ok();
  }

  std::string name() const override { return "kafka://" + url_.bootstrap; }

  Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) override {
    if (commit_again_) {
      commit_again_ = false;
      Status st = CommitAll(/*sync=*/false);
      if (!st.ok()) spdlog::warn("kafka subscriber {}: {}", options_.group, st.ToString());
    }
    std::vector<Delivery> out;
    int64_t deadline = NowMs() + std::max<int64_t>(timeout_ms, 0);
    while (out.size() < max) {
      // Wait (up to the deadline) only while nothing has come; then take what is already here.
      int wait = out.empty() ? static_cast<int>(std::max<int64_t>(deadline - NowMs(), 0)) : 0;
      rd_kafka_message_t* msg = rd_kafka_consumer_poll(rk_, wait);
      if (msg == nullptr) break;
      if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_resp_err_t err = msg->err;
        std::string text = rd_kafka_message_errstr(msg);
        rd_kafka_message_destroy(msg);
        if (err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
        if (err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
            err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
            err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
          spdlog::warn("kafka subscriber {}: {}", options_.group, text);
          continue;
        }
        if (!out.empty()) break;  // deliver what we have; the error shows again if it persists
        return KafkaStatus(err, "kafka consumer (group " + options_.group + "): " + text);
      }
      out.push_back(Track(msg));
      rd_kafka_message_destroy(msg);
    }
    return out;
  }

  Status Ack(const Delivery& delivery) override { return AckAll({delivery}); }

  // One asynchronous commit for all of them: per partition, up to the lowest delivery still
  // outstanding.
  Status AckAll(const std::vector<Delivery>& deliveries) override {
    std::set<TopicPartition> touched;
    for (const Delivery& delivery : deliveries) {
      auto it = pending_.find(delivery.handle);
      if (it == pending_.end()) continue;  // its partition was revoked meanwhile
      Pending p = std::move(it->second);
      pending_.erase(it);
      auto tr = tracks_.find(p.tp);
      if (tr == tracks_.end()) continue;
      tr->second.outstanding.erase(p.offset);
      touched.insert(p.tp);
    }
    std::vector<std::pair<TopicPartition, int64_t>> offsets;
    for (const TopicPartition& tp : touched) {
      PartitionTrack& track = tracks_.at(tp);
      int64_t commit_to =
          track.outstanding.empty() ? track.highest + 1 : *track.outstanding.begin();
      if (commit_to <= track.committed) continue;
      track.committed = commit_to;
      offsets.emplace_back(tp, commit_to);
    }
    return Commit(offsets, /*sync=*/false);
  }

  Status DeadLetter(const Delivery& delivery, std::string_view error) override {
    if (dlq_ == nullptr) {
      rd_kafka_conf_t* conf = rd_kafka_conf_new();
      Status st = SetAll(conf, {
                                   {"bootstrap.servers", url_.bootstrap},
                                   {"client.id", "gapless-dlq"},
                                   {"enable.idempotence", "true"},
                                   {"acks", "all"},
                                   {"linger.ms", "0"},
                                   {"message.timeout.ms", std::to_string(kDeadLetterTimeoutMs)},
                               });
      if (st.ok()) st = SetAll(conf, url_.properties);
      if (!st.ok()) {
        rd_kafka_conf_destroy(conf);
        return st;
      }
      rd_kafka_conf_set_opaque(conf, this);
      rd_kafka_conf_set_dr_msg_cb(conf, &KafkaSubscriber::DeadLetterReport);
      rd_kafka_conf_set_log_cb(conf, &LogCb);
      InstallTestConnect(conf);
      SetDebug(conf);
      char errstr[512];
      dlq_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
      if (dlq_ == nullptr) {
        rd_kafka_conf_destroy(conf);
        return FailedPrecondition(std::string("kafka dead-letter producer: ") + errstr);
      }
    }
    std::string topic = delivery.topic + ".dlq";
    std::string error_text(error);
    std::string key, event_id, event_type;
    if (auto it = pending_.find(delivery.handle); it != pending_.end()) {
      key = it->second.key;
      event_id = it->second.event_id;
      event_type = it->second.event_type;
    }
    std::vector<std::pair<const char*, const std::string*>> headers = {{"error", &error_text}};
    if (!event_id.empty()) headers.emplace_back("event_id", &event_id);
    if (!event_type.empty()) headers.emplace_back("event_type", &event_type);
    auto produce = [&](size_t, void* tag) {
      return Produce(dlq_, topic, key, delivery.body, headers, tag);
    };
    Status st = ProduceAndWait(dlq_, dlq_batch_, 1, NowMs() + kDeadLetterTimeoutMs,
                               /*purge_on_timeout=*/true, produce, {topic});
    if (!st.ok()) {
      char errstr[512];
      if (rd_kafka_fatal_error(dlq_, errstr, sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_destroy(dlq_);
        dlq_ = nullptr;
        dlq_batch_.Start(0);
        st = Unavailable(st.message()).WithReason(st.reason());
      }
    }
    return st.WithContext("dead letter");
  }

  Status HandBack(const Delivery& delivery) override {
    auto it = pending_.find(delivery.handle);
    if (it == pending_.end()) return Status::Ok();  // its partition was revoked meanwhile
    // Forgotten, but its offset stays outstanding: commits stay below it until it comes again.
    const TopicPartition tp = it->second.tp;
    const int64_t offset = it->second.offset;
    pending_.erase(it);
    // A lower offset of the partition handed back and not delivered again yet: the seek to it
    // brings this one too (a seek to this one would skip the lower).
    if (auto back = handed_back_.find(tp); back != handed_back_.end() && back->second <= offset) {
      return Status::Ok();
    }
    handed_back_[tp] = offset;
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second)->offset = offset;
    // Asynchronous (timeout 0): the fetcher restarts at the offset, the messages after it already
    // fetched are discarded and come again.
    rd_kafka_error_t* error = rd_kafka_seek_partitions(rk_, list, 0);
    rd_kafka_topic_partition_list_destroy(list);
    return TakeError(error, "kafka seek " + tp.first + "[" + std::to_string(tp.second) + "] to " +
                                std::to_string(offset));
  }

  Status Pause(const std::string& topic, int32_t partition) override {
    paused_.insert({topic, partition});
    return SetPaused({topic, partition}, true);
  }

  Status Resume(const std::string& topic, int32_t partition) override {
    paused_.erase({topic, partition});
    return SetPaused({topic, partition}, false);
  }

  Result<int64_t> Lag() override {
    if (tracks_.empty()) return int64_t{0};
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(static_cast<int>(tracks_.size()));
    for (const auto& [tp, track] : tracks_) {
      rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second);
    }
    rd_kafka_resp_err_t err = rd_kafka_committed(rk_, list, kMetadataTimeoutMs);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_topic_partition_list_destroy(list);
      return KafkaStatus(err, std::string("kafka committed offsets: ") + rd_kafka_err2str(err));
    }
    int64_t lag = 0;
    Status st;
    for (int i = 0; i < list->cnt && st.ok(); ++i) {
      const rd_kafka_topic_partition_t& p = list->elems[i];
      int64_t low = 0, high = 0;
      err = rd_kafka_query_watermark_offsets(rk_, p.topic, p.partition, &low, &high,
                                             kMetadataTimeoutMs);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        st = KafkaStatus(err, std::string("kafka watermarks of ") + p.topic + "[" +
                                  std::to_string(p.partition) + "]: " + rd_kafka_err2str(err));
        break;
      }
      int64_t committed = p.err == RD_KAFKA_RESP_ERR_NO_ERROR ? p.offset : RD_KAFKA_OFFSET_INVALID;
      auto tr = tracks_.find({p.topic, p.partition});
      if (tr != tracks_.end()) committed = std::max(committed, tr->second.committed);
      if (committed < 0) committed = options_.from_beginning ? low : high;
      lag += std::max<int64_t>(high - committed, 0);
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (!st.ok()) return st;
    return lag;
  }

  std::vector<std::string> Assignment() const override {
    std::vector<std::string> out;
    for (const auto& [tp, track] : tracks_) {
      out.push_back(tp.first + "[" + std::to_string(tp.second) + "]");
    }
    return out;
  }

 private:
  using TopicPartition = std::pair<std::string, int32_t>;

  // Ack tracking of one assigned partition.
  struct PartitionTrack {
    std::set<int64_t> outstanding;  // delivered, not yet acknowledged
    int64_t highest = -1;           // highest offset delivered
    // The last commit offset sent, or the first offset delivered (where the group stood); -1:
    // nothing delivered yet. CommitAll sends it again on revoke and close.
    int64_t committed = -1;
  };
  struct Pending {
    TopicPartition tp;
    int64_t offset = 0;
    std::string key, event_id, event_type;
  };

  static std::string Header(rd_kafka_headers_t* hdrs, const char* name) {
    const void* value = nullptr;
    size_t size = 0;
    if (hdrs == nullptr ||
        rd_kafka_header_get_last(hdrs, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        value == nullptr) {
      return "";
    }
    return std::string(static_cast<const char*>(value), size);
  }

  Delivery Track(rd_kafka_message_t* msg) {
    Delivery d;
    d.topic = rd_kafka_topic_name(msg->rkt);
    d.partition = msg->partition;
    d.position = std::to_string(msg->offset);
    d.body.assign(static_cast<const char*>(msg->payload), msg->len);
    d.handle = next_handle_++;
    Pending p;
    p.tp = {d.topic, d.partition};
    p.offset = msg->offset;
    if (msg->key != nullptr) p.key.assign(static_cast<const char*>(msg->key), msg->key_len);
    rd_kafka_headers_t* hdrs = nullptr;
    if (rd_kafka_message_headers(msg, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      p.event_id = Header(hdrs, "event_id");
      p.event_type = Header(hdrs, "event_type");
    }
    if (auto back = handed_back_.find(p.tp);
        back != handed_back_.end() && msg->offset <= back->second) {
      handed_back_.erase(back);  // the partition is back where it was handed back
    }
    PartitionTrack& track = tracks_[p.tp];
    // The first delivery of an assignment starts at the group's committed offset (or the reset
    // point), so committing it again would be a no-op.
    if (track.highest < 0 && track.committed < 0) track.committed = msg->offset;
    track.outstanding.insert(msg->offset);
    track.highest = std::max(track.highest, msg->offset);
    pending_.emplace(d.handle, std::move(p));
    return d;
  }

  Status Commit(const std::vector<std::pair<TopicPartition, int64_t>>& offsets, bool sync) {
    // A transient subscription (events tail) leaves no trace in the group.
    if (offsets.empty() || options_.transient) return Status::Ok();
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size()));
    for (const auto& [tp, offset] : offsets) {
      rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second)->offset = offset;
    }
    rd_kafka_resp_err_t err = rd_kafka_commit(rk_, list, sync ? 0 : 1);
    rd_kafka_topic_partition_list_destroy(list);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET) {
      return Status::Ok();
    }
    return KafkaStatus(err,
                       "kafka commit (group " + options_.group + "): " + rd_kafka_err2str(err));
  }

  // Commits the commit point of every tracked partition (or only of `only`).
  Status CommitAll(bool sync, const std::set<TopicPartition>* only = nullptr) {
    std::vector<std::pair<TopicPartition, int64_t>> offsets;
    for (const auto& [tp, track] : tracks_) {
      if (track.committed < 0) continue;
      if (only != nullptr && only->count(tp) == 0) continue;
      offsets.emplace_back(tp, track.committed);
    }
    return Commit(offsets, sync);
  }

  Status SetPaused(const TopicPartition& tp, bool pause) {
    if (tracks_.count(tp) == 0) return Status::Ok();  // applied when the partition is assigned
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, tp.first.c_str(), tp.second);
    rd_kafka_resp_err_t err =
        pause ? rd_kafka_pause_partitions(rk_, list) : rd_kafka_resume_partitions(rk_, list);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = list->elems[0].err;
    rd_kafka_topic_partition_list_destroy(list);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (pause) {
        lib_paused_.insert(tp);
      } else {
        lib_paused_.erase(tp);
      }
      return Status::Ok();
    }
    return KafkaStatus(err, std::string(pause ? "kafka pause " : "kafka resume ") + tp.first + "[" +
                                std::to_string(tp.second) + "]: " + rd_kafka_err2str(err));
  }

  void OnAssign(rd_kafka_topic_partition_list_t* parts) {
    for (int i = 0; i < parts->cnt; ++i) {
      tracks_[{parts->elems[i].topic, parts->elems[i].partition}] = PartitionTrack{};
    }
  }

  void OnRevoke(rd_kafka_topic_partition_list_t* parts, bool lost) {
    std::set<TopicPartition> revoked;
    for (int i = 0; i < parts->cnt; ++i) {
      revoked.insert({parts->elems[i].topic, parts->elems[i].partition});
    }
    if (!lost) {
      Status st = CommitAll(/*sync=*/true, &revoked);
      if (!st.ok()) spdlog::warn("kafka subscriber {}: {}", options_.group, st.ToString());
    }
    for (const auto& tp : revoked) {
      tracks_.erase(tp);
      handed_back_.erase(tp);
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = revoked.count(it->second.tp) ? pending_.erase(it) : std::next(it);
    }
  }

  static void RebalanceCb(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* parts, void* opaque) {
    auto* self = static_cast<KafkaSubscriber*>(opaque);
    bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      self->OnAssign(parts);
      // The pause state asked for, both ways: librdkafka keeps a partition's pause across a
      // re-assignment, so one resumed while it was revoked (its Resume found it unassigned)
      // would otherwise stay paused for good. Set before the assign, and only where it differs
      // from what librdkafka holds: a pause or resume right after assign() can outdate the
      // assign's fetch start, and the partition then never fetches (librdkafka issue 2190; the
      // chaos harness's balances consumer saw a partition deliver nothing, for good).
      std::vector<TopicPartition> late;
      for (int i = 0; i < parts->cnt; ++i) {
        TopicPartition tp{parts->elems[i].topic, parts->elems[i].partition};
        const bool want = self->paused_.count(tp) > 0;
        if (want == (self->lib_paused_.count(tp) > 0)) continue;
        if (!self->SetPaused(tp, want).ok()) late.push_back(tp);
      }
      if (cooperative) {
        Status st = TakeError(rd_kafka_incremental_assign(rk, parts), "kafka assign");
        if (!st.ok()) spdlog::warn("{}", st.ToString());
      } else {
        rd_kafka_assign(rk, parts);
      }
      // A partition librdkafka did not know before the assign: its state after it.
      for (const TopicPartition& tp : late) (void)self->SetPaused(tp, self->paused_.count(tp) > 0);
      return;
    }
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
      self->OnRevoke(parts, rd_kafka_assignment_lost(rk));
      if (cooperative) {
        Status st = TakeError(rd_kafka_incremental_unassign(rk, parts), "kafka unassign");
        if (!st.ok()) spdlog::warn("{}", st.ToString());
      } else {
        rd_kafka_assign(rk, nullptr);
      }
      return;
    }
    spdlog::warn("kafka subscriber {}: rebalance error {}", self->options_.group,
                 rd_kafka_err2name(err));
    self->OnRevoke(parts, /*lost=*/true);
    rd_kafka_assign(rk, nullptr);
  }

  static void CommitCb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t*,
                       void* opaque) {
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET) return;
    auto* self = static_cast<KafkaSubscriber*>(opaque);
    // The next Poll sends the commit points again: an idle group would otherwise stay behind
    // for good (its lag a lie, and a restart would deliver it all again). Runs on the polling
    // thread (inside rd_kafka_consumer_poll).
    self->commit_again_ = true;
    spdlog::warn("kafka subscriber {}: async commit failed: {}; sending it again",
                 self->options_.group, rd_kafka_err2str(err));
  }

  static void DeadLetterReport(rd_kafka_t*, const rd_kafka_message_t* msg, void* opaque) {
    static_cast<KafkaSubscriber*>(opaque)->dlq_batch_.Report(msg->_private, msg->err);
  }

  KafkaUrl url_;
  SubscribeOptions options_;
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_t* dlq_ = nullptr;
  PendingBatch dlq_batch_;
  uint64_t next_handle_ = 1;
  std::map<TopicPartition, PartitionTrack> tracks_;  // the current assignment
  std::unordered_map<uint64_t, Pending> pending_;    // by Delivery::handle
  std::set<TopicPartition> paused_;
  // Those paused in librdkafka (it keeps a pause across revoke and re-assignment).
  std::set<TopicPartition> lib_paused_;
  // Per partition, the lowest offset handed back (HandBack) and not delivered again yet.
  std::map<TopicPartition, int64_t> handed_back_;
  bool commit_again_ = false;  // an asynchronous commit failed: send the commit points again
};

}  // namespace

Result<KafkaUrl> ParseKafkaUrl(std::string_view url) {
  constexpr std::string_view kScheme = "kafka://";
  auto bad = [&](const std::string& why) {
    return FailedPrecondition("kafka URL \"" + std::string(url) + "\": " + why);
  };
  if (url.substr(0, kScheme.size()) != kScheme) return bad("must start with kafka://");
  std::string_view rest = url.substr(kScheme.size());
  std::string_view query;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return bad("no host:port");
  KafkaUrl out;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view hp = rest.substr(0, comma);
    size_t colon = hp.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return bad("\"" + std::string(hp) + "\" is not host:port");
    }
    std::string_view port = hp.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
      return bad("bad port in \"" + std::string(hp) + "\"");
    }
    if (hp.find_first_of("/@ ") != std::string_view::npos) {
      return bad("bad host in \"" + std::string(hp) + "\"");
    }
    if (!out.bootstrap.empty()) out.bootstrap += ",";
    out.bootstrap += hp;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    size_t eq = kv.find('=');
    std::string key(kv.substr(0, eq));
    std::string value(eq == std::string_view::npos ? "" : kv.substr(eq + 1));
    if (key == "transactional" && (value == "1" || value == "true")) {
      out.transactional = true;
    } else if (key == "transactional" && (value == "0" || value == "false")) {
      out.transactional = false;
    } else if (key.find('.') != std::string::npos && !value.empty()) {
      // A librdkafka property; librdkafka checks the name and value when the client is made.
      static const std::set<std::string> kReserved = {
          "bootstrap.servers",  "metadata.broker.list",     "group.id",
          "enable.auto.commit", "enable.auto.offset.store", "enable.idempotence",
          "transactional.id",   "auto.offset.reset",        "client.id"};
      if (kReserved.count(key)) return bad("\"" + key + "\" is set by gapless, not the URL");
      out.properties.emplace_back(key, value);
    } else {
      return bad(
          "unknown parameter \"" + std::string(kv) +
          "\" (transactional=0|1 or a librdkafka property such as session.timeout.ms=10000)");
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return out;
}

Result<std::unique_ptr<Publisher>> OpenKafkaPublisher(std::string_view url,
                                                      const PublisherOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(KafkaUrl parsed, ParseKafkaUrl(url));
  if (options.confirm_timeout_ms <= 0) {
    return FailedPrecondition("kafka publisher: confirm_timeout_ms must be positive");
  }
  if (parsed.transactional && options.kafka_transactional_id.empty()) {
    return FailedPrecondition("kafka publisher: ?transactional=1 needs a transactional id");
  }
  return std::unique_ptr<Publisher>(new KafkaPublisher(std::move(parsed), options));
}

namespace {

// A handle for one-off metadata and offset queries of the tools (never joins a group, never
// produces), on the URL's brokers and properties plus `extra`.
Result<rd_kafka_t*> OpenToolHandle(const KafkaUrl& parsed, rd_kafka_type_t type,
                                   const std::vector<std::pair<std::string, std::string>>& extra) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  Status st = SetAll(conf, {{"bootstrap.servers", parsed.bootstrap}});
  if (st.ok()) st = SetAll(conf, extra);
  if (st.ok()) st = SetAll(conf, parsed.properties);
  if (!st.ok()) {
    rd_kafka_conf_destroy(conf);
    return st;
  }
  rd_kafka_conf_set_log_cb(conf, &LogCb);
  InstallTestConnect(conf);
  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return FailedPrecondition(std::string("kafka client: ") + errstr);
  }
  return rk;
}

// The partition ids of `topic` (metadata). NotFound when the topic does not exist.
Result<std::vector<int32_t>> TopicPartitions(rd_kafka_t* rk, const std::string& topic) {
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, t, &md, kMetadataTimeoutMs);
  Result<std::vector<int32_t>> out = std::vector<int32_t>();
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    out = KafkaStatus(err, "kafka metadata of " + topic + ": " + rd_kafka_err2str(err));
  } else if (md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR ||
             md->topics[0].partition_cnt <= 0) {
    out = NotFound("kafka topic " + topic + " does not exist (create it, with its partitions)");
  } else {
    for (int p = 0; p < md->topics[0].partition_cnt; ++p) {
      out->push_back(md->topics[0].partitions[p].id);
    }
  }
  if (md != nullptr) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  return out;
}

}  // namespace

Result<int> KafkaPartitionCount(std::string_view url, const std::string& topic) {
  GAPLESS_ASSIGN_OR_RETURN(KafkaUrl parsed, ParseKafkaUrl(url));
  GAPLESS_ASSIGN_OR_RETURN(rd_kafka_t * rk, OpenToolHandle(parsed, RD_KAFKA_PRODUCER, {}));
  Result<std::vector<int32_t>> partitions = TopicPartitions(rk, topic);
  rd_kafka_destroy(rk);
  if (!partitions.ok()) return partitions.status();
  return static_cast<int>(partitions->size());
}

Result<int64_t> KafkaGroupLag(std::string_view url, const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(KafkaUrl parsed, ParseKafkaUrl(url));
  // A consumer handle that never subscribes: it reads the group's committed offsets without
  // joining the group (no rebalance of its members).
  GAPLESS_ASSIGN_OR_RETURN(rd_kafka_t * rk, OpenToolHandle(parsed, RD_KAFKA_CONSUMER,
                                                           {{"group.id", options.group},
                                                            {"enable.auto.commit", "false"}}));
  Status st;
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(8);
  for (const std::string& topic : options.topics) {
    Result<std::vector<int32_t>> partitions = TopicPartitions(rk, topic);
    if (!partitions.ok()) continue;  // a topic nobody created yet has no lag
    for (int32_t p : *partitions) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  }
  int64_t lag = 0;
  bool committed_any = false;
  rd_kafka_resp_err_t err = rd_kafka_committed(rk, list, kMetadataTimeoutMs);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    st = KafkaStatus(err, std::string("kafka committed offsets: ") + rd_kafka_err2str(err));
  }
  for (int i = 0; st.ok() && i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = list->elems[i];
    int64_t low = 0, high = 0;
    err =
        rd_kafka_query_watermark_offsets(rk, p.topic, p.partition, &low, &high, kMetadataTimeoutMs);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      st = KafkaStatus(
          err, std::string("kafka watermarks of ") + p.topic + ": " + rd_kafka_err2str(err));
      break;
    }
    int64_t committed = p.err == RD_KAFKA_RESP_ERR_NO_ERROR ? p.offset : RD_KAFKA_OFFSET_INVALID;
    if (committed >= 0) committed_any = true;
    lag += std::max<int64_t>(high - (committed >= 0 ? committed : low), 0);
  }
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy(rk);
  if (!st.ok()) return st;
  if (!committed_any) {
    return NotFound("consumer group " + options.group + " has committed no offset on kafka://" +
                    parsed.bootstrap);
  }
  return lag;
}

Result<std::unique_ptr<Subscriber>> OpenKafkaSubscriber(std::string_view url,
                                                        const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(KafkaUrl parsed, ParseKafkaUrl(url));
  // ?transactional=1 concerns publishers; a subscriber given the same URL ignores it (it reads
  // committed data either way: librdkafka's isolation.level defaults to read_committed).
  if (options.group.empty()) return FailedPrecondition("kafka subscriber: no consumer group");
  if (options.topics.empty()) return FailedPrecondition("kafka subscriber: no topics");
  auto sub = std::make_unique<KafkaSubscriber>(std::move(parsed), options);
  GAPLESS_RETURN_IF_ERROR(sub->Open());
  return std::unique_ptr<Subscriber>(std::move(sub));
}

}  // namespace gapless

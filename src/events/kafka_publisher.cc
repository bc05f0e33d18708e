// kafka_publisher: the Publisher of the Kafka bus (events/kafka_bus.h states its contract): an
// idempotent or transactional producer that publishes a batch and waits for every delivery
// report, and drops its handle after a fatal error.
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "events/kafka_bus.h"
#include "events/kafka_client.h"

namespace gapless {
namespace {

using kafka_internal::ErrName;
using kafka_internal::KafkaStatus;
using kafka_internal::NewClient;
using kafka_internal::NowMs;
using kafka_internal::PendingBatch;
using kafka_internal::Produce;
using kafka_internal::ProduceAndWait;
using kafka_internal::SetAll;
using kafka_internal::TakeError;

bool IsFenced(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__FENCED || err == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         err == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

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
      GAPLESS_ASSIGN_OR_RETURN(rk_, NewClient(RD_KAFKA_PRODUCER, conf, "kafka producer"));
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

}  // namespace

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

}  // namespace gapless

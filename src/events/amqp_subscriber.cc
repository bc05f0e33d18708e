// amqp_subscriber: the Subscriber of the RabbitMQ bus (events/amqp_bus.h states its contract): a
// group's queue bound to its topics, consumed with a prefetch, acked per delivery, paused by
// cancelling the consumer; dead letters go to "<group>.dlq" through a confirm-mode publisher.
#include <amqp.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "events/amqp_bus.h"
#include "events/amqp_connection.h"

namespace gapless {
// In amqp_internal, beside the connection it is built on (amqp_connection.h).
namespace amqp_internal {
namespace {

constexpr uint16_t kPrefetch = 256;

class AmqpSubscriber final : public Subscriber {
 public:
  AmqpSubscriber(AmqpUrl url, SubscribeOptions options)
      : url_(std::move(url)),
        options_(std::move(options)),
        conn_(url_, kSubscriberTimeoutMs,
              options_.consumer_name.empty() ? "gapless " + options_.group
                                             : options_.consumer_name) {}

  std::string name() const override { return url_.Name(); }

  // Connects (if not connected), declares the exchange, the queue and its bindings, sets the
  // prefetch and consumes unless paused. Deliveries of an earlier connection are forgotten:
  // the broker requeued them when it lost that connection.
  Status Connect() {
    if (conn_.is_open()) return Status::Ok();
    unacked_.clear();
    buffered_.clear();
    consuming_ = false;
    GAPLESS_RETURN_IF_ERROR(conn_.Open());
    GAPLESS_RETURN_IF_ERROR(DeclareExchange(conn_));
    GAPLESS_RETURN_IF_ERROR(DeclareQueue(conn_, options_.group, options_.transient));
    for (const std::string& topic : options_.topics) {
      amqp_queue_bind(conn_.get(), kChannel, Bytes(options_.group), Bytes(kAmqpExchange),
                      Bytes(topic), amqp_empty_table);
      GAPLESS_RETURN_IF_ERROR(conn_.LastReply("queue.bind " + options_.group + " " + topic));
    }
    amqp_basic_qos(conn_.get(), kChannel, 0, kPrefetch, 0);
    GAPLESS_RETURN_IF_ERROR(conn_.LastReply("basic.qos"));
    if (!paused_) GAPLESS_RETURN_IF_ERROR(StartConsuming());
    return Status::Ok();
  }

  Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) override {
    GAPLESS_RETURN_IF_ERROR(Connect());
    std::vector<Delivery> out;
    if (paused_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)));
      return out;
    }
    int64_t deadline = NowMs() + timeout_ms;
    while (out.size() < max) {
      if (buffered_.empty()) {
        GAPLESS_ASSIGN_OR_RETURN(bool got, ReadOne(out.empty() ? deadline - NowMs() : 0));
        if (!got) break;
      }
      out.push_back(std::move(buffered_.front()));
      buffered_.pop_front();
    }
    return out;
  }

  Status Ack(const Delivery& delivery) override {
    auto it = unacked_.find(delivery.handle);
    // Not ours, acked already, or from before a reconnect (then the broker requeued it).
    if (it == unacked_.end() || !conn_.is_open()) return Status::Ok();
    int rc = amqp_basic_ack(conn_.get(), kChannel, it->second, /*multiple=*/0);
    if (rc != AMQP_STATUS_OK) return conn_.LibraryError(rc, "basic.ack");
    unacked_.erase(it);
    return Status::Ok();
  }

  Status DeadLetter(const Delivery& delivery, std::string_view error) override {
    std::string queue = options_.group + ".dlq";
    if (dlq_ == nullptr) {
      dlq_ = std::make_unique<ConfirmPublisher>(
          url_, "", kSubscriberTimeoutMs, "gapless dead letters " + options_.group,
          [queue](Connection& conn) { return DeclareQueue(conn, queue); });
    }
    Message m;
    m.routing_key = queue;
    m.body = delivery.body;
    m.headers = {{"x-error", error}, {"x-original-topic", delivery.topic}};
    return dlq_->Publish({m}).WithContext("dead letter to " + queue);
  }

  Status Pause(const std::string&, int32_t) override {
    paused_ = true;
    // A failed cancel drops the connection; the reconnect honours paused_.
    if (conn_.is_open() && consuming_) (void)StopConsuming();
    return Status::Ok();
  }

  Status Resume(const std::string&, int32_t) override {
    paused_ = false;
    if (conn_.is_open() && !consuming_) (void)StartConsuming();
    return Status::Ok();
  }

  Result<int64_t> Lag() override {
    GAPLESS_RETURN_IF_ERROR(Connect());
    amqp_queue_declare_ok_t* ok = amqp_queue_declare(conn_.get(), kChannel, Bytes(options_.group),
                                                     /*passive=*/1, 0, 0, 0, amqp_empty_table);
    GAPLESS_RETURN_IF_ERROR(conn_.LastReply("queue.declare passive " + options_.group));
    int64_t ready = ok->message_count;
    // What the broker sent us before its reply is unacked, not ready: take it into the buffer
    // so that it is counted (unacked_ holds the buffered deliveries too).
    for (;;) {
      GAPLESS_ASSIGN_OR_RETURN(bool got, ReadOne(0));
      if (!got) break;
    }
    return ready + static_cast<int64_t>(unacked_.size());
  }

  std::vector<std::string> Assignment() const override { return {"queue " + options_.group}; }

 private:
  // Reads one delivery into buffered_ (and unacked_), waiting at most wait_ms; false on timeout.
  Result<bool> ReadOne(int64_t wait_ms) {
    int64_t deadline = NowMs() + wait_ms;
    for (;;) {
      if (buffered_.empty()) amqp_maybe_release_buffers(conn_.get());
      timeval tv = ToTimeval(deadline - NowMs());
      amqp_envelope_t envelope;
      amqp_rpc_reply_t r = amqp_consume_message(conn_.get(), &envelope, &tv, 0);
      if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        Delivery d;
        d.topic = Str(envelope.routing_key);
        d.position = std::to_string(envelope.delivery_tag);
        d.body = Str(envelope.message.body);
        d.redelivered = envelope.redelivered != 0;
        d.handle = next_handle_++;
        unacked_[d.handle] = envelope.delivery_tag;
        amqp_destroy_envelope(&envelope);
        buffered_.push_back(std::move(d));
        return true;
      }
      if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
          r.library_error == AMQP_STATUS_TIMEOUT) {
        return false;
      }
      if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
          r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
        // Not a delivery: a close, a broker-side cancel, or something to ignore.
        amqp_frame_t frame;
        int rc = amqp_simple_wait_frame(conn_.get(), &frame);
        if (rc != AMQP_STATUS_OK) return conn_.LibraryError(rc, "poll");
        if (frame.frame_type == AMQP_FRAME_METHOD) {
          GAPLESS_RETURN_IF_ERROR(conn_.UnexpectedMethod(frame, "poll"));
        }
        continue;
      }
      return conn_.Reply(r, "poll");
    }
  }

  Status StartConsuming() {
    amqp_basic_consume_ok_t* ok =
        amqp_basic_consume(conn_.get(), kChannel, Bytes(options_.group), amqp_empty_bytes,
                           /*no_local=*/0, /*no_ack=*/0, /*exclusive=*/0, amqp_empty_table);
    GAPLESS_RETURN_IF_ERROR(conn_.LastReply("basic.consume " + options_.group));
    consumer_tag_ = Str(ok->consumer_tag);
    consuming_ = true;
    return Status::Ok();
  }

  Status StopConsuming() {
    amqp_basic_cancel(conn_.get(), kChannel, Bytes(consumer_tag_));
    GAPLESS_RETURN_IF_ERROR(conn_.LastReply("basic.cancel"));
    consuming_ = false;
    return Status::Ok();
  }

  AmqpUrl url_;
  SubscribeOptions options_;
  Connection conn_;
  bool paused_ = false;
  bool consuming_ = false;
  std::string consumer_tag_;
  uint64_t next_handle_ = 1;
  // handle -> delivery tag, of this connection's deliveries not yet acked (polled or buffered)
  std::unordered_map<uint64_t, uint64_t> unacked_;
  std::deque<Delivery> buffered_;  // received, not yet returned by Poll
  std::unique_ptr<ConfirmPublisher> dlq_;
};

}  // namespace
}  // namespace amqp_internal

Result<std::unique_ptr<Subscriber>> OpenAmqpSubscriber(std::string_view url,
                                                       const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(AmqpUrl parsed, ParseAmqpUrl(url));
  if (options.group.empty()) return FailedPrecondition("amqp subscriber: empty group");
  auto subscriber = std::make_unique<amqp_internal::AmqpSubscriber>(std::move(parsed), options);
  GAPLESS_RETURN_IF_ERROR(subscriber->Connect());
  return std::unique_ptr<Subscriber>(std::move(subscriber));
}

}  // namespace gapless

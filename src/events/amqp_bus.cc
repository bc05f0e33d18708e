// The RabbitMQ bus on rabbitmq-c: a connection wrapper that turns the library's replies into
// Status (dropping the connection on any failure, so the next call starts clean), a confirm-mode
// publisher used for both events and dead letters, and the queue subscriber.
#include "events/amqp_bus.h"

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <deque>
#include <functional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/env.h"

namespace gapless {
namespace {

// Debian's CA bundle (ca-certificates): the CAs an amqps:// URL without cacertfile trusts.
constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";

constexpr amqp_channel_t kChannel = 1;
constexpr int kHeartbeatSeconds = 60;
constexpr uint16_t kPrefetch = 256;
// Connect, login and RPC timeout of a subscriber, and the dead-letter confirm timeout.
constexpr int64_t kSubscriberTimeoutMs = 10'000;
constexpr int64_t kCloseTimeoutMs = 2'000;

// Monotonic milliseconds (Env's clock).
int64_t NowMs() { return Env::Default()->NowMicros() / 1000; }

timeval ToTimeval(int64_t ms) {
  if (ms < 0) ms = 0;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

amqp_bytes_t Bytes(std::string_view s) {
  amqp_bytes_t b;
  b.len = s.size();
  b.bytes = const_cast<char*>(s.data());
  return b;
}

std::string Str(amqp_bytes_t b) {
  return b.len == 0 ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
}

// The broker closed a channel or the connection with `code`: refused credentials, a missing
// vhost and a declaration that conflicts with an existing one need a human (FailedPrecondition);
// anything else (connection-forced at shutdown, a deleted queue) is worth a retry.
Status BrokerClosed(std::string what, uint16_t code, const std::string& text) {
  std::string m = what + ": broker closed with " + std::to_string(code) + " " + text;
  switch (code) {
    case AMQP_ACCESS_REFUSED:       // 403
    case AMQP_PRECONDITION_FAILED:  // 406
    case AMQP_NOT_ALLOWED:          // 530 (vhost not found)
    case AMQP_NOT_IMPLEMENTED:      // 540
    case AMQP_COMMAND_INVALID:      // 503
      return FailedPrecondition(m);
    default:
      return Unavailable(m);
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

std::string PercentEncode(std::string_view in) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// One AMQP message to publish.
struct Message {
  std::string_view routing_key;
  std::string_view body;
  std::string_view message_id;  // empty: not set
  std::string_view type;        // empty: not set
  std::vector<std::pair<std::string_view, std::string_view>> headers;
};

// One rabbitmq-c connection with channel 1 open. Every failure drops the connection (no close
// handshake), so the owner's next call opens a new one.
class Connection {
 public:
  Connection(AmqpUrl url, int64_t timeout_ms, std::string client_name)
      : url_(std::move(url)), timeout_ms_(timeout_ms), client_name_(std::move(client_name)) {}
  ~Connection() { Close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool is_open() const { return conn_ != nullptr; }
  amqp_connection_state_t get() const { return conn_; }

  // TCP connect, login (heartbeat 60 s), channel.open(1); connect, login and every later RPC are
  // bounded by the timeout.
  Status Open() {
    Drop();
    conn_ = amqp_new_connection();
    if (conn_ == nullptr) return Internal("amqp: out of memory");
    amqp_socket_t* socket = url_.tls ? amqp_ssl_socket_new(conn_) : amqp_tcp_socket_new(conn_);
    if (socket == nullptr) {
      Drop();
      return Internal("amqp: cannot create a socket");
    }
    if (url_.tls) GAPLESS_RETURN_IF_ERROR(ConfigureTls(socket));
    timeval tv = ToTimeval(timeout_ms_);
    int rc = amqp_socket_open_noblock(socket, url_.host.c_str(), url_.port, &tv);
    if (rc != AMQP_STATUS_OK) {
      Drop();
      std::string why = url_.Name() + ": connect: " + amqp_error_string2(rc);
      // A certificate that does not verify will not verify on the next try either.
      if (rc == AMQP_STATUS_SSL_PEER_VERIFY_FAILED ||
          rc == AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED) {
        return FailedPrecondition(
            why + " (the server's TLS certificate does not verify against " +
            (url_.cacertfile.empty() ? std::string("the system's CAs") : url_.cacertfile) + ")");
      }
      return Unavailable(why);
    }
    amqp_set_handshake_timeout(conn_, &tv);
    amqp_set_rpc_timeout(conn_, &tv);
    amqp_table_entry_t entry;
    entry.key = amqp_cstring_bytes("connection_name");
    entry.value.kind = AMQP_FIELD_KIND_UTF8;
    entry.value.value.bytes = Bytes(client_name_);
    amqp_table_t properties{1, &entry};
    GAPLESS_RETURN_IF_ERROR(
        Reply(amqp_login_with_properties(conn_, url_.vhost.c_str(), 0, AMQP_DEFAULT_FRAME_SIZE,
                                         kHeartbeatSeconds, &properties, AMQP_SASL_METHOD_PLAIN,
                                         url_.user.c_str(), url_.password.c_str()),
              "login"));
    amqp_channel_open(conn_, kChannel);
    return LastReply("channel.open");
  }

  // The TLS socket's CA, client certificate and verification (AmqpUrl). Verification is on
  // unless the URL says verify=verify_none; without cacertfile the system's CA bundle is used.
  Status ConfigureTls(amqp_socket_t* socket) {
    const std::string ca =
        !url_.cacertfile.empty() ? url_.cacertfile : std::string(kSystemCaBundle);
    if (url_.verify || !url_.cacertfile.empty()) {
      if (amqp_ssl_socket_set_cacert(socket, ca.c_str()) != AMQP_STATUS_OK) {
        Drop();
        return FailedPrecondition(url_.Name() + ": cannot read the CA certificates " + ca);
      }
    }
    if (!url_.certfile.empty() && amqp_ssl_socket_set_key(socket, url_.certfile.c_str(),
                                                          url_.keyfile.c_str()) != AMQP_STATUS_OK) {
      Drop();
      return FailedPrecondition(url_.Name() + ": cannot read the client certificate " +
                                url_.certfile + " or its key");
    }
    amqp_ssl_socket_set_verify_peer(socket, url_.verify ? 1 : 0);
    amqp_ssl_socket_set_verify_hostname(socket, url_.verify ? 1 : 0);
    return Status::Ok();
  }

  // channel.close and connection.close (bounded), then frees; for a healthy connection.
  void Close() {
    if (conn_ == nullptr) return;
    timeval tv = ToTimeval(kCloseTimeoutMs);
    amqp_set_rpc_timeout(conn_, &tv);
    amqp_rpc_reply_t r = amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
    if (r.reply_type == AMQP_RESPONSE_NORMAL) amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
    Drop();
  }

  // Frees the connection and closes its socket, without the close handshake.
  void Drop() {
    if (conn_ == nullptr) return;
    amqp_destroy_connection(conn_);
    conn_ = nullptr;
  }

  // Ok for a normal reply; otherwise drops the connection and says what happened.
  Status Reply(amqp_rpc_reply_t r, std::string_view what) {
    std::string context = url_.Name() + ": " + std::string(what);
    switch (r.reply_type) {
      case AMQP_RESPONSE_NORMAL:
        return Status::Ok();
      case AMQP_RESPONSE_NONE:
        Drop();
        return Unavailable(context + ": no reply");
      case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        Drop();
        return Unavailable(context + ": " + amqp_error_string2(r.library_error));
      case AMQP_RESPONSE_SERVER_EXCEPTION: {
        Status st = Unavailable(context + ": unexpected server reply");
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
          auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
          st = BrokerClosed(context, m->reply_code, Str(m->reply_text));
        } else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
          auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
          st = BrokerClosed(context, m->reply_code, Str(m->reply_text));
        }
        Drop();
        return st;
      }
    }
    Drop();
    return Internal(context + ": unknown reply type");
  }
  Status LastReply(std::string_view what) { return Reply(amqp_get_rpc_reply(conn_), what); }

  // A library status code (< 0) from a non-RPC call: drops the connection.
  Status LibraryError(int code, std::string_view what) {
    Drop();
    return Unavailable(url_.Name() + ": " + std::string(what) + ": " + amqp_error_string2(code));
  }

  // A method frame that is not what the caller waits for. Ok when it can be ignored
  // (connection.blocked and the like); otherwise drops the connection and names it.
  Status UnexpectedMethod(const amqp_frame_t& frame, std::string_view what) {
    std::string context = url_.Name() + ": " + std::string(what);
    switch (frame.payload.method.id) {
      case AMQP_CONNECTION_CLOSE_METHOD: {
        auto* m = static_cast<amqp_connection_close_t*>(frame.payload.method.decoded);
        Status st = BrokerClosed(context, m->reply_code, Str(m->reply_text));
        amqp_connection_close_ok_t ok{};
        amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        Drop();
        return st;
      }
      case AMQP_CHANNEL_CLOSE_METHOD: {
        auto* m = static_cast<amqp_channel_close_t*>(frame.payload.method.decoded);
        Status st = BrokerClosed(context, m->reply_code, Str(m->reply_text));
        Drop();
        return st;
      }
      case AMQP_BASIC_CANCEL_METHOD:
        Drop();
        return Unavailable(context + ": the broker cancelled the consumer (queue deleted?)");
      default:
        return Status::Ok();
    }
  }

  const AmqpUrl& url() const { return url_; }

 private:
  AmqpUrl url_;
  int64_t timeout_ms_;
  std::string client_name_;
  amqp_connection_state_t conn_ = nullptr;
};

Status DeclareExchange(Connection& conn) {
  amqp_exchange_declare(conn.get(), kChannel, Bytes(kAmqpExchange), amqp_cstring_bytes("topic"),
                        /*passive=*/0, /*durable=*/1, /*auto_delete=*/0, /*internal=*/0,
                        amqp_empty_table);
  return conn.LastReply("exchange.declare " + std::string(kAmqpExchange));
}

// A group's queue is durable; a transient one (events tail) is exclusive and auto-deleted, so
// it disappears with its connection.
Status DeclareQueue(Connection& conn, const std::string& queue, bool transient = false) {
  amqp_queue_declare(conn.get(), kChannel, Bytes(queue), /*passive=*/0,
                     /*durable=*/transient ? 0 : 1, /*exclusive=*/transient ? 1 : 0,
                     /*auto_delete=*/transient ? 1 : 0, amqp_empty_table);
  return conn.LastReply("queue.declare " + queue);
}

// A channel in confirm mode that publishes batches to one exchange and waits for their acks.
// `declare` runs after every (re)connect, before confirm.select.
class ConfirmPublisher {
 public:
  ConfirmPublisher(AmqpUrl url, std::string exchange, int64_t timeout_ms, std::string client_name,
                   std::function<Status(Connection&)> declare)
      : conn_(std::move(url), timeout_ms, std::move(client_name)),
        exchange_(std::move(exchange)),
        timeout_ms_(timeout_ms),
        declare_(std::move(declare)) {}

  std::string name() const { return conn_.url().Name(); }

  Status Connect() {
    GAPLESS_RETURN_IF_ERROR(conn_.Open());
    if (declare_) GAPLESS_RETURN_IF_ERROR(declare_(conn_));
    amqp_confirm_select(conn_.get(), kChannel);
    GAPLESS_RETURN_IF_ERROR(conn_.LastReply("confirm.select"));
    next_seq_ = 1;
    return Status::Ok();
  }

  Status Publish(const std::vector<Message>& messages) {
    int64_t deadline = NowMs() + timeout_ms_;
    // A connection that died while idle (broker restarted, heartbeats missed) shows up here as
    // an error or a close frame; reconnect at once rather than fail the batch.
    if (conn_.is_open() && !Drain().ok()) conn_.Drop();
    if (!conn_.is_open()) GAPLESS_RETURN_IF_ERROR(Connect());
    if (messages.empty()) return Status::Ok();

    std::set<uint64_t> pending;
    for (const Message& m : messages) {
      std::vector<amqp_table_entry_t> entries(m.headers.size());
      for (size_t i = 0; i < m.headers.size(); ++i) {
        entries[i].key = Bytes(m.headers[i].first);
        entries[i].value.kind = AMQP_FIELD_KIND_UTF8;
        entries[i].value.value.bytes = Bytes(m.headers[i].second);
      }
      amqp_basic_properties_t props{};
      props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
      props.content_type = amqp_cstring_bytes("application/json");
      props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
      if (!m.message_id.empty()) {
        props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        props.message_id = Bytes(m.message_id);
      }
      if (!m.type.empty()) {
        props._flags |= AMQP_BASIC_TYPE_FLAG;
        props.type = Bytes(m.type);
      }
      if (!entries.empty()) {
        props._flags |= AMQP_BASIC_HEADERS_FLAG;
        props.headers.num_entries = static_cast<int>(entries.size());
        props.headers.entries = entries.data();
      }
      int rc = amqp_basic_publish(conn_.get(), kChannel, Bytes(exchange_), Bytes(m.routing_key),
                                  /*mandatory=*/0, /*immediate=*/0, &props, Bytes(m.body));
      if (rc != AMQP_STATUS_OK) return conn_.LibraryError(rc, "basic.publish");
      pending.insert(next_seq_++);
    }

    while (!pending.empty()) {
      int64_t left = deadline - NowMs();
      if (left <= 0) {
        conn_.Drop();
        return Unavailable(name() + ": no confirm for " + std::to_string(pending.size()) + " of " +
                           std::to_string(messages.size()) + " messages within " +
                           std::to_string(timeout_ms_) + " ms");
      }
      amqp_frame_t frame;
      timeval tv = ToTimeval(left);
      int rc = amqp_simple_wait_frame_noblock(conn_.get(), &frame, &tv);
      if (rc == AMQP_STATUS_TIMEOUT) continue;
      if (rc != AMQP_STATUS_OK) return conn_.LibraryError(rc, "waiting for confirms");
      if (frame.frame_type != AMQP_FRAME_METHOD) continue;
      switch (frame.payload.method.id) {
        case AMQP_BASIC_ACK_METHOD: {
          auto* ack = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
          if (ack->multiple) {
            pending.erase(pending.begin(), pending.upper_bound(ack->delivery_tag));
          } else {
            pending.erase(ack->delivery_tag);
          }
          break;
        }
        case AMQP_BASIC_NACK_METHOD: {
          auto* nack = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
          uint64_t tag = nack->delivery_tag;
          conn_.Drop();
          return Unavailable(name() + ": the broker nacked message " + std::to_string(tag));
        }
        case AMQP_BASIC_RETURN_METHOD: {
          auto* ret = static_cast<amqp_basic_return_t*>(frame.payload.method.decoded);
          std::string text = Str(ret->reply_text) + " (routing key " + Str(ret->routing_key) + ")";
          conn_.Drop();
          return Unavailable(name() + ": the broker returned a message: " + text);
        }
        default:
          GAPLESS_RETURN_IF_ERROR(conn_.UnexpectedMethod(frame, "waiting for confirms"));
      }
    }
    amqp_maybe_release_buffers(conn_.get());
    return Status::Ok();
  }

 private:
  // Reads whatever the broker sent while we were idle, without waiting.
  Status Drain() {
    for (;;) {
      amqp_frame_t frame;
      timeval zero{};
      int rc = amqp_simple_wait_frame_noblock(conn_.get(), &frame, &zero);
      if (rc == AMQP_STATUS_TIMEOUT) return Status::Ok();
      if (rc != AMQP_STATUS_OK) return conn_.LibraryError(rc, "idle");
      if (frame.frame_type == AMQP_FRAME_METHOD) {
        GAPLESS_RETURN_IF_ERROR(conn_.UnexpectedMethod(frame, "idle"));
      }
    }
  }

  Connection conn_;
  std::string exchange_;
  int64_t timeout_ms_;
  std::function<Status(Connection&)> declare_;
  uint64_t next_seq_ = 1;  // the publish sequence number of the next message on this channel
};

class AmqpPublisher final : public Publisher {
 public:
  AmqpPublisher(AmqpUrl url, const PublisherOptions& options)
      : publisher_(std::move(url), std::string(kAmqpExchange), options.confirm_timeout_ms,
                   "gapless publisher", DeclareExchange) {}

  Status Connect() { return publisher_.Connect(); }
  std::string name() const override { return publisher_.name(); }

  Status Publish(const std::vector<OutgoingEvent>& events) override {
    std::vector<Message> messages;
    messages.reserve(events.size());
    for (const OutgoingEvent& e : events) {
      Message m;
      m.routing_key = e.topic;
      m.body = e.body;
      m.message_id = e.event_id;
      m.type = e.event_type;
      m.headers = {{"event_type", e.event_type}, {"event_id", e.event_id}};
      messages.push_back(std::move(m));
    }
    return publisher_.Publish(messages);
  }

 private:
  ConfirmPublisher publisher_;
};

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

std::string AmqpUrl::Name() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(tls ? "amqps://" : "amqp://") + PercentEncode(user) + "@" + h + ":" +
         std::to_string(port) + "/" + PercentEncode(vhost);
}

Result<AmqpUrl> ParseAmqpUrl(std::string_view url) {
  auto bad = [](const std::string& why) { return FailedPrecondition("amqp URL: " + why); };
  AmqpUrl out;
  std::string_view rest;
  if (url.starts_with("amqp://")) {
    rest = url.substr(7);
  } else if (url.starts_with("amqps://")) {
    rest = url.substr(8);
    out.tls = true;
    out.port = 5671;
  } else {
    return bad("must start with amqp:// or amqps://");
  }
  if (rest.find('#') != std::string_view::npos) return bad("fragments are not supported");
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    if (!out.tls) return bad("query parameters are for amqps:// only (TLS settings)");
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view param = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      size_t eq = param.find('=');
      std::string name(param.substr(0, eq));
      std::string value;
      if (eq == std::string_view::npos || !PercentDecode(param.substr(eq + 1), &value)) {
        return bad("query parameter " + name + ": expected name=value");
      }
      if (name == "cacertfile") {
        out.cacertfile = value;
      } else if (name == "certfile") {
        out.certfile = value;
      } else if (name == "keyfile") {
        out.keyfile = value;
      } else if (name == "verify" && (value == "verify_peer" || value == "verify_none")) {
        out.verify = value == "verify_peer";
      } else {
        return bad("unknown query parameter " + name +
                   " (known: cacertfile, certfile, keyfile, verify=verify_peer|verify_none)");
      }
    }
    if (out.certfile.empty() != out.keyfile.empty()) {
      return bad("certfile and keyfile go together");
    }
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);

  size_t at = authority.rfind('@');
  std::string_view hostport = authority;
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    hostport = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (!PercentDecode(userinfo.substr(0, colon), &out.user)) {
      return bad("bad percent-encoding in the user name");
    }
    if (out.user.empty()) return bad("empty user name");
    out.password.clear();
    if (colon != std::string_view::npos &&
        !PercentDecode(userinfo.substr(colon + 1), &out.password)) {
      return bad("bad percent-encoding in the password");
    }
  }
  std::string_view port_text;
  if (!hostport.empty() && hostport.front() == '[') {
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return bad("unterminated [ in the host");
    out.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after ]");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    size_t colon = hostport.rfind(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    }
  }
  if (out.host.empty()) return bad("no host");
  if (!port_text.empty()) {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) return bad("port is not a number 1-65535");
      port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535) return bad("port is not a number 1-65535");
    out.port = port;
  }
  if (path.find('/') != std::string_view::npos) return bad("a '/' in the vhost must be %2F");
  if (path.empty()) {
    out.vhost = "/";
  } else if (!PercentDecode(path, &out.vhost)) {
    return bad("bad percent-encoding in the vhost");
  }
  return out;
}

Result<std::unique_ptr<Publisher>> OpenAmqpPublisher(std::string_view url,
                                                     const PublisherOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(AmqpUrl parsed, ParseAmqpUrl(url));
  if (options.confirm_timeout_ms <= 0) {
    return FailedPrecondition("amqp publisher: confirm_timeout_ms must be positive");
  }
  auto publisher = std::make_unique<AmqpPublisher>(std::move(parsed), options);
  // A broker that is down now is not an error: Publish connects (the relay retries, the events
  // wait in the outbox). Bad credentials or a missing vhost are.
  Status connected = publisher->Connect();
  if (!connected.ok() && connected.code() != Code::kUnavailable) return connected;
  return std::unique_ptr<Publisher>(std::move(publisher));
}

Result<int64_t> AmqpGroupLag(std::string_view url, const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(AmqpUrl parsed, ParseAmqpUrl(url));
  Connection conn(parsed, kSubscriberTimeoutMs, "gapless status");
  GAPLESS_RETURN_IF_ERROR(conn.Open());
  amqp_queue_declare_ok_t* ok = amqp_queue_declare(conn.get(), kChannel, Bytes(options.group),
                                                   /*passive=*/1, 0, 0, 0, amqp_empty_table);
  Status st = conn.LastReply("queue.declare passive " + options.group);
  if (!st.ok()) return NotFound("no queue " + options.group + " on " + parsed.Name());
  return static_cast<int64_t>(ok->message_count);
}

Result<std::unique_ptr<Subscriber>> OpenAmqpSubscriber(std::string_view url,
                                                       const SubscribeOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(AmqpUrl parsed, ParseAmqpUrl(url));
  if (options.group.empty()) return FailedPrecondition("amqp subscriber: empty group");
  auto subscriber = std::make_unique<AmqpSubscriber>(std::move(parsed), options);
  GAPLESS_RETURN_IF_ERROR(subscriber->Connect());
  return std::unique_ptr<Subscriber>(std::move(subscriber));
}

}  // namespace gapless

// amqp_connection: the rabbitmq-c plumbing of the RabbitMQ bus (events/amqp_bus.h is the
// contract): a connection wrapper that turns the library's replies into Status (dropping the
// connection on any failure, so the next call starts clean), the exchange and queue
// declarations, and a confirm-mode publisher used for both events and dead letters.
//
// Internal to events/ (amqp_bus.cc: the URL, the publisher, the tools' lag; amqp_subscriber.cc).
// A Connection and a ConfirmPublisher are used by one thread at a time.
#pragma once

#include <amqp.h>
#include <sys/time.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "events/amqp_bus.h"

namespace gapless::amqp_internal {

inline constexpr amqp_channel_t kChannel = 1;
// Connect, login and RPC timeout of a subscriber, and the dead-letter confirm timeout.
inline constexpr int64_t kSubscriberTimeoutMs = 10'000;

// Monotonic milliseconds (Env's clock).
inline int64_t NowMs() { return Env::Default()->NowMicros() / 1000; }

inline timeval ToTimeval(int64_t ms) {
  if (ms < 0) ms = 0;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

inline amqp_bytes_t Bytes(std::string_view s) {
  amqp_bytes_t b;
  b.len = s.size();
  b.bytes = const_cast<char*>(s.data());
  return b;
}

inline std::string Str(amqp_bytes_t b) {
  return b.len == 0 ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
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
  Status Open();

  // The TLS socket's CA, client certificate and verification (AmqpUrl). Verification is on
  // unless the URL says verify=verify_none; without cacertfile the system's CA bundle is used.
  Status ConfigureTls(amqp_socket_t* socket);

  // channel.close and connection.close (bounded), then frees; for a healthy connection.
  void Close();

  // Frees the connection and closes its socket, without the close handshake.
  void Drop();

  // Ok for a normal reply; otherwise drops the connection and says what happened.
  Status Reply(amqp_rpc_reply_t r, std::string_view what);
  Status LastReply(std::string_view what) { return Reply(amqp_get_rpc_reply(conn_), what); }

  // A library status code (< 0) from a non-RPC call: drops the connection.
  Status LibraryError(int code, std::string_view what);

  // A method frame that is not what the caller waits for. Ok when it can be ignored
  // (connection.blocked and the like); otherwise drops the connection and names it.
  Status UnexpectedMethod(const amqp_frame_t& frame, std::string_view what);

  const AmqpUrl& url() const { return url_; }

 private:
  AmqpUrl url_;
  int64_t timeout_ms_;
  std::string client_name_;
  amqp_connection_state_t conn_ = nullptr;
};

Status DeclareExchange(Connection& conn);

// A group's queue is durable; a transient one (events tail) is exclusive and auto-deleted, so
// it disappears with its connection.
Status DeclareQueue(Connection& conn, const std::string& queue, bool transient = false);

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

  Status Connect();

  Status Publish(const std::vector<Message>& messages);

 private:
  // Reads whatever the broker sent while we were idle, without waiting.
  Status Drain();

  Connection conn_;
  std::string exchange_;
  int64_t timeout_ms_;
  std::function<Status(Connection&)> declare_;
  uint64_t next_seq_ = 1;  // the publish sequence number of the next message on this channel
};

}  // namespace gapless::amqp_internal

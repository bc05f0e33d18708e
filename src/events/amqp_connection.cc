// amqp_connection: the rabbitmq-c connection wrapper, the declarations and the confirm-mode
// publisher of the RabbitMQ bus (amqp_connection.h).
#include "events/amqp_connection.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include <set>

namespace gapless::amqp_internal {
namespace {

// Debian's CA bundle (ca-certificates): the CAs an amqps:// URL without cacertfile trusts.
constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";

constexpr int kHeartbeatSeconds = 60;
constexpr int64_t kCloseTimeoutMs = 2'000;

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

}  // namespace

Status Connection::Open() {
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
    if (rc == AMQP_STATUS_SSL_PEER_VERIFY_FAILED || rc == AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED) {
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

Status Connection::ConfigureTls(amqp_socket_t* socket) {
  const std::string ca = !url_.cacertfile.empty() ? url_.cacertfile : std::string(kSystemCaBundle);
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

void Connection::Close() {
  if (conn_ == nullptr) return;
  timeval tv = ToTimeval(kCloseTimeoutMs);
  amqp_set_rpc_timeout(conn_, &tv);
  amqp_rpc_reply_t r = amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  Drop();
}

void Connection::Drop() {
  if (conn_ == nullptr) return;
  amqp_destroy_connection(conn_);
  conn_ = nullptr;
}

Status Connection::Reply(amqp_rpc_reply_t r, std::string_view what) {
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

Status Connection::LibraryError(int code, std::string_view what) {
  Drop();
  return Unavailable(url_.Name() + ": " + std::string(what) + ": " + amqp_error_string2(code));
}

Status Connection::UnexpectedMethod(const amqp_frame_t& frame, std::string_view what) {
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

Status DeclareExchange(Connection& conn) {
  amqp_exchange_declare(conn.get(), kChannel, Bytes(kAmqpExchange), amqp_cstring_bytes("topic"),
                        /*passive=*/0, /*durable=*/1, /*auto_delete=*/0, /*internal=*/0,
                        amqp_empty_table);
  return conn.LastReply("exchange.declare " + std::string(kAmqpExchange));
}

// A group's queue is durable; a transient one (events tail) is exclusive and auto-deleted, so
// it disappears with its connection.
Status DeclareQueue(Connection& conn, const std::string& queue, bool transient) {
  amqp_queue_declare(conn.get(), kChannel, Bytes(queue), /*passive=*/0,
                     /*durable=*/transient ? 0 : 1, /*exclusive=*/transient ? 1 : 0,
                     /*auto_delete=*/transient ? 1 : 0, amqp_empty_table);
  return conn.LastReply("queue.declare " + queue);
}

Status ConfirmPublisher::Connect() {
  GAPLESS_RETURN_IF_ERROR(conn_.Open());
  if (declare_) GAPLESS_RETURN_IF_ERROR(declare_(conn_));
  amqp_confirm_select(conn_.get(), kChannel);
  GAPLESS_RETURN_IF_ERROR(conn_.LastReply("confirm.select"));
  next_seq_ = 1;
  return Status::Ok();
}

Status ConfirmPublisher::Publish(const std::vector<Message>& messages) {
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

Status ConfirmPublisher::Drain() {
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

}  // namespace gapless::amqp_internal

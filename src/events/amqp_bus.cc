// The RabbitMQ bus on rabbitmq-c: the URL's parser, the publisher and the tools' lag. The
// connection wrapper, the declarations and the confirm-mode publisher they share are in
// amqp_connection.h; the queue subscriber is in amqp_subscriber.cc.
#include "events/amqp_bus.h"

#include <amqp.h>

#include <cctype>
#include <memory>
#include <utility>
#include <vector>

#include "events/amqp_connection.h"

namespace gapless {
namespace {

using amqp_internal::Bytes;
using amqp_internal::ConfirmPublisher;
using amqp_internal::Connection;
using amqp_internal::DeclareExchange;
using amqp_internal::kChannel;
using amqp_internal::kSubscriberTimeoutMs;
using amqp_internal::Message;

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

}  // namespace gapless

// RedisSocket: one connection to one Redis server, over TCP or TLS, speaking RESP. It is what
// RedisConn (coord/redis.h) sends commands on; it knows nothing of retries, failover or AUTH.
//
// Why our own: Debian's hiredis 0.14 has no TLS, and managed Redis offerings require it
// (rediss://, issue 17). hiredis is still used for what it does well and the same in every
// version: the command encoding (redisFormatCommandArgv) and the reply parser (redisReader). The
// bytes go through this class, the same code for both transports, so every Redis test exercises
// it; TLS is OpenSSL's, with the certificate verified by default.
//
// Timeouts: Connect waits at most connect_timeout_ms for TCP and as long again for the TLS
// handshake. Each wait for the socket during Send and Next is bounded by the timeout it is given
// (RedisConn passes command_timeout_ms: a half-open connection fails instead of hanging). The
// socket is non-blocking and every wait is a poll(2), so a TLS record that arrives in pieces is
// handled like a TCP segment that does.
//
// Errors: Unavailable for what a retry can cure (refused, reset, timed out, a handshake cut off, a
// reply the parser refuses: the stream is out of sync); FailedPrecondition for what it cannot: a
// certificate that does not verify (wrong CA, wrong host name, expired), a CA, certificate or key
// file that cannot be read. Messages name host:port and never a secret.
//
// Writes never raise SIGPIPE (send(2) with MSG_NOSIGNAL; OpenSSL writes through the same socket
// BIO, so RedisConn::Connect also ignores SIGPIPE once, as it did for hiredis).
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

struct redisReply;
struct redisReader;

namespace gapless {

// The TLS settings of a rediss:// URL (the query takes the names amqps:// uses).
struct RedisTls {
  bool enabled = false;
  std::string cacertfile;  // PEM; empty: the system's CAs (/etc/ssl/certs)
  std::string certfile;    // client certificate (PEM), when the server asks for one
  std::string keyfile;     // its key (PEM); empty with certfile set: the key is in certfile
  bool verify = true;      // the chain and the host name; false only with verify=verify_none
  bool operator==(const RedisTls&) const = default;
};

struct RedisSocketOptions {
  int64_t connect_timeout_ms = 2'000;
  int keepalive_interval_s = 15;  // TCP keepalive idle time; 0: off
};

// A parsed reply, owned (freeReplyObject on destruction).
struct RedisReplyDeleter {
  void operator()(redisReply* r) const;
};
using RawReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

class RedisSocket {
 public:
  // TCP to host:port (every address it resolves to, in turn), TCP_NODELAY, keepalive, then the
  // TLS handshake when tls.enabled (SNI and the certificate checked against host).
  static Result<std::unique_ptr<RedisSocket>> Connect(const std::string& host, int port,
                                                      const RedisTls& tls,
                                                      const RedisSocketOptions& options);
  ~RedisSocket();
  RedisSocket(const RedisSocket&) = delete;
  RedisSocket& operator=(const RedisSocket&) = delete;

  // Sends one command (RESP array of bulk strings). Each wait for the socket is at most
  // timeout_ms.
  Status Send(const std::vector<std::string>& argv, int64_t timeout_ms);

  // The next reply: one already parsed from earlier bytes, else read until one is whole, each
  // wait at most timeout_ms. nullopt when none was whole within a wait (the bytes read so far are
  // kept for the next call); Unavailable when the connection broke or the bytes are not RESP.
  Result<std::optional<RawReply>> Next(int64_t timeout_ms);

  // "host:port" as given (IPv6 in brackets).
  const std::string& peer() const { return peer_; }

 private:
  RedisSocket(int fd, std::string peer);
  Status Handshake(const std::string& host, const RedisTls& tls, int64_t timeout_ms);
  // Waits until the socket is readable (events POLLIN) or writable (POLLOUT); false on timeout.
  Result<bool> Wait(short events, int64_t timeout_ms, const char* what);
  // After a failed TLS write: whether what the server sent before it closed is an alert refusing
  // our certificate.
  bool ServerRefusedOurCertificate();
  // Reads what is there into the parser; false when nothing came within timeout_ms.
  Result<bool> ReadSome(int64_t timeout_ms);

  int fd_;
  std::string peer_;
  struct Tls;
  std::unique_ptr<Tls> tls_;  // null: plain TCP
  redisReader* reader_;
};

}  // namespace gapless

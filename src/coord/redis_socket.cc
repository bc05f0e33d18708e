#include "coord/redis_socket.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gapless {
namespace {

// The queued OpenSSL errors as one line (and the queue emptied).
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

// An alert with which the server refused the certificate we presented (or presented none): a
// configuration to fix, not an outage to retry.
bool IsCertificateRefusal(unsigned long e) {
  if (ERR_GET_LIB(e) != ERR_LIB_SSL) return false;
  switch (ERR_GET_REASON(e)) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
      return true;
    default:
      return false;
  }
}

bool IsIpAddress(const std::string& host) {
  in6_addr a6{};
  in_addr a4{};
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

std::string Peer(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// One RESP array of bulk strings.
std::string Encode(const std::vector<std::string>& argv) {
  size_t size = 16;
  for (const std::string& a : argv) size += a.size() + 16;
  std::string out;
  out.reserve(size);
  out += '*';
  out += std::to_string(argv.size());
  out += "\r\n";
  for (const std::string& a : argv) {
    out += '$';
    out += std::to_string(a.size());
    out += "\r\n";
    out += a;
    out += "\r\n";
  }
  return out;
}

}  // namespace

void RedisReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

struct RedisSocket::Tls {
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  ~Tls() {
    // No close_notify: the socket is closed either way and a shutdown could wait on the peer.
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }
};

Result<std::unique_ptr<RedisSocket>> RedisSocket::Connect(const std::string& host, int port,
                                                          const RedisTls& tls,
                                                          const RedisSocketOptions& options) {
  const std::string peer = Peer(host, port);
  const std::string fail = "connect to redis " + peer + " failed: ";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Unavailable(fail + "cannot resolve " + host + ": " + gai_strerror(rc));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    int s = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
      error = std::strerror(errno);
      continue;
    }
    int rc = connect(s, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      int n;
      do {
        n = poll(&p, 1, static_cast<int>(options.connect_timeout_ms));
      } while (n < 0 && errno == EINTR);
      if (n == 0) {
        error = "timed out after " + std::to_string(options.connect_timeout_ms) + " ms";
        close(s);
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
      rc = so_error == 0 ? 0 : -1;
      errno = so_error;
    }
    if (rc != 0) {
      error = std::strerror(errno);
      close(s);
      continue;
    }
    fd = s;
  }
  freeaddrinfo(found);
  if (fd < 0) return Unavailable(fail + error);
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (options.keepalive_interval_s > 0) {
    int idle = options.keepalive_interval_s;
    int interval = std::max(1, options.keepalive_interval_s / 3);
    int count = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  }
  std::unique_ptr<RedisSocket> sock(new RedisSocket(fd, peer));
  if (sock->reader_ == nullptr) return Internal("redis " + peer + ": out of memory");
  if (tls.enabled) {
    GAPLESS_RETURN_IF_ERROR(sock->Handshake(host, tls, options.connect_timeout_ms));
  }
  return sock;
}

RedisSocket::RedisSocket(int fd, std::string peer)
    : fd_(fd), peer_(std::move(peer)), reader_(redisReaderCreate()) {}

RedisSocket::~RedisSocket() {
  tls_.reset();
  if (reader_ != nullptr) redisReaderFree(reader_);
  close(fd_);
}

Status RedisSocket::Handshake(const std::string& host, const RedisTls& tls, int64_t timeout_ms) {
  ERR_clear_error();
  tls_ = std::make_unique<Tls>();
  tls_->ctx = SSL_CTX_new(TLS_client_method());
  if (tls_->ctx == nullptr) return Internal("redis " + peer_ + ": TLS: " + OpenSslErrors());
  SSL_CTX_set_min_proto_version(tls_->ctx, TLS1_2_VERSION);
  const std::string where = "redis " + peer_ + ": TLS: ";
  if (tls.verify) {
    if (!tls.cacertfile.empty()) {
      if (SSL_CTX_load_verify_locations(tls_->ctx, tls.cacertfile.c_str(), nullptr) != 1) {
        return FailedPrecondition(where + "cannot read the CA certificates in cacertfile " +
                                  tls.cacertfile + ": " + OpenSslErrors());
      }
    } else if (SSL_CTX_set_default_verify_paths(tls_->ctx) != 1) {
      return FailedPrecondition(where +
                                "cannot load the system's CA certificates: " + OpenSslErrors());
    }
    SSL_CTX_set_verify(tls_->ctx, SSL_VERIFY_PEER, nullptr);
  } else {
    SSL_CTX_set_verify(tls_->ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!tls.certfile.empty()) {
    const std::string& key = tls.keyfile.empty() ? tls.certfile : tls.keyfile;
    if (SSL_CTX_use_certificate_chain_file(tls_->ctx, tls.certfile.c_str()) != 1) {
      return FailedPrecondition(where + "cannot read the client certificate in certfile " +
                                tls.certfile + ": " + OpenSslErrors());
    }
    if (SSL_CTX_use_PrivateKey_file(tls_->ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(tls_->ctx) != 1) {
      return FailedPrecondition(where + "cannot use the client key in " + key + ": " +
                                OpenSslErrors());
    }
  } else if (!tls.keyfile.empty()) {
    return FailedPrecondition(where + "keyfile without certfile");
  }
  tls_->ssl = SSL_new(tls_->ctx);
  if (tls_->ssl == nullptr || SSL_set_fd(tls_->ssl, fd_) != 1) {
    return Internal(where + OpenSslErrors());
  }
  const bool ip = IsIpAddress(host);
  if (!ip) SSL_set_tlsext_host_name(tls_->ssl, host.c_str());
  if (tls.verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(tls_->ssl);
    int ok = 0;
    if (ip) {
      ok = X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      ok = X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    }
    if (ok != 1) return Internal(where + "cannot set the host name to verify: " + OpenSslErrors());
  }
  while (true) {
    ERR_clear_error();
    const int rc = SSL_connect(tls_->ssl);
    if (rc == 1) return Status::Ok();
    const int err = SSL_get_error(tls_->ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      GAPLESS_ASSIGN_OR_RETURN(bool ready, Wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                                                timeout_ms, "TLS handshake"));
      if (!ready) {
        return Unavailable(where + "the handshake timed out after " + std::to_string(timeout_ms) +
                           " ms (is the port a TLS port?)");
      }
      continue;
    }
    const long verified = SSL_get_verify_result(tls_->ssl);
    if (tls.verify && verified != X509_V_OK) {
      ERR_clear_error();
      const bool other_name =
          verified == X509_V_ERR_HOSTNAME_MISMATCH || verified == X509_V_ERR_IP_ADDRESS_MISMATCH;
      return FailedPrecondition(
          where + "the server's certificate does not verify (" +
          X509_verify_cert_error_string(verified) + "); " +
          (other_name ? "connect by a name the certificate holds"
                      : "give the CA that signed it as cacertfile=PATH in the rediss:// URL"));
    }
    const unsigned long first = ERR_peek_error();
    const std::string detail = err == SSL_ERROR_SYSCALL && first == 0
                                   ? std::string(errno != 0 ? std::strerror(errno) : "EOF")
                                   : OpenSslErrors();
    if (IsCertificateRefusal(first)) {
      return FailedPrecondition(where + "the server refused our certificate: " + detail);
    }
    return Unavailable(where + "handshake failed (is the port a TLS port?): " + detail);
  }
}

Result<bool> RedisSocket::Wait(short events, int64_t timeout_ms, const char* what) {
  pollfd p{fd_, events, 0};
  int n;
  do {
    n = poll(&p, 1, static_cast<int>(std::max<int64_t>(timeout_ms, 0)));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Unavailable("redis " + peer_ + ": " + what + ": " + std::strerror(errno));
  return n > 0;
}

Status RedisSocket::Send(const std::vector<std::string>& argv, int64_t timeout_ms) {
  const std::string bytes = Encode(argv);
  size_t done = 0;
  while (done < bytes.size()) {
    const char* p = bytes.data() + done;
    const size_t left = bytes.size() - done;
    short wait_for = POLLOUT;
    if (tls_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_write(tls_->ssl, p, static_cast<int>(std::min<size_t>(left, 1 << 30)));
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      const int err = SSL_get_error(tls_->ssl, n);
      if (err == SSL_ERROR_WANT_READ) {
        wait_for = POLLIN;
      } else if (err != SSL_ERROR_WANT_WRITE) {
        const unsigned long first = ERR_peek_error();
        const std::string detail = err == SSL_ERROR_SYSCALL && first == 0
                                       ? std::string(errno != 0 ? std::strerror(errno) : "EOF")
                                       : OpenSslErrors();
        // A TLS 1.3 server refuses a client certificate (or its absence) with an alert after
        // the handshake and closes: a write may then fail on the reset before the alert is
        // read. Read what arrived, to say why.
        if (IsCertificateRefusal(first) || ServerRefusedOurCertificate()) {
          return FailedPrecondition("redis " + peer_ +
                                    ": TLS: the server refused our certificate: " + detail);
        }
        return Unavailable("redis " + peer_ + ": write failed: " + detail);
      }
    } else {
      const ssize_t n = send(fd_, p, left, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        return Unavailable("redis " + peer_ + ": write failed: " +
                           (n == 0 ? std::string("connection closed") : std::strerror(errno)));
      }
    }
    GAPLESS_ASSIGN_OR_RETURN(bool ready, Wait(wait_for, timeout_ms, "write"));
    if (!ready) {
      return Unavailable("redis " + peer_ + ": write timed out after " +
                         std::to_string(timeout_ms) + " ms");
    }
  }
  return Status::Ok();
}

bool RedisSocket::ServerRefusedOurCertificate() {
  char buf[1024];
  ERR_clear_error();
  const int n = SSL_read(tls_->ssl, buf, sizeof(buf));
  const bool refused = n <= 0 && IsCertificateRefusal(ERR_peek_error());
  ERR_clear_error();
  return refused;
}

Result<bool> RedisSocket::ReadSome(int64_t timeout_ms) {
  char buf[16 * 1024];
  while (true) {
    short wait_for = POLLIN;
    if (tls_ != nullptr) {
      ERR_clear_error();
      const int n = SSL_read(tls_->ssl, buf, sizeof(buf));
      if (n > 0) {
        redisReaderFeed(reader_, buf, static_cast<size_t>(n));
        return true;
      }
      const int err = SSL_get_error(tls_->ssl, n);
      if (err == SSL_ERROR_WANT_WRITE) {
        wait_for = POLLOUT;
      } else if (err == SSL_ERROR_ZERO_RETURN) {
        return Unavailable("redis " + peer_ + ": connection closed by the server");
      } else if (err != SSL_ERROR_WANT_READ) {
        const unsigned long first = ERR_peek_error();
        const std::string detail =
            err == SSL_ERROR_SYSCALL && first == 0
                ? std::string(n == 0 || errno == 0 ? "connection lost" : std::strerror(errno))
                : OpenSslErrors();
        if (IsCertificateRefusal(first)) {
          return FailedPrecondition("redis " + peer_ +
                                    ": TLS: the server refused our certificate: " + detail);
        }
        return Unavailable("redis " + peer_ + ": read failed: " + detail);
      }
    } else {
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        redisReaderFeed(reader_, buf, static_cast<size_t>(n));
        return true;
      }
      if (n == 0) return Unavailable("redis " + peer_ + ": connection closed by the server");
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return Unavailable("redis " + peer_ + ": read failed: " + std::strerror(errno));
      }
    }
    GAPLESS_ASSIGN_OR_RETURN(bool ready, Wait(wait_for, timeout_ms, "read"));
    if (!ready) return false;
  }
}

Result<std::optional<RawReply>> RedisSocket::Next(int64_t timeout_ms) {
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      return Unavailable("redis " + peer_ + ": the server's answer is not RESP (" +
                         std::string(reader_->errstr) + ")");
    }
    if (raw != nullptr) return std::optional<RawReply>(RawReply(static_cast<redisReply*>(raw)));
    GAPLESS_ASSIGN_OR_RETURN(bool got, ReadSome(timeout_ms));
    if (!got) return std::optional<RawReply>();
  }
}

}  // namespace gapless

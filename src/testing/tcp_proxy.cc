#include "testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace gapless {
namespace {

constexpr int kPollMs = 10;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "TcpProxy: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A connected socket to host:port, or -1.
int ConnectTo(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(addrs);
  return fd;
}

}  // namespace

struct TcpProxy::Conn {
  int client_fd = -1;
  std::string host;
  int port = 0;
  std::atomic<bool> close_requested{false};
  std::atomic<bool> finished{false};
  std::thread thread;
};

TcpProxy::TcpProxy(std::string target_host, int target_port)
    : target_host_(std::move(target_host)), target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) Die("socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("bind");
  if (::listen(listen_fd_, 128) != 0) Die("listen");
  socklen_t len = sizeof(addr);
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Die("getsockname");
  }
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) Die("pipe2");
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

TcpProxy::~TcpProxy() { Stop(); }

void TcpProxy::SetTarget(std::string host, int port) {
  std::lock_guard<std::mutex> lock(mu_);
  target_host_ = std::move(host);
  target_port_ = port;
}

void TcpProxy::CloseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : conns_) c->close_requested = true;
  // The connection threads close their sockets within a poll interval; they never take mu_.
  for (auto& c : conns_) {
    while (!c->finished.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void TcpProxy::Pause() {
  std::unique_lock<std::shared_mutex> lock(forwarding_);
  paused_ = true;
}

void TcpProxy::Resume() { paused_ = false; }

int TcpProxy::open_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& c : conns_) n += c->finished.load() ? 0 : 1;
  return n;
}

void TcpProxy::Stop() {
  if (stopping_.exchange(true)) return;
  char byte = 'x';
  while (::write(wake_pipe_[1], &byte, 1) < 0 && errno == EINTR) {
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) c->thread.join();  // each notices stopping_ within a poll interval
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
  listen_fd_ = -1;
}

void TcpProxy::ReapFinishedLocked() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if ((*it)->finished.load()) {
      (*it)->thread.join();
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpProxy::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || stopping_.load() || (fds[1].revents & POLLIN)) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    NoDelay(fd);
    ++accepted_;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load()) {
      ::close(fd);
      return;
    }
    ReapFinishedLocked();
    auto conn = std::make_unique<Conn>();
    conn->client_fd = fd;
    conn->host = target_host_;
    conn->port = target_port_;
    Conn* c = conn.get();
    conns_.push_back(std::move(conn));
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

void TcpProxy::Serve(Conn* c) {
  auto cancelled = [&] { return stopping_.load() || c->close_requested.load(); };
  // Sends all of data[0, n) to fd, waiting for buffer space; false on error or cancellation.
  auto send_all = [&](int fd, const char* data, size_t n) {
    while (n > 0) {
      ssize_t sent = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent > 0) {
        data += sent;
        n -= static_cast<size_t>(sent);
        continue;
      }
      if (sent < 0 && errno == EINTR) continue;
      if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (cancelled()) return false;
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, kPollMs);
        continue;
      }
      return false;
    }
    return true;
  };

  std::minstd_rand rng(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(c)));
  int upstream = ConnectTo(c->host, c->port);
  if (upstream >= 0) {
    NoDelay(upstream);
    char buf[16 * 1024];
    bool open = true;
    while (open && !cancelled()) {
      if (paused_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
        continue;
      }
      pollfd fds[2] = {{c->client_fd, POLLIN, 0}, {upstream, POLLIN, 0}};
      int rc = ::poll(fds, 2, kPollMs);
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) break;
      if (rc == 0) continue;
      if (const int64_t latency = latency_ms_.load(); latency > 0) {
        const int64_t jitter = jitter_ms_.load();
        const int64_t delay =
            latency + (jitter > 0 ? static_cast<int64_t>(rng() % (jitter + 1)) : 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      }
      std::shared_lock<std::shared_mutex> forwarding(forwarding_);
      if (paused_.load()) continue;  // paused between poll and here: leave the bytes unread
      for (int i = 0; i < 2 && open; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0 || !send_all(fds[1 - i].fd, buf, static_cast<size_t>(n))) open = false;
      }
    }
    ::close(upstream);
  }
  ::close(c->client_fd);
  c->finished = true;
}

void TcpProxy::SetLatency(int64_t ms, int64_t jitter_ms) {
  jitter_ms_.store(std::max<int64_t>(0, jitter_ms));
  latency_ms_.store(std::max<int64_t>(0, ms));
}

}  // namespace gapless

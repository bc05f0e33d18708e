#include "testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace gapless {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPollMs = 10;
constexpr size_t kChunkBytes = 16 * 1024;

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

// Reads and discards what fd has received, so that closing it sends FIN rather than RST: an RST
// could make the peer lose bytes it has not read yet.
void Drain(int fd) {
  char buf[4096];
  while (::recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
}

// One direction of a connection: a chunk read from `from` waits in buf[begin, end) until it is
// due (latency) and the token bucket allows (bandwidth), then goes to `to`, possibly in parts.
// Only the connection's thread touches it.
struct Pipe {
  int from = -1;
  int to = -1;
  std::vector<char> buf;
  size_t begin = 0;
  size_t end = 0;
  Clock::time_point due;  // when the chunk may be forwarded, latency-wise
  // Token bucket: filled at `rate` bytes per second up to Capacity(rate); reset when the rate
  // changes.
  int64_t rate = 0;
  double tokens = 0;
  Clock::time_point refilled;

  void Init(int from_fd, int to_fd) {
    from = from_fd;
    to = to_fd;
    buf.resize(kChunkBytes);
  }
  bool empty() const { return begin == end; }

  // 1/20 s worth of bytes, at least one.
  static double Capacity(int64_t r) { return std::max(1.0, static_cast<double>(r) / 20); }

  // When the chunk may be forwarded, given the bandwidth `r` (0: unlimited): after its latency,
  // and once the bucket holds enough tokens for as much of it as the bucket can hold.
  Clock::time_point Due(int64_t r, Clock::time_point now) {
    if (r <= 0) {
      rate = 0;
      return due;
    }
    if (r != rate) {
      rate = r;
      tokens = Capacity(r);
    } else {
      const double earned = std::chrono::duration<double>(now - refilled).count() * r;
      tokens = std::min(Capacity(r), tokens + earned);
    }
    refilled = now;
    const double need = std::min(static_cast<double>(end - begin), std::floor(Capacity(r)));
    if (tokens >= need) return due;
    const auto wait = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>((need - tokens) / static_cast<double>(r)));
    return std::max(due, now + wait);
  }

  // n bytes of the chunk were forwarded at bandwidth r.
  void Sent(size_t n, int64_t r) {
    begin += n;
    if (begin == end) begin = end = 0;
    if (r > 0) tokens -= static_cast<double>(n);
  }
};

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
  for (auto& paused : paused_) paused = true;
}

void TcpProxy::Pause(Direction direction) {
  std::unique_lock<std::shared_mutex> lock(forwarding_);
  paused_[static_cast<int>(direction)] = true;
}

void TcpProxy::Resume() {
  for (auto& paused : paused_) paused = false;
}

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
  std::minstd_rand rng(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(c)));
  auto delay = [&] {
    const int64_t latency = latency_ms_.load();
    const int64_t jitter = jitter_ms_.load();
    if (latency <= 0 && jitter <= 0) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(latency +
                                     (jitter > 0 ? static_cast<int64_t>(rng() % (jitter + 1)) : 0));
  };

  int upstream = ConnectTo(c->host, c->port);
  bool out_of_budget = false;
  if (upstream >= 0) {
    NoDelay(upstream);
    Pipe pipes[2];
    pipes[static_cast<int>(Direction::kToServer)].Init(c->client_fd, upstream);
    pipes[static_cast<int>(Direction::kToClient)].Init(upstream, c->client_fd);
    int64_t seen_generation = 0;
    int64_t budget = -1;  // bytes this connection may still forward; -1: no limit
    bool open = true;
    while (open && !cancelled()) {
      // Each direction waits for one thing: bytes to read (its chunk is empty), room to write
      // (its chunk is due), or the time its chunk is due (latency, bandwidth).
      Clock::time_point now = Clock::now();
      const int64_t rate = bandwidth_.load();
      int timeout_ms = kPollMs;
      pollfd fds[2];
      for (int d = 0; d < 2; ++d) {
        Pipe& p = pipes[d];
        fds[d] = {-1, 0, 0};
        if (paused_[d].load()) continue;
        if (p.empty()) {
          fds[d] = {p.from, POLLIN, 0};
          continue;
        }
        const Clock::time_point due = p.Due(rate, now);
        if (due <= now) {
          fds[d] = {p.to, POLLOUT, 0};
        } else {
          const auto wait = std::chrono::ceil<std::chrono::milliseconds>(due - now).count();
          timeout_ms = static_cast<int>(std::min<int64_t>(timeout_ms, wait));
        }
      }
      int rc = ::poll(fds, 2, timeout_ms);
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) break;

      std::shared_lock<std::shared_mutex> forwarding(forwarding_);
      if (const int64_t generation = close_after_generation_.load();
          generation != seen_generation) {
        seen_generation = generation;
        const int64_t n = close_after_.load();
        budget = n > 0 ? n : -1;
      }
      for (int d = 0; d < 2 && open; ++d) {
        // Paused since the poll: leave the bytes where they are.
        if (paused_[d].load()) continue;
        Pipe& p = pipes[d];
        if (p.empty()) {
          if (fds[d].fd < 0 || !(fds[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t n = ::recv(p.from, p.buf.data(), p.buf.size(), MSG_DONTWAIT);
          if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
          if (n <= 0) {
            open = false;
            break;
          }
          p.begin = 0;
          p.end = static_cast<size_t>(n);
          p.due = Clock::now() + delay();
        }
        // Forward what is due (possibly the chunk just read), as far as the bandwidth, the
        // budget and the socket's buffer allow.
        now = Clock::now();
        const int64_t current_rate = bandwidth_.load();
        if (p.Due(current_rate, now) > now) continue;
        size_t want = p.end - p.begin;
        if (current_rate > 0) want = std::min(want, static_cast<size_t>(p.tokens));
        if (budget >= 0) want = std::min(want, static_cast<size_t>(budget));
        if (want == 0) continue;
        ssize_t n = ::send(p.to, p.buf.data() + p.begin, want, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0) {
          open = false;
          break;
        }
        p.Sent(static_cast<size_t>(n), current_rate);
        if (budget >= 0) {
          budget -= n;
          if (budget == 0) {
            out_of_budget = true;
            open = false;
          }
        }
      }
    }
    if (out_of_budget) Drain(upstream);
    ::close(upstream);
  }
  if (out_of_budget) Drain(c->client_fd);
  ::close(c->client_fd);
  c->finished = true;
}

void TcpProxy::SetLatency(int64_t ms, int64_t jitter_ms) {
  jitter_ms_.store(std::max<int64_t>(0, jitter_ms));
  latency_ms_.store(std::max<int64_t>(0, ms));
}

void TcpProxy::SetBandwidth(int64_t bytes_per_second) {
  bandwidth_.store(std::max<int64_t>(0, bytes_per_second));
}

void TcpProxy::CloseAfterBytes(int64_t n) {
  std::unique_lock<std::shared_mutex> lock(forwarding_);
  close_after_.store(n);
  ++close_after_generation_;
}

void TcpProxy::Heal() {
  Resume();
  SetLatency(0, 0);
  SetBandwidth(0);
  CloseAfterBytes(0);
}

}  // namespace gapless

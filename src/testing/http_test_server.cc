#include "testing/http_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
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

#include "rpc/http_transport.h"

namespace gapless {
namespace {

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "HttpTestServer: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads more bytes into buf; false on EOF or error.
bool ReadMore(int fd, std::string& buf) {
  char tmp[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
    return true;
  }
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

std::string ResponseHead(const HttpTestServer::Response& r, bool close) {
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + Reason(r.status) + "\r\n";
  head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (!r.content_type.empty()) head += "Content-Type: " + r.content_type + "\r\n";
  for (const auto& [name, value] : r.headers) head += name + ": " + value + "\r\n";
  head += close ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
  head += "\r\n";
  return head;
}

}  // namespace

std::string_view HttpTestServer::Request::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return {};
}

HttpTestServer::Response HttpTestServer::Response::Json(std::string body, int status) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpTestServer::Response HttpTestServer::Response::CloseWithoutAnswer() {
  Response r;
  r.action = Action::kCloseWithoutAnswer;
  return r;
}

HttpTestServer::Response HttpTestServer::Response::Reset() {
  Response r;
  r.action = Action::kReset;
  return r;
}

HttpTestServer::Response HttpTestServer::Response::Truncated(std::string body, size_t bytes_sent) {
  Response r;
  r.body = std::move(body);
  r.action = Action::kTruncateBody;
  r.truncate_to = bytes_sent;
  return r;
}

HttpTestServer::HttpTestServer(Handler handler) : handler_(std::move(handler)) {
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

HttpTestServer::~HttpTestServer() { Stop(); }

void HttpTestServer::SetHandler(Handler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(handler);
}

HttpTestServer::Handler HttpTestServer::handler() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handler_;
}

std::string HttpTestServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/";
}

std::vector<int64_t> HttpTestServer::arrival_micros() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arrivals_;
}

void HttpTestServer::Stop() {
  if (stopping_.exchange(true)) {
    return;  // already stopped (or stopping on another thread)
  }
  char byte = 'x';
  while (::write(wake_pipe_[1], &byte, 1) < 0 && errno == EINTR) {
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
    stop_cv_.notify_all();
  }
  for (std::thread& t : threads) t.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
  listen_fd_ = -1;
}

bool HttpTestServer::SleepUnlessStopped(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return !stop_cv_.wait_for(lock, std::chrono::milliseconds(ms),
                            [this] { return stopping_.load(); });
}

void HttpTestServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || stopping_.load() || (fds[1].revents & POLLIN)) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint64_t id = static_cast<uint64_t>(++connections_);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load()) {
      ::close(fd);
      return;
    }
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd, id] { ServeConnection(fd, id); });
  }
}

void HttpTestServer::ServeConnection(int fd, uint64_t id) {
  std::string buf;
  bool linger_reset = false;
  while (!stopping_.load()) {
    size_t header_end;
    bool eof = false;
    while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(fd, buf)) {
        eof = true;
        break;
      }
    }
    if (eof) break;

    Request req;
    req.connection_id = id;
    std::string_view head(buf.data(), header_end);
    size_t line_end = head.find("\r\n");
    std::string_view request_line = head.substr(0, line_end);
    size_t sp1 = request_line.find(' ');
    size_t sp2 = request_line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) break;  // not HTTP: drop the connection
    req.method = std::string(request_line.substr(0, sp1));
    req.target = std::string(request_line.substr(sp1 + 1, sp2 - sp1 - 1));
    // A copy: reading the body below may move `buf`, and `head` with it.
    const std::string version(request_line.substr(sp2 + 1));
    size_t content_length = 0;
    while (line_end != std::string_view::npos && line_end < head.size()) {
      size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      std::string_view line =
          head.substr(start, line_end == std::string_view::npos ? head.npos : line_end - start);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string name = Lower(Trim(line.substr(0, colon)));
      std::string value(Trim(line.substr(colon + 1)));
      if (name == "content-length") content_length = std::strtoull(value.c_str(), nullptr, 10);
      req.headers.emplace_back(std::move(name), std::move(value));
    }
    if (Lower(req.Header("expect")) == "100-continue") {
      if (!SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) break;
    }
    const size_t body_start = header_end + 4;
    while (buf.size() < body_start + content_length) {
      if (!ReadMore(fd, buf)) {
        eof = true;
        break;
      }
    }
    if (eof) break;
    req.body = buf.substr(body_start, content_length);
    buf.erase(0, body_start + content_length);
    req.arrival_micros = SteadyMicros();
    ++requests_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      arrivals_.push_back(req.arrival_micros);
    }
    std::string connection = Lower(req.Header("connection"));
    bool client_close =
        connection == "close" || (version == "HTTP/1.0" && connection != "keep-alive");

    Handler h = handler();
    Response resp = h ? h(req) : Response::Json("no handler", 404);
    if (resp.delay_ms > 0 && !SleepUnlessStopped(resp.delay_ms)) break;
    if (resp.action == Response::Action::kCloseWithoutAnswer) break;
    if (resp.action == Response::Action::kReset) {
      linger_reset = true;
      break;
    }
    if (resp.action == Response::Action::kTruncateBody) {
      SendAll(fd, ResponseHead(resp, /*close=*/true));
      SendAll(fd,
              std::string_view(resp.body).substr(0, std::min(resp.truncate_to, resp.body.size())));
      break;
    }
    bool close = client_close || resp.close_after;
    if (!SendAll(fd, ResponseHead(resp, close)) || !SendAll(fd, resp.body) || close) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(open_fds_, fd);
  }
  if (linger_reset) {
    linger lg{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  }
  ::close(fd);
}

HttpTestServer::Handler HttpTestServer::ForwardTo(HttpTransport* transport) {
  return [transport](const Request& req) {
    Result<HttpResponse> r = transport->Post(req.body);
    if (!r.ok()) return Response::Json(r.status().ToString(), 502);
    Response resp = Response::Json(std::move(r->body), static_cast<int>(r->status));
    return resp;
  };
}

}  // namespace gapless

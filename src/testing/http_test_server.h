// HttpTestServer: a small real HTTP/1.1 server on 127.0.0.1 for tests, answering through a
// handler callback, so client code is tested over real sockets (keep-alive, timeouts, resets)
// without any external network.
//
// The server listens on an ephemeral port from construction until destruction (or Stop), runs an
// accept thread and one thread per connection, keeps connections alive across requests
// (HTTP/1.1), and counts connections and requests. A Response can delay its answer, set any
// status and headers (e.g. Retry-After), close the connection without answering, reset it, or
// send a truncated body (a Content-Length larger than the bytes sent, then close).
//
// Thread-safety: the handler is called from the connection threads, possibly concurrently when
// clients open several connections; it must be thread-safe. All public methods are thread-safe.
// Supports request bodies with Content-Length (what libcurl sends for POST), not chunked ones.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace gapless {

class HttpTransport;

class HttpTestServer {
 public:
  struct Request {
    std::string method;                                        // "POST"
    std::string target;                                        // "/"
    std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
    std::string body;
    uint64_t connection_id = 0;  // 1 for the first accepted connection, 2 for the next, ...
    int64_t arrival_micros = 0;  // steady clock, when the request was complete

    // The value of the first header with this (lower-case) name, or "".
    std::string_view Header(std::string_view name) const;
  };

  struct Response {
    enum class Action {
      kAnswer,              // send the response
      kCloseWithoutAnswer,  // close the connection after reading the request (FIN)
      kReset,               // reset the connection (RST) after reading the request
      kTruncateBody,        // announce body.size() bytes, send truncate_to of them, close
    };
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;  // e.g. {"Retry-After", "3"}
    std::string body;
    std::string content_type = "application/json";
    int64_t delay_ms = 0;  // wait this long before acting (interrupted by Stop)
    Action action = Action::kAnswer;
    size_t truncate_to = 0;    // for kTruncateBody
    bool close_after = false;  // send "Connection: close" and close after answering

    static Response Json(std::string body, int status = 200);
    static Response CloseWithoutAnswer();
    static Response Reset();
    static Response Truncated(std::string body, size_t bytes_sent);
  };

  using Handler = std::function<Response(const Request&)>;

  // Starts listening on 127.0.0.1:<ephemeral>. Aborts the process if it cannot (a test helper).
  explicit HttpTestServer(Handler handler = nullptr);
  ~HttpTestServer();
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  // Replaces the handler for requests that arrive from now on. A null handler answers 404.
  void SetHandler(Handler handler);

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:<port>/"
  std::string url() const;

  int64_t connections_accepted() const { return connections_.load(); }
  int64_t requests_received() const { return requests_.load(); }
  // Arrival times (steady clock micros) of all requests so far, in arrival order.
  std::vector<int64_t> arrival_micros() const;

  // Closes the listening socket and every open connection, interrupts delays and joins the
  // threads. Idempotent; the destructor calls it.
  void Stop();

  // A handler that forwards each request body to transport->Post and answers with its status and
  // body (e.g. a ReplayTransport, making a fake JSON-RPC node for integration tests). transport
  // must be thread-safe and outlive the server.
  static Handler ForwardTo(HttpTransport* transport);

 private:
  void AcceptLoop();
  void ServeConnection(int fd, uint64_t id);
  // Sleeps up to ms; returns false if the server is stopping.
  bool SleepUnlessStopped(int64_t ms);
  Handler handler() const;

  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> requests_{0};

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  Handler handler_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;
  std::vector<int64_t> arrivals_;
  std::thread accept_thread_;
};

}  // namespace gapless

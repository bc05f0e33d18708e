// TcpProxy against small in-process servers that answer each read with "<name>:<bytes>", so a
// test can tell which server a connection reaches: retargeting moves only new connections,
// CloseAll cuts open ones, Pause black-holes (both ways or one way) without losing bytes, Resume
// delivers them, CloseAfterBytes cuts after exactly n bytes, SetBandwidth and SetLatency slow
// a transfer down, Heal lifts it all.
#include "testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gapless {
namespace {

// Listens on 127.0.0.1:<ephemeral>; records every byte it reads and answers every chunk it reads
// with name + ":" + chunk (a sink, echo = false, only records). Push() sends to every connection
// it has accepted, unasked.
class TagServer {
 public:
  explicit TagServer(std::string name, bool echo = true) : name_(std::move(name)), echo_(echo) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    accept_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 10) <= 0) continue;
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        std::lock_guard<std::mutex> lock(mu_);
        accepted_.push_back(c);
        conns_.emplace_back([this, c] { Serve(c); });
      }
    });
  }
  ~TagServer() {
    stop_ = true;
    accept_.join();
    for (auto& t : conns_) t.join();
    for (int c : accepted_) close(c);
    close(fd_);
  }
  int port() const { return port_; }
  std::string received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  size_t accepted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return accepted_.size();
  }
  size_t received_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_.size();
  }
  void Push(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int c : accepted_) send(c, s.data(), s.size(), MSG_NOSIGNAL);
  }

 private:
  void Serve(int c) {
    char buf[4096];
    while (!stop_) {
      pollfd p{c, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.append(buf, static_cast<size_t>(n));
      }
      if (!echo_) continue;
      std::string out = name_ + ":" + std::string(buf, static_cast<size_t>(n));
      send(c, out.data(), out.size(), MSG_NOSIGNAL);
    }
  }

  std::string name_;
  bool echo_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_;
  mutable std::mutex mu_;      // guards accepted_, received_, and conns_ until the destructor
  std::vector<int> accepted_;  // closed by the destructor
  std::vector<std::thread> conns_;
  std::string received_;
};

// Polls `done` every few ms for up to timeout_ms; its last answer.
template <typename Pred>
bool WaitFor(Pred done, int timeout_ms = 2000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// A client connection to the proxy.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Client() { close(fd_); }
  bool connected() const { return connected_; }
  // Sends all of s (blocks while the socket's buffer is full).
  void Send(const std::string& s) {
    for (size_t sent = 0; sent < s.size();) {
      ssize_t n = send(fd_, s.data() + sent, s.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  // Whatever arrives within timeout_ms (until `want` bytes): "" for nothing, "<EOF>" when the
  // proxy closed the connection before anything arrived.
  std::string Receive(int timeout_ms = 2000, size_t want = 0) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline && (want == 0 || got.size() < want)) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      char buf[256];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return got.empty() ? "<EOF>" : got;
      got.append(buf, static_cast<size_t>(n));
      if (want == 0) break;
    }
    return got;
  }
  // Everything that arrives until the proxy closes the connection, then "<EOF>"; without the
  // marker when it is still open after timeout_ms.
  std::string ReceiveUntilEof(int timeout_ms = 2000) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      char buf[256];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return got + "<EOF>";
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

TEST(TcpProxyTest, NewConnectionsGoToTheNewTargetOpenOnesStay) {
  TagServer a("A"), b("B");
  TcpProxy proxy("127.0.0.1", a.port());
  Client first(proxy.port());
  ASSERT_TRUE(first.connected());
  first.Send("x");
  EXPECT_EQ(first.Receive(), "A:x");
  proxy.SetTarget("127.0.0.1", b.port());
  first.Send("y");
  EXPECT_EQ(first.Receive(), "A:y") << "an open connection stays with its server";
  Client second(proxy.port());
  second.Send("z");
  EXPECT_EQ(second.Receive(), "B:z");
  EXPECT_EQ(proxy.connections_accepted(), 2);
  EXPECT_EQ(proxy.open_connections(), 2);
}

TEST(TcpProxyTest, CloseAllClosesOpenConnectionsAndKeepsAccepting) {
  TagServer a("A");
  TcpProxy proxy("127.0.0.1", a.port());
  Client first(proxy.port());
  first.Send("x");
  ASSERT_EQ(first.Receive(), "A:x");
  proxy.CloseAll();
  EXPECT_EQ(proxy.open_connections(), 0);
  EXPECT_EQ(first.Receive(), "<EOF>");
  Client second(proxy.port());
  second.Send("y");
  EXPECT_EQ(second.Receive(), "A:y");
}

TEST(TcpProxyTest, PauseBlackHolesAndResumeDeliversEverything) {
  TagServer a("A");
  TcpProxy proxy("127.0.0.1", a.port());
  Client first(proxy.port());
  first.Send("x");
  ASSERT_EQ(first.Receive(), "A:x");
  proxy.Pause();
  first.Send("y");
  EXPECT_EQ(first.Receive(300), "") << "nothing gets through while paused";
  Client during(proxy.port());  // accepted while paused, but carries nothing
  ASSERT_TRUE(during.connected());
  during.Send("z");
  EXPECT_EQ(during.Receive(300), "");
  EXPECT_EQ(proxy.open_connections(), 2) << "a black hole closes nothing";
  proxy.Resume();
  EXPECT_EQ(first.Receive(2000, 3), "A:y") << "bytes sent during the pause are not lost";
  EXPECT_EQ(during.Receive(2000, 3), "A:z");
}

// A lower bound only (a loaded machine makes a round trip slower, never faster): with 150 ms per
// forwarded chunk, a request and its answer take at least 300 ms more than without.
TEST(TcpProxyTest, LatencyDelaysEveryChunkAndCanBeLifted) {
  TagServer a("A");
  TcpProxy proxy("127.0.0.1", a.port());
  Client client(proxy.port());
  auto round_trip = [&](const std::string& what) {
    auto start = std::chrono::steady_clock::now();
    client.Send(what);
    EXPECT_EQ(client.Receive(5000), "A:" + what);
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  const int64_t baseline = round_trip("a");
  proxy.SetLatency(150, 20);
  const int64_t slow = round_trip("b");
  EXPECT_GE(slow, 300) << "baseline " << baseline << " ms";
  proxy.SetLatency(0, 0);
  const int64_t lifted = round_trip("c");
  EXPECT_LT(lifted, slow) << "baseline " << baseline << " ms";
}

TEST(TcpProxyTest, OneWayPauseToServerHoldsRequestsWhileTheServerStillReachesTheClient) {
  TagServer a("A");
  TcpProxy proxy("127.0.0.1", a.port());
  Client client(proxy.port());
  client.Send("x");
  ASSERT_EQ(client.Receive(), "A:x");
  proxy.Pause(TcpProxy::Direction::kToServer);
  client.Send("y");
  Client during(proxy.port());  // accepted while paused: held the same way
  ASSERT_TRUE(during.connected());
  during.Send("z");
  ASSERT_TRUE(WaitFor([&] { return a.accepted() == 2; }));  // so that Push reaches both
  a.Push("push");
  EXPECT_EQ(client.Receive(2000, 4), "push") << "server -> client still flows";
  EXPECT_EQ(during.Receive(2000, 4), "push") << "also on a connection accepted while paused";
  EXPECT_EQ(client.Receive(300), "") << "the request never reached the server";
  EXPECT_EQ(a.received(), "x");
  proxy.Resume();
  EXPECT_EQ(client.Receive(2000, 3), "A:y") << "bytes held during the pause are not lost";
  EXPECT_EQ(during.Receive(2000, 3), "A:z");
}

TEST(TcpProxyTest, OneWayPauseToClientHoldsAnswersWhileRequestsStillReachTheServer) {
  TagServer a("A");
  TcpProxy proxy("127.0.0.1", a.port());
  Client client(proxy.port());
  client.Send("x");
  ASSERT_EQ(client.Receive(), "A:x");
  proxy.Pause(TcpProxy::Direction::kToClient);
  client.Send("y");
  EXPECT_TRUE(WaitFor([&] { return a.received() == "xy"; })) << "client -> server still flows";
  EXPECT_EQ(client.Receive(300), "") << "the answer is held";
  proxy.Resume();
  EXPECT_EQ(client.Receive(2000, 3), "A:y") << "bytes held during the pause are not lost";
}

// Budgets count both directions from the call: "hello world" (11 bytes) goes to the server, and
// of its 13-byte answer "A:hello world" only 15 - 11 = 4 bytes come back before the cut.
TEST(TcpProxyTest, CloseAfterBytesForwardsExactlyNBytesThenClosesUntilTurnedOff) {
  TagServer a("A");
  TcpProxy proxy("127.0.0.1", a.port());
  Client open_before(proxy.port());
  open_before.Send("x");
  ASSERT_EQ(open_before.Receive(), "A:x");  // 4 bytes before the call: not counted
  proxy.CloseAfterBytes(15);
  open_before.Send("hello world");
  EXPECT_EQ(open_before.ReceiveUntilEof(), "A:he<EOF>") << "an open connection is cut";
  Client later(proxy.port());
  later.Send("hello world");
  EXPECT_EQ(later.ReceiveUntilEof(), "A:he<EOF>") << "a new connection gets its own budget";
  EXPECT_EQ(a.received(), "xhello worldhello world");

  proxy.CloseAfterBytes(5);  // splits the client's chunk: only "hello" reaches the server
  Client split(proxy.port());
  split.Send("hello world");
  EXPECT_EQ(split.ReceiveUntilEof(), "<EOF>");
  EXPECT_TRUE(WaitFor([&] { return a.received() == "xhello worldhello worldhello"; }))
      << a.received();
  EXPECT_TRUE(WaitFor([&] { return proxy.open_connections() == 0; }));

  proxy.CloseAfterBytes(0);
  Client after(proxy.port());
  after.Send("hello world");
  EXPECT_EQ(after.Receive(2000, 13), "A:hello world");
  after.Send("and more");
  EXPECT_EQ(after.Receive(2000, 10), "A:and more");
  EXPECT_EQ(proxy.open_connections(), 1) << "turned off: nothing is cut";
}

// Lower bounds only (a loaded machine makes a transfer slower, never faster). 32 KiB at 32 KiB/s
// takes at least 950 ms (the bucket lends at most 1/20 s worth up front); with 250 ms latency on
// top, the first byte leaves 250 ms later. The same transfer unlimited is the baseline.
TEST(TcpProxyTest, BandwidthLimitPacesATransferAndComposesWithLatency) {
  TagServer sink("S", /*echo=*/false);
  TcpProxy proxy("127.0.0.1", sink.port());
  Client client(proxy.port());
  const std::string payload(32 * 1024, 'b');
  size_t total = 0;
  auto transfer_ms = [&] {
    const auto start = std::chrono::steady_clock::now();
    client.Send(payload);
    total += payload.size();
    EXPECT_TRUE(WaitFor([&] { return sink.received_bytes() >= total; }, 20000));
    return MsSince(start);
  };
  const int64_t baseline = transfer_ms();
  proxy.SetBandwidth(32 * 1024);
  const int64_t limited = transfer_ms();
  EXPECT_GE(limited, 750) << "baseline " << baseline << " ms";
  proxy.SetLatency(250, 0);
  const int64_t both = transfer_ms();
  EXPECT_GE(both, 1000) << "baseline " << baseline << " ms, bandwidth alone " << limited << " ms";
  proxy.SetLatency(0, 0);
  proxy.SetBandwidth(0);
  const int64_t lifted = transfer_ms();
  EXPECT_LT(lifted, limited) << "baseline " << baseline << " ms";
  EXPECT_EQ(sink.received(), payload + payload + payload + payload) << "nothing lost or reordered";
}

// Each fault alone would fail the round trips below: the pause holds the answer, 3 s latency and
// 1 byte/s outlast the 2 s wait, a 3-byte budget cuts the connection.
TEST(TcpProxyTest, HealLiftsEveryFaultOnOpenAndNewConnections) {
  TagServer a("A");
  TcpProxy proxy("127.0.0.1", a.port());
  Client open_before(proxy.port());
  open_before.Send("x");
  ASSERT_EQ(open_before.Receive(), "A:x");
  proxy.Pause(TcpProxy::Direction::kToClient);
  proxy.SetLatency(3000, 0);
  proxy.SetBandwidth(1);
  proxy.CloseAfterBytes(3);
  proxy.Heal();
  open_before.Send("hello");
  EXPECT_EQ(open_before.Receive(2000, 7), "A:hello");
  Client later(proxy.port());
  later.Send("hello");
  EXPECT_EQ(later.Receive(2000, 7), "A:hello");
  EXPECT_EQ(proxy.open_connections(), 2);
}

TEST(TcpProxyTest, UnreachableTargetClosesTheClient) {
  int closed_port;
  {
    TagServer gone("G");
    closed_port = gone.port();
  }  // nothing listens there any more
  TcpProxy proxy("127.0.0.1", closed_port);
  Client c(proxy.port());
  ASSERT_TRUE(c.connected());  // the proxy accepts, then fails to connect on
  EXPECT_EQ(c.Receive(), "<EOF>");
}

}  // namespace
}  // namespace gapless

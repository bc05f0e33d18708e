// TcpProxy against small in-process servers that answer each read with "<name>:<bytes>", so a
// test can tell which server a connection reaches: retargeting moves only new connections,
// CloseAll cuts open ones, Pause black-holes without losing bytes, Resume delivers them.
#include "testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace gapless {
namespace {

// Listens on 127.0.0.1:<ephemeral>; answers every chunk it reads with name + ":" + chunk.
class TagServer {
 public:
  explicit TagServer(std::string name) : name_(std::move(name)) {
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
        if (c >= 0) conns_.emplace_back([this, c] { Serve(c); });
      }
    });
  }
  ~TagServer() {
    stop_ = true;
    accept_.join();
    for (auto& t : conns_) t.join();
    close(fd_);
  }
  int port() const { return port_; }

 private:
  void Serve(int c) {
    char buf[256];
    while (!stop_) {
      pollfd p{c, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) break;
      std::string out = name_ + ":" + std::string(buf, static_cast<size_t>(n));
      send(c, out.data(), out.size(), MSG_NOSIGNAL);
    }
    close(c);
  }

  std::string name_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_;
  std::vector<std::thread> conns_;  // only touched by the accept thread until the destructor
};

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
  void Send(const std::string& s) { send(fd_, s.data(), s.size(), MSG_NOSIGNAL); }
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

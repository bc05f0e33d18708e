// CurlTransport against a real in-process HTTP server: keep-alive, timeouts, refused
// connections, truncated bodies, resets, Retry-After.
#include "rpc/curl_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include "testing/http_test_server.h"

namespace gapless {
namespace {

using Response = HttpTestServer::Response;

CurlTransportOptions FastOptions() {
  CurlTransportOptions o;
  o.connect_timeout_ms = 2000;
  o.request_timeout_ms = 5000;
  return o;
}

// A port nothing listens on: bind an ephemeral port, then close it.
uint16_t ClosedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(ParseRetryAfterTest, SecondsAndDates) {
  EXPECT_EQ(ParseRetryAfter("3", 0), 3'000'000);
  EXPECT_EQ(ParseRetryAfter(" 0 ", 0), 0);
  EXPECT_EQ(ParseRetryAfter("soon", 0), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-1", 0), std::nullopt);
  // 2015-10-21T07:28:00Z = 1445412480; ten seconds before it.
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", (1445412480LL - 10) * 1'000'000),
            10'000'000);
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", (1445412480LL + 99) * 1'000'000), 0);
}

TEST(CurlTransportTest, KeepsTheConnectionAliveAcrossPosts) {
  HttpTestServer server(
      [](const HttpTestServer::Request& req) { return Response::Json("echo:" + req.body); });
  CurlTransport transport(server.url(), FastOptions());
  for (int i = 0; i < 10; ++i) {
    Result<HttpResponse> r = transport.Post("{\"n\":" + std::to_string(i) + "}");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "echo:{\"n\":" + std::to_string(i) + "}");
  }
  EXPECT_EQ(server.requests_received(), 10);
  EXPECT_EQ(server.connections_accepted(), 1);
}

TEST(CurlTransportTest, SendsJsonContentTypeAndExtraHeaders) {
  std::mutex mu;  // the handler runs on the server's thread
  std::string content_type, auth;
  HttpTestServer server([&](const HttpTestServer::Request& req) {
    std::lock_guard<std::mutex> lock(mu);
    content_type = std::string(req.Header("content-type"));
    auth = std::string(req.Header("authorization"));
    return Response::Json("{}");
  });
  CurlTransportOptions options = FastOptions();
  options.headers.push_back("Authorization: Bearer abc");
  CurlTransport transport(server.url(), options);
  ASSERT_TRUE(transport.Post("{}").ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(content_type, "application/json");
  EXPECT_EQ(auth, "Bearer abc");
}

TEST(CurlTransportTest, ReturnsAnyStatusWithRetryAfter) {
  HttpTestServer server([](const HttpTestServer::Request&) {
    Response r = Response::Json("slow down", 429);
    r.headers.emplace_back("Retry-After", "7");
    return r;
  });
  CurlTransport transport(server.url(), FastOptions());
  Result<HttpResponse> r = transport.Post("{}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->body, "slow down");
  EXPECT_EQ(r->retry_after_micros, 7'000'000);
}

TEST(CurlTransportTest, BodyHasPaddingCapacity) {
  std::string big(100'000, 'x');
  HttpTestServer server([&](const HttpTestServer::Request&) { return Response::Json(big); });
  CurlTransport transport(server.url(), FastOptions());
  Result<HttpResponse> r = transport.Post("{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, big);
  EXPECT_GE(r->body.capacity(), r->body.size() + 64);
}

TEST(CurlTransportTest, ConnectionRefusedNamesTheAddress) {
  uint16_t port = ClosedPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  CurlTransport transport(url, FastOptions());
  Result<HttpResponse> r = transport.Post("{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << r.status().message();
}

TEST(CurlTransportTest, CredentialsNeverAppearInErrors) {
  uint16_t port = ClosedPort();
  std::string url = "http://alice:hunter2@127.0.0.1:" + std::to_string(port) +
                    "/v2/0123456789abcdef0123456789abcdef";
  CurlTransport transport(url, FastOptions());
  EXPECT_EQ(transport.Describe().find("hunter2"), std::string::npos);
  Result<HttpResponse> r = transport.Post("{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("0123456789abcdef0123"), std::string::npos)
      << r.status().message();
}

TEST(CurlTransportTest, RequestTimeoutIsUnavailable) {
  HttpTestServer server([](const HttpTestServer::Request&) {
    Response r = Response::Json("{}");
    r.delay_ms = 3000;
    return r;
  });
  CurlTransportOptions options = FastOptions();
  options.request_timeout_ms = 200;
  CurlTransport transport(server.url(), options);
  auto start = std::chrono::steady_clock::now();
  Result<HttpResponse> r = transport.Post("{}");
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos) << r.status().message();
  EXPECT_LT(elapsed, std::chrono::milliseconds(2000));
}

TEST(CurlTransportTest, TruncatedBodyIsUnavailable) {
  HttpTestServer server([](const HttpTestServer::Request&) {
    return Response::Truncated(R"({"jsonrpc":"2.0","id":1,"result":"0x1"})", 10);
  });
  CurlTransport transport(server.url(), FastOptions());
  Result<HttpResponse> r = transport.Post("{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
}

TEST(CurlTransportTest, CloseWithoutAnswerAndResetAreUnavailable) {
  std::atomic<int> calls{0};
  HttpTestServer server([&](const HttpTestServer::Request&) {
    ++calls;
    return calls == 1 ? Response::CloseWithoutAnswer() : Response::Reset();
  });
  CurlTransport transport(server.url(), FastOptions());
  Result<HttpResponse> closed = transport.Post("{}");
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), Code::kUnavailable);
  Result<HttpResponse> reset = transport.Post("{}");
  ASSERT_FALSE(reset.ok());
  EXPECT_EQ(reset.status().code(), Code::kUnavailable);
}

TEST(CurlTransportTest, RecoversOnANewConnectionAfterAFailure) {
  std::atomic<int> calls{0};
  HttpTestServer server([&](const HttpTestServer::Request&) {
    return ++calls == 1 ? Response::CloseWithoutAnswer() : Response::Json("ok");
  });
  CurlTransport transport(server.url(), FastOptions());
  EXPECT_FALSE(transport.Post("{}").ok());
  Result<HttpResponse> r = transport.Post("{}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(server.connections_accepted(), 2);
}

TEST(HttpTestServerTest, CountsRequestsAndRecordsArrivals) {
  HttpTestServer server([](const HttpTestServer::Request&) { return Response::Json("{}"); });
  CurlTransport transport(server.url(), FastOptions());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(transport.Post("{}").ok());
  std::vector<int64_t> arrivals = server.arrival_micros();
  ASSERT_EQ(arrivals.size(), 3u);
  EXPECT_LE(arrivals[0], arrivals[1]);
  EXPECT_LE(arrivals[1], arrivals[2]);
  server.Stop();
  server.Stop();  // idempotent
  EXPECT_FALSE(transport.Post("{}").ok());
}

}  // namespace
}  // namespace gapless

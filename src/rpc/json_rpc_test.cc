// JsonRpcClient over a real local HTTP server (CurlTransport + HttpTestServer), with SimEnv so
// backoff and Retry-After sleeps are instant and measurable.
#include "rpc/json_rpc.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>

#include "rpc/curl_transport.h"
#include "testing/http_test_server.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

using Response = HttpTestServer::Response;
using Request = HttpTestServer::Request;

// Answers each JSON-RPC call with a fragment ("\"result\":..." or "\"error\":{...}") chosen by
// `answer`; optionally reverses the order of a batch's answers.
HttpTestServer::Handler RpcHandler(std::function<std::string(const JsonRpcCall&)> answer,
                                   bool reverse = false) {
  return [answer = std::move(answer), reverse](const Request& req) {
    bool is_batch = false;
    Result<std::vector<JsonRpcCall>> calls = ParseJsonRpcRequests(req.body, &is_batch);
    if (!calls.ok()) return Response::Json("bad request: " + calls.status().message(), 400);
    std::vector<std::string> parts;
    for (const JsonRpcCall& call : *calls) {
      std::string fragment = answer(call);
      if (fragment.empty()) continue;  // leave this call unanswered
      parts.push_back(fmt::format(R"({{"jsonrpc":"2.0","id":{},{}}})", call.id_json, fragment));
    }
    if (reverse) std::reverse(parts.begin(), parts.end());
    std::string body = is_batch ? "[" + fmt::format("{}", fmt::join(parts, ",")) + "]" : parts[0];
    return Response::Json(body);
  };
}

std::string ResultFragment(std::string_view json) { return fmt::format("\"result\":{}", json); }
std::string ErrorFragment(int64_t code, std::string_view message) {
  return fmt::format(R"("error":{{"code":{},"message":"{}"}})", code, message);
}

// A client over CurlTransport to the server, on a SimEnv.
struct Fixture {
  explicit Fixture(HttpTestServer::Handler handler, int max_attempts = 4)
      : server(std::move(handler)) {
    CurlTransportOptions topts;
    topts.connect_timeout_ms = 2000;
    topts.request_timeout_ms = 5000;
    transport = std::make_unique<CurlTransport>(server.url(), topts);
    JsonRpcClientOptions copts;
    copts.env = &env;
    copts.max_attempts = max_attempts;
    client = std::make_unique<JsonRpcClient>(transport.get(), copts);
  }
  SimEnv env;
  HttpTestServer server;
  std::unique_ptr<CurlTransport> transport;
  std::unique_ptr<JsonRpcClient> client;
};

bool Contains(const Status& s, std::string_view needle) {
  return s.message().find(needle) != std::string::npos;
}

// ---- Calls and batches ------------------------------------------------------------------------

TEST(JsonRpcClientTest, CallReturnsRawResultOverOneKeptAliveConnection) {
  Fixture f(RpcHandler([](const JsonRpcCall& call) {
    if (call.method == "eth_chainId") return ResultFragment("\"0x1\"");
    if (call.method == "obj") return ResultFragment(R"({"a": [1, 2], "b": {"c": null}})");
    return ResultFragment("null");
  }));
  for (int i = 0; i < 5; ++i) {
    Result<std::string> r = f.client->Call("eth_chainId", "[]");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "\"0x1\"");
  }
  Result<std::string> obj = f.client->Call("obj", "[]");
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ(*obj, R"({"a": [1, 2], "b": {"c": null}})");
  EXPECT_GE(obj->capacity(), obj->size() + 64);  // simdjson padding
  Result<std::string> null = f.client->Call("other", R"(["x"])");
  ASSERT_TRUE(null.ok());
  EXPECT_EQ(*null, "null");
  EXPECT_EQ(f.server.requests_received(), 7);
  EXPECT_EQ(f.server.connections_accepted(), 1);
  EXPECT_EQ(f.client->stats().posts, 7u);
}

TEST(JsonRpcClientTest, BatchMatchesOutOfOrderAnswersById) {
  Fixture f(RpcHandler(
      [](const JsonRpcCall& call) {
        if (call.method == "fail") return ErrorFragment(-32603, "boom");
        return ResultFragment(fmt::format("\"{}:{}\"", call.method, call.params_json.size()));
      },
      /*reverse=*/true));
  std::vector<RpcRequest> calls = {{"a", "[]"}, {"fail", "[]"}, {"ccc", R"(["0x1"])"}};
  Result<std::vector<Result<std::string>>> r = f.client->Batch(calls);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  ASSERT_TRUE((*r)[0].ok());
  EXPECT_EQ(*(*r)[0], "\"a:2\"");
  EXPECT_EQ((*r)[1].status().code(), Code::kInvalidData);
  EXPECT_EQ(RpcErrorCode((*r)[1].status()), -32603);
  EXPECT_TRUE(Contains((*r)[1].status(), "fail(")) << (*r)[1].status().message();
  ASSERT_TRUE((*r)[2].ok());
  EXPECT_EQ(*(*r)[2], "\"ccc:7\"");
  EXPECT_EQ(f.server.requests_received(), 1);
}

TEST(JsonRpcClientTest, BatchSplitsAtMaxBatchSize) {
  SimEnv env;
  HttpTestServer server(RpcHandler([](const JsonRpcCall& c) { return ResultFragment(c.id_json); }));
  CurlTransport transport(server.url());
  JsonRpcClientOptions options;
  options.env = &env;
  options.max_batch_size = 4;
  JsonRpcClient client(&transport, options);
  std::vector<RpcRequest> calls(10, RpcRequest{"m", "[]"});
  Result<std::vector<Result<std::string>>> r = client.Batch(calls);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 10u);
  for (const auto& e : *r) EXPECT_TRUE(e.ok());
  EXPECT_EQ(server.requests_received(), 3);
}

TEST(JsonRpcClientTest, BatchMissingAnswerFailsThatElement) {
  Fixture f(RpcHandler([](const JsonRpcCall& call) {
    return call.method == "lost" ? std::string() : ResultFragment("1");
  }));
  Result<std::vector<Result<std::string>>> r =
      f.client->Batch({{"a", "[]"}, {"lost", R"(["0x5"])"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)[0].ok());
  EXPECT_EQ((*r)[1].status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains((*r)[1].status(), "lost([\"0x5\"])")) << (*r)[1].status().message();
  EXPECT_TRUE(Contains((*r)[1].status(), "no answer")) << (*r)[1].status().message();
}

TEST(JsonRpcClientTest, BatchAnswerWithUnknownIdIsInvalidData) {
  Fixture f(
      [](const Request&) { return Response::Json(R"([{"jsonrpc":"2.0","id":999,"result":1}])"); });
  Result<std::vector<Result<std::string>>> r = f.client->Batch({{"eth_x", "[]"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(r.status(), "unknown id 999")) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "eth_x")) << r.status().message();
}

TEST(JsonRpcClientTest, BatchRejectedAsAWholeByOneErrorObject) {
  Fixture f([](const Request&) {
    return Response::Json(
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"batch limit exceeded"}})");
  });
  Result<std::vector<Result<std::string>>> r = f.client->Batch({{"a", "[]"}, {"b", "[]"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(RpcErrorCode(r.status()), -32005);
  EXPECT_EQ(f.server.requests_received(), 4);  // retried up to max_attempts
}

TEST(JsonRpcClientTest, BatchRetriesOnlyRateLimitedElements) {
  std::mutex mu;
  int b_calls = 0;
  Fixture f(RpcHandler([&](const JsonRpcCall& call) {
    std::lock_guard<std::mutex> lock(mu);
    if (call.method == "b" && ++b_calls == 1) return ErrorFragment(429, "Too Many Requests");
    return ResultFragment("\"" + call.method + "\"");
  }));
  Result<std::vector<Result<std::string>>> r = f.client->Batch({{"a", "[]"}, {"b", "[]"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE((*r)[0].ok());
  ASSERT_TRUE((*r)[1].ok()) << (*r)[1].status().ToString();
  EXPECT_EQ(*(*r)[1], "\"b\"");
  EXPECT_EQ(f.server.requests_received(), 2);
  EXPECT_EQ(f.client->stats().calls, 3u);  // a, b, then b alone
}

TEST(JsonRpcClientTest, EmptyBatchSendsNothing) {
  Fixture f(RpcHandler([](const JsonRpcCall&) { return ResultFragment("1"); }));
  Result<std::vector<Result<std::string>>> r = f.client->Batch({});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(f.server.requests_received(), 0);
}

// ---- HTTP status policy -----------------------------------------------------------------------

TEST(JsonRpcClientTest, Http429SleepsRetryAfterThenSucceeds) {
  std::atomic<int> n{0};
  Fixture f([&](const Request& req) {
    if (n++ == 0) {
      Response r = Response::Json("rate limited", 429);
      r.headers.emplace_back("Retry-After", "3");
      return r;
    }
    return RpcHandler([](const JsonRpcCall&) { return ResultFragment("\"0x10\""); })(req);
  });
  Result<uint64_t> head = f.client->BlockNumber();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(*head, 16u);
  EXPECT_EQ(f.env.slept_micros(), 3'000'000);
  EXPECT_EQ(f.server.requests_received(), 2);
}

TEST(JsonRpcClientTest, Http429RetryAfterIsCapped) {
  SimEnv env;
  std::atomic<int> n{0};
  HttpTestServer server([&](const Request& req) {
    if (n++ == 0) {
      Response r = Response::Json("", 429);
      r.headers.emplace_back("Retry-After", "3600");
      return r;
    }
    return RpcHandler([](const JsonRpcCall&) { return ResultFragment("\"0x1\""); })(req);
  });
  CurlTransport transport(server.url());
  JsonRpcClientOptions options;
  options.env = &env;
  options.max_retry_after_micros = 5'000'000;
  JsonRpcClient client(&transport, options);
  ASSERT_TRUE(client.ChainId().ok());
  EXPECT_EQ(env.slept_micros(), 5'000'000);
}

// The HTTP status travels as a typed reason through the retries and the caller's context.
TEST(JsonRpcClientTest, HttpStatusIsCarriedAsReason) {
  for (int status : {429, 503, 401}) {
    Fixture f([status](const Request&) { return Response::Json("no", status); },
              /*max_attempts=*/2);
    Result<std::vector<RawBlock>> r = f.client->FetchBlocks(14290, 10);
    ASSERT_FALSE(r.ok()) << status;
    EXPECT_EQ(r.status().reason(), HttpStatusReason(status)) << r.status().ToString();
  }
}

TEST(JsonRpcClientTest, JsonRpcRateLimitIsCarriedAsReason) {
  Fixture limited(RpcHandler([](const JsonRpcCall&) { return ErrorFragment(429, "slow down"); }),
                  /*max_attempts=*/2);
  Result<std::string> r = limited.client->Call("eth_chainId", "[]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), kRpcRateLimitedReason) << r.status().ToString();
  Fixture other(
      RpcHandler([](const JsonRpcCall&) { return ErrorFragment(-32000, "header not found"); }),
      /*max_attempts=*/2);
  r = other.client->Call("eth_chainId", "[]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "") << r.status().ToString();
}

TEST(JsonRpcClientTest, Http5xxRetriedThenSucceeds) {
  std::atomic<int> n{0};
  Fixture f([&](const Request& req) {
    if (n++ < 2) return Response::Json("upstream down", n == 1 ? 502 : 503);
    return RpcHandler([](const JsonRpcCall&) { return ResultFragment("\"0x5\""); })(req);
  });
  Result<uint64_t> id = f.client->ChainId();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, 5u);
  EXPECT_EQ(f.server.requests_received(), 3);
  EXPECT_GT(f.env.slept_micros(), 0);
  EXPECT_EQ(f.client->stats().retries, 2u);
}

TEST(JsonRpcClientTest, Http5xxExhaustingAttemptsIsUnavailable) {
  Fixture f([](const Request&) { return Response::Json("oops", 500); }, /*max_attempts=*/3);
  Result<std::string> r = f.client->Call("eth_blockNumber", "[]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(r.status(), "eth_blockNumber")) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "HTTP 500")) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "gave up after 3 attempts")) << r.status().message();
  EXPECT_EQ(f.server.requests_received(), 3);
}

TEST(JsonRpcClientTest, Http401IsFailedPreconditionWithoutRetry) {
  Fixture f([](const Request&) { return Response::Json(R"({"error":"invalid api key"})", 401); });
  Result<std::string> r = f.client->Call("eth_chainId", "[]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(Contains(r.status(), "HTTP 401")) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), f.server.url())) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "invalid api key")) << r.status().message();
  EXPECT_EQ(f.server.requests_received(), 1);
  EXPECT_EQ(f.env.slept_micros(), 0);
}

// ---- JSON-RPC error objects -------------------------------------------------------------------

TEST(JsonRpcClientTest, JsonRpcErrorCodesMapToRetryPolicy) {
  struct Case {
    int64_t code;
    const char* message;
    Code expected;
    int requests;  // Unavailable is retried up to max_attempts (4)
  };
  const Case cases[] = {
      {-32601, "the method does not exist", Code::kFailedPrecondition, 1},
      {-32602, "invalid argument 0", Code::kFailedPrecondition, 1},
      {-32005, "limit exceeded", Code::kUnavailable, 4},
      {-32000, "header not found", Code::kUnavailable, 4},
      {-32603, "internal error", Code::kInvalidData, 1},
      {-32600, "invalid request", Code::kInvalidData, 1},
      {-1, "request rate limit reached", Code::kUnavailable, 4},
  };
  for (const Case& c : cases) {
    Fixture f(RpcHandler([&](const JsonRpcCall&) { return ErrorFragment(c.code, c.message); }));
    Result<std::string> r = f.client->Call("eth_getBlockByNumber", R"(["0x10",true])");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.expected) << c.code << ": " << r.status().ToString();
    EXPECT_EQ(RpcErrorCode(r.status()), c.code) << r.status().message();
    EXPECT_TRUE(Contains(r.status(), "eth_getBlockByNumber([\"0x10\",true])"))
        << r.status().message();
    EXPECT_TRUE(Contains(r.status(), c.message)) << r.status().message();
    EXPECT_EQ(f.server.requests_received(), c.requests) << c.code;
  }
}

// A revert carries a typed reason (node/enrich.h reads NULL from it); another -32000 does not.
TEST(JsonRpcClientTest, RevertsAreToldApartByReason) {
  struct Case {
    int64_t code;
    const char* message;
    bool reverted;
  };
  for (const Case& c : {Case{3, "execution reverted: not the owner", true},
                        Case{-32000, "execution reverted", true},
                        Case{-32000, "missing trie node abc (path )", false},
                        Case{-32603, "internal error", false}}) {
    Fixture f(RpcHandler([&](const JsonRpcCall&) { return ErrorFragment(c.code, c.message); }));
    auto r = f.client->Batch({RpcRequest{"eth_call", R"([{"to":"0x01"},"latest"])"}},
                             /*retry_rpc_errors=*/false);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_FALSE((*r)[0].ok());
    EXPECT_EQ((*r)[0].status().reason() == kRpcRevertedReason, c.reverted) << c.message;
    EXPECT_EQ(f.server.requests_received(), 1) << "an element's error was re-sent";
  }
}

TEST(JsonRpcClientTest, RpcErrorCodeAbsentForOtherFailures) {
  EXPECT_EQ(RpcErrorCode(Unavailable("POST x: timeout")), std::nullopt);
  EXPECT_EQ(RpcErrorCode(Status::Ok()), std::nullopt);
  EXPECT_EQ(RpcErrorCode(InvalidData("block 5: m(): JSON-RPC error -32000: x")), -32000);
}

// ---- Malformed answers ------------------------------------------------------------------------

TEST(JsonRpcClientTest, MalformedBodiesAreInvalidDataNamingTheMethod) {
  const char* bodies[] = {
      "<html>502 Bad Gateway</html>",
      "",
      R"({"jsonrpc":"2.0","id":1,"result":{"number":"0x1")",  // truncated JSON
      R"({"jsonrpc":"2.0","id":1,"result":"0x1"}})",          // trailing garbage
      R"({"jsonrpc":"2.0","id":1,"result":nul})",             // bad literal
      R"({"jsonrpc":"2.0","id":1})",                          // neither result nor error
      R"({"jsonrpc":"2.0","id":77,"result":"0x1"})",          // id mismatch
      R"([{"jsonrpc":"2.0","id":1,"result":"0x1"}])",         // array for a single call
      R"("just a string")",
  };
  for (const char* body : bodies) {
    Fixture f([&](const Request&) { return Response::Json(body); });
    Result<std::string> r = f.client->Call("eth_getBlockReceipts", R"(["0x10"])");
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), Code::kInvalidData) << body << " -> " << r.status().ToString();
    EXPECT_TRUE(Contains(r.status(), "eth_getBlockReceipts")) << r.status().message();
    EXPECT_EQ(f.server.requests_received(), 1) << body;  // not retried by the client
  }
}

TEST(JsonRpcClientTest, TruncatedHttpBodyIsUnavailableAndRetried) {
  std::atomic<int> n{0};
  Fixture f([&](const Request& req) {
    if (n++ == 0) return Response::Truncated(R"({"jsonrpc":"2.0","id":1,"result":"0x1"})", 12);
    return RpcHandler([](const JsonRpcCall&) { return ResultFragment("\"0x2a\""); })(req);
  });
  Result<uint64_t> r = f.client->BlockNumber();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 42u);
  EXPECT_EQ(f.server.requests_received(), 2);
}

TEST(JsonRpcClientTest, TruncatedHttpBodyExhaustingAttemptsIsUnavailable) {
  Fixture f([](const Request&) { return Response::Truncated(std::string(1000, ' '), 100); }, 2);
  Result<std::string> r = f.client->Call("eth_getBlockByNumber", R"(["0x7",true])");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(r.status(), "truncated")) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "eth_getBlockByNumber")) << r.status().message();
}

// ---- Network failures -------------------------------------------------------------------------

TEST(JsonRpcClientTest, ConnectionRefusedIsUnavailableNamingTheAddress) {
  std::string url;
  {
    HttpTestServer server;
    url = server.url();
  }  // stopped: nothing listens on that port now
  SimEnv env;
  JsonRpcClientOptions options;
  options.env = &env;
  options.max_attempts = 3;
  JsonRpcClient client(std::make_unique<CurlTransport>(url), options);
  Result<uint64_t> r = client.ChainId();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(r.status(), url)) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "eth_chainId")) << r.status().message();
  EXPECT_EQ(client.stats().posts, 3u);
  EXPECT_GT(env.slept_micros(), 0);
}

TEST(JsonRpcClientTest, RequestTimeoutIsUnavailable) {
  SimEnv env;
  HttpTestServer server([](const Request&) {
    Response r = Response::Json(R"({"jsonrpc":"2.0","id":1,"result":"0x1"})");
    r.delay_ms = 3000;
    return r;
  });
  CurlTransportOptions topts;
  topts.request_timeout_ms = 150;
  JsonRpcClientOptions copts;
  copts.env = &env;
  copts.max_attempts = 2;
  JsonRpcClient client(std::make_unique<CurlTransport>(server.url(), topts), copts);
  Result<std::string> r = client.Call("eth_blockNumber", "[]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(r.status(), "timed out")) << r.status().message();
  EXPECT_EQ(server.requests_received(), 2);
}

// ---- Typed helpers ----------------------------------------------------------------------------

TEST(HexQuantityTest, ParsesAndFormats) {
  EXPECT_EQ(*ParseHexQuantity("0x0"), 0u);
  EXPECT_EQ(*ParseHexQuantity("\"0x1036640\""), 17000000u);
  EXPECT_EQ(*ParseHexQuantity("0xffffffffffffffff"), UINT64_MAX);
  EXPECT_EQ(*ParseHexQuantity("0x0001"), 1u);
  EXPECT_FALSE(ParseHexQuantity("0x").ok());
  EXPECT_FALSE(ParseHexQuantity("12").ok());
  EXPECT_FALSE(ParseHexQuantity("0x1g").ok());
  EXPECT_FALSE(ParseHexQuantity("0x10000000000000000").ok());
  EXPECT_FALSE(ParseHexQuantity("null").ok());
  EXPECT_EQ(HexQuantity(0), "0x0");
  EXPECT_EQ(HexQuantity(17000000), "0x1036640");
}

TEST(JsonRpcClientTest, ChainIdOfWrongTypeIsInvalidData) {
  Fixture f(RpcHandler([](const JsonRpcCall&) { return ResultFragment("null"); }));
  Result<uint64_t> r = f.client->ChainId();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(r.status(), "eth_chainId")) << r.status().message();
}

// A node with blocks 0..head; "safe" and "finalized" trail it, unless `post_merge` is false.
HttpTestServer::Handler TagNode(uint64_t head, bool post_merge, bool null_for_unknown) {
  return RpcHandler([=](const JsonRpcCall& call) {
    if (call.method != "eth_getBlockByNumber") return ErrorFragment(-32601, "no such method");
    std::string tag = call.params_json.substr(2, call.params_json.find('"', 2) - 2);
    uint64_t n = 0;
    if (tag == "latest" || tag == "pending") {
      n = head;
    } else if (tag == "earliest") {
      n = 0;
    } else if (tag == "safe" || tag == "finalized") {
      if (!post_merge) {
        return null_for_unknown ? ResultFragment("null")
                                : ErrorFragment(-32000, tag + " block not found");
      }
      n = tag == "safe" ? head - 32 : head - 64;
    } else {
      return ErrorFragment(-32602, "invalid argument");
    }
    return ResultFragment(
        fmt::format(R"({{"number":"0x{:x}","hash":"0xabc","transactions":[]}})", n));
  });
}

TEST(JsonRpcClientTest, ResolveBlockTag) {
  Fixture f(TagNode(1000, /*post_merge=*/true, false));
  EXPECT_EQ(*f.client->ResolveBlockTag("latest"), 1000u);
  EXPECT_EQ(*f.client->ResolveBlockTag("safe"), 968u);
  EXPECT_EQ(*f.client->ResolveBlockTag("finalized"), 936u);
  EXPECT_EQ(*f.client->ResolveBlockTag("FINALIZED"), 936u);
  EXPECT_EQ(*f.client->ResolveBlockTag("earliest"), 0u);
  int64_t before = f.server.requests_received();
  EXPECT_EQ(*f.client->ResolveBlockTag("17000000"), 17000000u);
  EXPECT_EQ(*f.client->ResolveBlockTag("0x1036640"), 17000000u);
  EXPECT_EQ(f.server.requests_received(), before);  // numbers need no call
  for (const char* bad : {"", "lastest", "0x", "12abc", "-5", "99999999999999999999999"}) {
    Result<uint64_t> r = f.client->ResolveBlockTag(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << bad;
  }
}

TEST(JsonRpcClientTest, ResolveBlockTagOnANodeWithoutFinalized) {
  for (bool null_for_unknown : {false, true}) {
    Fixture f(TagNode(1000, /*post_merge=*/false, null_for_unknown));
    EXPECT_EQ(*f.client->ResolveBlockTag("latest"), 1000u);
    for (const char* tag : {"finalized", "safe"}) {
      int64_t before = f.server.requests_received();
      Result<uint64_t> r = f.client->ResolveBlockTag(tag);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
      EXPECT_TRUE(Contains(r.status(), std::string("\"") + tag + "\"")) << r.status().message();
      EXPECT_TRUE(Contains(r.status(), "does not support") || Contains(r.status(), "has no"))
          << r.status().message();
      EXPECT_EQ(f.server.requests_received(), before + 1);  // not retried
    }
  }
}

// ---- FetchBlocks ------------------------------------------------------------------------------

std::string BlockHash(uint64_t n) { return fmt::format("0x{:064x}", 0xb10c000000ULL + n); }
std::string TxHash(uint64_t n, int i) { return fmt::format("0x{:064x}", (n << 16) + i + 1); }
int TxCount(uint64_t n) { return static_cast<int>(n % 3); }  // 0, 1 or 2 transactions

std::string BlockJson(uint64_t n) {
  std::vector<std::string> txs;
  for (int i = 0; i < TxCount(n); ++i) {
    txs.push_back(
        fmt::format(R"({{"hash":"{}","blockNumber":"0x{:x}","transactionIndex":"0x{:x}"}})",
                    TxHash(n, i), n, i));
  }
  return fmt::format(R"({{"number":"0x{:x}","hash":"{}","parentHash":"{}","transactions":[{}]}})",
                     n, BlockHash(n), BlockHash(n - 1), fmt::join(txs, ","));
}

std::string ReceiptJson(uint64_t n, int i, std::string block_hash = "") {
  return fmt::format(R"({{"transactionHash":"{}","blockHash":"{}","status":"0x1","logs":[]}})",
                     TxHash(n, i), block_hash.empty() ? BlockHash(n) : block_hash);
}

std::string ReceiptsJson(uint64_t n) {
  std::vector<std::string> r;
  for (int i = 0; i < TxCount(n); ++i) r.push_back(ReceiptJson(n, i));
  return fmt::format("[{}]", fmt::join(r, ","));
}

// Blocks first..last in a ReplayTransport; with or without eth_getBlockReceipts.
void AddBlocks(ReplayTransport& node, uint64_t first, uint64_t last, bool block_receipts) {
  for (uint64_t n = first; n <= last; ++n) {
    ASSERT_TRUE(
        node.Add("eth_getBlockByNumber", fmt::format(R"(["0x{:x}",true])", n), BlockJson(n)).ok());
    if (block_receipts) {
      ASSERT_TRUE(
          node.Add("eth_getBlockReceipts", fmt::format(R"(["0x{:x}"])", n), ReceiptsJson(n)).ok());
    }
    for (int i = 0; i < TxCount(n); ++i) {
      ASSERT_TRUE(node.Add("eth_getTransactionReceipt", fmt::format(R"(["{}"])", TxHash(n, i)),
                           ReceiptJson(n, i))
                      .ok());
    }
  }
}

TEST(FetchBlocksTest, WithBlockReceiptsInOneBatch) {
  ReplayTransport node;
  AddBlocks(node, 100, 109, /*block_receipts=*/true);
  Fixture f(HttpTestServer::ForwardTo(&node));
  Result<std::vector<RawBlock>> blocks = f.client->FetchBlocks(100, 10);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) {
    const RawBlock& b = (*blocks)[i];
    EXPECT_EQ(b.number, 100 + i);
    EXPECT_EQ(b.block_json, BlockJson(100 + i));
    EXPECT_EQ(b.receipts_json, ReceiptsJson(100 + i));
    EXPECT_GE(b.block_json.capacity(), b.block_json.size() + 64);
    EXPECT_GE(b.receipts_json.capacity(), b.receipts_json.size() + 64);
  }
  EXPECT_EQ(f.server.requests_received(), 1);
  EXPECT_EQ(node.calls("eth_getTransactionReceipt"), 0);
  EXPECT_TRUE(f.client->block_receipts_supported());
}

TEST(FetchBlocksTest, FallsBackToReceiptsByHashAndRemembers) {
  ReplayTransport node;  // answers eth_getBlockReceipts with -32601
  AddBlocks(node, 200, 205, /*block_receipts=*/false);
  Fixture f(HttpTestServer::ForwardTo(&node));
  Result<std::vector<RawBlock>> blocks = f.client->FetchBlocks(200, 3);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*blocks)[i].block_json, BlockJson(200 + i));
    EXPECT_EQ((*blocks)[i].receipts_json, ReceiptsJson(200 + i));
    EXPECT_GE((*blocks)[i].receipts_json.capacity(), (*blocks)[i].receipts_json.size() + 64);
  }
  EXPECT_EQ(f.server.requests_received(), 2);
  EXPECT_FALSE(f.client->block_receipts_supported());
  EXPECT_EQ(node.calls("eth_getBlockReceipts"), 3);
  EXPECT_EQ(node.calls("eth_getTransactionReceipt"), 0 + 1 + 2);

  // The next fetch does not ask for eth_getBlockReceipts again.
  blocks = f.client->FetchBlocks(203, 3);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ((*blocks)[2].receipts_json, ReceiptsJson(205));
  EXPECT_EQ(node.calls("eth_getBlockReceipts"), 3);
  EXPECT_EQ(f.server.requests_received(), 4);
}

TEST(FetchBlocksTest, AMissingBlockReceiptsIsAskedAgainAfterTheRetryInterval) {
  // Providers add methods, and a pool's -32601 may come from one endpoint: the fallback heals.
  ReplayTransport node;
  AddBlocks(node, 200, 205, /*block_receipts=*/false);
  Fixture f(HttpTestServer::ForwardTo(&node));
  ASSERT_TRUE(f.client->FetchBlocks(200, 3).ok());
  EXPECT_FALSE(f.client->block_receipts_supported());
  // The node serves it from now on; the client does not ask until the interval has passed.
  AddBlocks(node, 206, 208, /*block_receipts=*/true);
  for (uint64_t n = 203; n <= 205; ++n) {
    ASSERT_TRUE(
        node.Add("eth_getBlockReceipts", fmt::format(R"(["0x{:x}"])", n), ReceiptsJson(n)).ok());
  }
  f.env.Advance(JsonRpcClientOptions().missing_method_retry_micros - 1'000'000);
  ASSERT_TRUE(f.client->FetchBlocks(203, 3).ok());
  EXPECT_EQ(node.calls("eth_getBlockReceipts"), 3);
  f.env.Advance(1'000'000);
  const int posts = f.server.requests_received();
  Result<std::vector<RawBlock>> blocks = f.client->FetchBlocks(206, 3);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ((*blocks)[2].receipts_json, ReceiptsJson(208));
  EXPECT_EQ(node.calls("eth_getBlockReceipts"), 3 + 3);
  EXPECT_EQ(f.server.requests_received(), posts + 1);  // blocks and receipts in one batch again
  EXPECT_TRUE(f.client->block_receipts_supported());
}

TEST(FetchBlocksTest, NullBlockIsNotFound) {
  ReplayTransport node;
  AddBlocks(node, 10, 10, true);
  ASSERT_TRUE(node.Add("eth_getBlockByNumber", R"(["0xb",true])", "null").ok());
  ASSERT_TRUE(node.Add("eth_getBlockReceipts", R"(["0xb"])", "null").ok());
  Fixture f(HttpTestServer::ForwardTo(&node));
  Result<std::vector<RawBlock>> r = f.client->FetchBlocks(10, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_TRUE(Contains(r.status(), "block 11 not found")) << r.status().message();
}

TEST(FetchBlocksTest, NullReceiptInFallbackIsInvalidDataNamingTheTx) {
  ReplayTransport node;
  AddBlocks(node, 5, 5, false);  // block 5 has 2 transactions
  ASSERT_TRUE(
      node.Add("eth_getTransactionReceipt", fmt::format(R"(["{}"])", TxHash(5, 1)), "null").ok());
  Fixture f(HttpTestServer::ForwardTo(&node));
  Result<std::vector<RawBlock>> r = f.client->FetchBlocks(5, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(r.status(), TxHash(5, 1))) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "block 5")) << r.status().message();
}

// Issue 35 item 3: the debug tracer is asked by the block's hash (its answer is then of this very
// block, or an error), never by the number another fork may hold; a node without
// debug_traceBlockByHash is asked by number, and remembered.
TEST(FetchBlocksTest, TheDebugTracerIsAskedByTheBlocksHash) {
  for (bool by_hash : {true, false}) {
    ReplayTransport node;  // no trace_block: "method not found"
    AddBlocks(node, 100, 102, /*block_receipts=*/true);
    for (uint64_t n = 100; n <= 102; ++n) {
      const std::string traces = fmt::format(R"([{{"txHash":"{}","result":{{}}}}])", TxHash(n, 0));
      ASSERT_TRUE(
          (by_hash
               ? node.Add("debug_traceBlockByHash",
                          fmt::format(R"(["{}",{{"tracer":"callTracer"}}])", BlockHash(n)), traces)
               : node.Add("debug_traceBlockByNumber",
                          fmt::format(R"(["0x{:x}",{{"tracer":"callTracer"}}])", n), traces))
              .ok());
    }
    HttpTestServer server(HttpTestServer::ForwardTo(&node));
    CurlTransport transport(server.url());
    SimEnv env;
    JsonRpcClientOptions options;
    options.env = &env;
    options.traces = true;
    JsonRpcClient client(&transport, options);
    for (uint64_t first : {100, 102}) {
      auto blocks = client.FetchBlocks(first, first == 100 ? 2 : 1);
      ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
      for (const RawBlock& b : *blocks) {
        EXPECT_EQ(b.traces_api, RawBlock::TraceApi::kDebugTrace);
        EXPECT_NE(b.traces_json.find(TxHash(b.number, 0)), std::string::npos) << b.traces_json;
      }
    }
    EXPECT_EQ(node.calls("trace_block"), 2) << "trace_block asked again after \"method not found\"";
    EXPECT_EQ(node.calls("debug_traceBlockByHash"), by_hash ? 3 : 2);
    EXPECT_EQ(node.calls("debug_traceBlockByNumber"), by_hash ? 0 : 3);
    // After the retry interval trace_block is asked once more (providers add methods); still
    // missing, the debug tracer serves again.
    env.Advance(options.missing_method_retry_micros);
    auto again = client.FetchBlocks(102, 1);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ((*again)[0].traces_api, RawBlock::TraceApi::kDebugTrace);
    EXPECT_EQ(node.calls("trace_block"), 3);
  }
}

TEST(FetchBlocksTest, TransportFailureNamesTheRange) {
  Fixture f([](const Request&) { return Response::Json("down", 503); }, 2);
  Result<std::vector<RawBlock>> r = f.client->FetchBlocks(300, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_TRUE(Contains(r.status(), "blocks 300..304")) << r.status().message();
}

}  // namespace
}  // namespace gapless

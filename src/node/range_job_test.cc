// IsRateLimited decides on the typed reason the JSON-RPC client attaches, never on message text:
// a 429 answer is a rate limit, so the fleet slows down; a 503, or any failure whose message
// merely contains "429" (block numbers do: "blocks 14290..14299"), is not, and must not halve the
// fleet's rate. The answers come from a real local HTTP server through CurlTransport.
// The typed "interrupted" reason likewise: a stopped fetch is recognised by its reason, not its
// message.
#include "node/range_job.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "rpc/curl_transport.h"
#include "rpc/http_transport.h"
#include "testing/http_test_server.h"

namespace gapless {
namespace {

using Response = HttpTestServer::Response;

// The failure of fetching blocks 14290..14299 from a node that answers every POST with `answer`.
Status FetchFailure(Response answer) {
  HttpTestServer server([answer](const HttpTestServer::Request&) { return answer; });
  CurlTransport transport(server.url());
  SimEnv env;  // retry sleeps are virtual
  JsonRpcClientOptions options;
  options.env = &env;
  options.max_attempts = 2;
  JsonRpcClient client(&transport, options);
  auto blocks = client.FetchBlocks(14290, 10);
  return blocks.ok() ? Internal("the fetch succeeded") : blocks.status();
}

TEST(IsRateLimitedTest, Http429IsRateLimited) {
  Status st = FetchFailure(Response::Json("slow down", 429));
  ASSERT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_TRUE(IsRateLimited(st)) << st.ToString();
}

TEST(IsRateLimitedTest, Http503ForBlocksWhoseNumbersContain429IsNot) {
  Status st = FetchFailure(Response::Json("upstream down", 503));
  ASSERT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  ASSERT_NE(st.message().find("blocks 14290..14299"), std::string::npos) << st.ToString();
  EXPECT_FALSE(IsRateLimited(st)) << st.ToString();
}

TEST(IsRateLimitedTest, JsonRpcRateLimitErrorIsRateLimited) {
  // Some providers reject a whole batch with one error object when over their limit.
  Status st = FetchFailure(Response::Json(
      R"({"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"limit exceeded"}})"));
  ASSERT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_TRUE(IsRateLimited(st)) << st.ToString();
}

TEST(IsRateLimitedTest, MessageTextDecidesNothing) {
  EXPECT_FALSE(IsRateLimited(Unavailable("blocks 14290..14299: connect to 127.0.0.1:8545 failed")));
  EXPECT_FALSE(IsRateLimited(Unavailable("HTTP 429 Too Many Requests")));
  EXPECT_TRUE(IsRateLimited(Unavailable("slow down").WithReason(HttpStatusReason(429))));
  EXPECT_FALSE(IsRateLimited(Aborted("stale").WithReason(HttpStatusReason(429))))
      << "only an Unavailable (a failure to retry) is a rate limit";
}

// Counts requests and answers none: FetchAndDecodeRange must not send one once stopped.
class CountingTransport : public HttpTransport {
 public:
  explicit CountingTransport(int* posts) : posts_(posts) {}
  Result<HttpResponse> Post(std::string_view) override {
    ++*posts_;
    return Unavailable("no network in this test");
  }
  std::string Describe() const override { return "counting"; }

 private:
  int* posts_;
};

TEST(InterruptedTest, RecognisedByReasonEvenWithContext) {
  EXPECT_TRUE(IsInterrupted(Interrupted()));
  EXPECT_TRUE(IsInterrupted(Interrupted().WithContext("blocks 0-49")));
}

TEST(InterruptedTest, OtherAbortedIsNotInterrupted) {
  // The same words without the reason (e.g. a server's message) are not a stop.
  EXPECT_FALSE(IsInterrupted(Aborted("interrupted")));
  EXPECT_FALSE(IsInterrupted(Aborted("lease lost").WithReason("stale-fence-token")));
  EXPECT_FALSE(
      IsInterrupted(Unavailable("interrupted").WithReason(std::string(kInterruptedReason))));
  EXPECT_FALSE(IsInterrupted(Status::Ok()));
}

TEST(InterruptedTest, StoppedFetchReturnsInterruptedWithoutARequest) {
  int posts = 0;
  RpcBlockSource rpc(std::make_unique<JsonRpcClient>(std::make_unique<CountingTransport>(&posts)));
  std::atomic<bool> stop{true};
  std::vector<BlockData> blocks;
  Status st = FetchAndDecodeRange(rpc, 0, 9, 5, BlockChecks(), /*limiter=*/nullptr, &stop, &blocks);
  EXPECT_TRUE(IsInterrupted(st)) << st.ToString();
  EXPECT_EQ(posts, 0);
  EXPECT_TRUE(blocks.empty());
}

}  // namespace
}  // namespace gapless

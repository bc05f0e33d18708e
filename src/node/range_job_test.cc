// The typed "interrupted" reason: a stopped fetch is recognised by its reason, not its message.
#include "node/range_job.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "rpc/http_transport.h"

namespace gapless {
namespace {

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
  JsonRpcClient rpc(std::make_unique<CountingTransport>(&posts));
  std::atomic<bool> stop{true};
  std::vector<BlockData> blocks;
  Status st = FetchAndDecodeRange(rpc, 0, 9, 5, std::nullopt, /*limiter=*/nullptr, &stop, &blocks);
  EXPECT_TRUE(IsInterrupted(st)) << st.ToString();
  EXPECT_EQ(posts, 0);
  EXPECT_TRUE(blocks.empty());
}

}  // namespace
}  // namespace gapless

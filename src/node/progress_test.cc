#include "node/progress.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

TEST(Progress, FormatsThousandsAndDurations) {
  EXPECT_EQ(Progress::Thousands(0), "0");
  EXPECT_EQ(Progress::Thousands(999), "999");
  EXPECT_EQ(Progress::Thousands(1234567), "1,234,567");
  EXPECT_EQ(Progress::Duration(42), "0:42");
  EXPECT_EQ(Progress::Duration(3723), "1:02:03");
}

TEST(Progress, LineShowsRateAndEtaFromVirtualTime) {
  SimEnv env;
  IndexCounters counters;
  Progress progress(&counters, 1000, /*tty=*/false, &env);
  progress.Start();
  progress.Stop();
  env.Advance(10'000'000);  // 10 s
  counters.blocks = 250;
  counters.transactions = 5000;
  std::string line = progress.Line(false);
  EXPECT_NE(line.find("25.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("250/1,000 blocks"), std::string::npos) << line;
  EXPECT_NE(line.find("25.0 blk/s"), std::string::npos) << line;
  EXPECT_NE(line.find("500 tx/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 0:30"), std::string::npos) << line;  // 750 blocks at 25/s
  std::string bar = progress.Line(true);
  EXPECT_EQ(bar.rfind("[######..................]", 0), 0u) << bar;
}

}  // namespace
}  // namespace gapless

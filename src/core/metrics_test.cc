#include "core/metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace gapless {
namespace {

TEST(Metrics, RendersCountersGaugesAndLabelsInTheTextFormat) {
  MetricsRegistry r;
  r.CounterFamily("t_requests_total", "Requests sent").Get().Inc();
  r.CounterFamily("t_requests_total", "ignored: the first help stands").Get().Inc(2);
  auto& errors = r.CounterFamily("t_errors_total", "Errors by reason", {"reason"});
  errors.With({"http-429"}).Inc();
  errors.With({"a\"b\\c\nd"}).Inc();
  r.GaugeFamily("t_head_block", "The head").Get().Set(17000000);
  r.GaugeFunction("t_half", "A function", [] { return 0.5; });
  EXPECT_EQ(r.Render(),
            "# HELP t_errors_total Errors by reason\n"
            "# TYPE t_errors_total counter\n"
            "t_errors_total{reason=\"a\\\"b\\\\c\\nd\"} 1\n"
            "t_errors_total{reason=\"http-429\"} 1\n"
            "# HELP t_half A function\n"
            "# TYPE t_half gauge\n"
            "t_half 0.5\n"
            "# HELP t_head_block The head\n"
            "# TYPE t_head_block gauge\n"
            "t_head_block 17000000\n"
            "# HELP t_requests_total Requests sent\n"
            "# TYPE t_requests_total counter\n"
            "t_requests_total 3\n");
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsRegistry r;
  auto& h = r.HistogramFamily("t_seconds", "Latency", {0.1, 1}, {"op"}).With({"write"});
  h.Observe(0.05);
  h.Observe(0.1);  // on the bound: le is inclusive
  h.Observe(0.5);
  h.Observe(7);
  EXPECT_EQ(r.Render(),
            "# HELP t_seconds Latency\n"
            "# TYPE t_seconds histogram\n"
            "t_seconds_bucket{op=\"write\",le=\"0.1\"} 2\n"
            "t_seconds_bucket{op=\"write\",le=\"1\"} 3\n"
            "t_seconds_bucket{op=\"write\",le=\"+Inf\"} 4\n"
            "t_seconds_sum{op=\"write\"} 7.65\n"
            "t_seconds_count{op=\"write\"} 4\n");
}

TEST(Metrics, ConcurrentIncrementsAreAllCounted) {
  MetricsRegistry r;
  Counter& c = r.CounterFamily("t_total", "x").Get();
  auto& h = r.HistogramFamily("t_h", "x", LatencyBuckets()).Get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Inc();
        h.Observe(0.003);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Value(), 40000);
  EXPECT_EQ(h.Read().count, 40000u);
  EXPECT_NEAR(h.Read().sum, 40000 * 0.003, 1e-6);
}

TEST(Metrics, ProcessMemoryIsReported) {
  EXPECT_GT(ProcessResidentBytes(), 1e6);
  RegisterProcessMetrics();
  EXPECT_NE(MetricsRegistry::Default().Render().find("gapless_process_resident_memory_bytes "),
            std::string::npos);
}

}  // namespace
}  // namespace gapless

#include "node/node_metrics.h"

#include <atomic>

#include "core/metrics.h"

namespace gapless {
namespace {

std::atomic<int64_t> frontier_next{-1};
std::atomic<int64_t> chain_head{-1};

void RegisterLag() {
  static std::once_flag once;
  std::call_once(once, [] {
    MetricsRegistry::Default().GaugeFunction(
        "gapless_lag_blocks",
        "Blocks between the chain head and the frontier (head + 1 - frontier); -1 until both "
        "are known (a leader candidate that has led)",
        [] {
          int64_t f = frontier_next.load();
          int64_t h = chain_head.load();
          if (f < 0 || h < 0) return -1.0;
          return static_cast<double>(std::max<int64_t>(h + 1 - f, 0));
        });
  });
}

}  // namespace

void CountRangeEvent(RangeEvent event) {
  static Counter& retried =
      MetricsRegistry::Default()
          .CounterFamily("gapless_range_retries_total",
                         "Local retries of a range after a retriable failure (fetch or write)")
          .Get();
  static Counter& failed =
      MetricsRegistry::Default()
          .CounterFamily("gapless_ranges_failed_total",
                         "Ranges handed back to the queue as failed (requeued or dead-lettered)")
          .Get();
  static Counter& dead =
      MetricsRegistry::Default()
          .CounterFamily("gapless_ranges_dead_lettered_total",
                         "Ranges (and Kafka block messages) dead-lettered after their last attempt")
          .Get();
  static Counter& lost = MetricsRegistry::Default()
                             .CounterFamily("gapless_leases_lost_total",
                                            "Ranges dropped because their lease was lost or fenced")
                             .Get();
  switch (event) {
    case RangeEvent::kRetried:
      retried.Inc();
      break;
    case RangeEvent::kFailed:
      failed.Inc();
      break;
    case RangeEvent::kDeadLettered:
      dead.Inc();
      break;
    case RangeEvent::kLeaseLost:
      lost.Inc();
      break;
  }
}

void SetFrontierMetric(uint64_t next_block) {
  static Gauge& gauge = MetricsRegistry::Default()
                            .GaugeFamily("gapless_frontier_next_block",
                                         "The frontier: the next block not known to be committed "
                                         "(every block below it is), as this leader last saw it")
                            .Get();
  gauge.Set(static_cast<double>(next_block));
  frontier_next = static_cast<int64_t>(next_block);
  RegisterLag();
}

void SetChainHeadMetric(uint64_t head_block) {
  static Gauge& gauge =
      MetricsRegistry::Default()
          .GaugeFamily("gapless_chain_head_block",
                       "The chain's head block as the node last answered (latest, or --to's tag)")
          .Get();
  gauge.Set(static_cast<double>(head_block));
  chain_head = static_cast<int64_t>(head_block);
  RegisterLag();
}

void SetPartitionsAwaitingIndexes(uint64_t partitions) {
  static Gauge& gauge = MetricsRegistry::Default()
                            .GaugeFamily("gapless_partitions_awaiting_indexes",
                                         "Block partitions due for their secondary indexes and "
                                         "not yet indexed, as the leader's index builder last saw")
                            .Get();
  gauge.Set(static_cast<double>(partitions));
}

void CountPartitionIndexBuild(double seconds) {
  static Histogram& builds =
      MetricsRegistry::Default()
          .HistogramFamily("gapless_partition_index_build_seconds",
                           "One partition's secondary indexes built (CREATE INDEX CONCURRENTLY in "
                           "every data table)",
                           {0.1, 1, 5, 15, 60, 300, 900, 3600, 14400})
          .Get();
  builds.Observe(seconds);
}

void CountReorg(uint64_t depth) {
  static Counter& reorgs =
      MetricsRegistry::Default()
          .CounterFamily("gapless_reorgs_total", "Chain re-orgs this process rolled back")
          .Get();
  static Histogram& depths =
      MetricsRegistry::Default()
          .HistogramFamily(
              "gapless_reorg_depth_blocks",
              "Blocks deleted by each rolled-back re-org (stored above the fork point)",
              {0, 1, 2, 3, 5, 8, 13, 21, 34, 64, 128})
          .Get();
  reorgs.Inc();
  depths.Observe(static_cast<double>(depth));
}

void CountEventsPublished(const std::string& bus, uint64_t events, double batch_seconds) {
  static Family<Counter>& published = MetricsRegistry::Default().CounterFamily(
      "gapless_events_published_total", "Events the relay published and the bus confirmed",
      {"bus"});
  static Family<Histogram>& latency = MetricsRegistry::Default().HistogramFamily(
      "gapless_relay_batch_seconds",
      "Time of one relay batch: reading the outbox, publishing, waiting for the bus's "
      "confirmation, advancing the cursor",
      LatencyBuckets(), {"bus"});
  published.With({bus}).Inc(static_cast<double>(events));
  latency.With({bus}).Observe(batch_seconds);
}

void CountPublishFailure(const std::string& bus) {
  static Family<Counter>& failed = MetricsRegistry::Default().CounterFamily(
      "gapless_events_publish_failures_total",
      "Relay batches that failed (nothing lost: the batch is published again)", {"bus"});
  failed.With({bus}).Inc();
}

void SetOutboxBacklog(const std::string& bus, uint64_t blocks) {
  static Family<Gauge>& backlog = MetricsRegistry::Default().GaugeFamily(
      "gapless_outbox_backlog_blocks",
      "Committed blocks whose events this relay has not published yet (frontier - cursor), as it "
      "last read",
      {"bus"});
  backlog.With({bus}).Set(static_cast<double>(blocks));
}

void SetKafkaHeldBytes(const std::string& worker, uint64_t bytes) {
  static Family<Gauge>& family = MetricsRegistry::Default().GaugeFamily(
      "gapless_kafka_held_bytes",
      "Block text a Kafka worker holds (messages taken, not yet written and acknowledged)",
      {"worker"});
  family.With({worker}).Set(static_cast<double>(bytes));
}

void CountKafkaHandedBack(const std::string& worker, uint64_t messages) {
  static Family<Counter>& family = MetricsRegistry::Default().CounterFamily(
      "gapless_kafka_handed_back_total",
      "Messages a Kafka worker handed back to the stream (they come again) because it held its "
      "share of --memory-budget and could write none of it",
      {"worker"});
  family.With({worker}).Inc(static_cast<double>(messages));
}

namespace {

Counter& CompletenessBlocks() {
  static Counter& c = MetricsRegistry::Default()
                          .CounterFamily("gapless_verify_complete_blocks_total",
                                         "--verify-complete: blocks whose header's logsBloom "
                                         "was tested against the filter")
                          .Get();
  return c;
}

Counter& CompletenessReceipts() {
  static Counter& c = MetricsRegistry::Default()
                          .CounterFamily("gapless_verify_complete_receipts_blocks_total",
                                         "--verify-complete: blocks whose receipts were "
                                         "fetched (their logsBloom admits the filter)")
                          .Get();
  return c;
}

}  // namespace

void CountCompletenessCheck(uint64_t blocks, uint64_t with_receipts) {
  CompletenessBlocks().Inc(static_cast<double>(blocks));
  CompletenessReceipts().Inc(static_cast<double>(with_receipts));
}

CompletenessTotals CompletenessChecked() {
  return {static_cast<uint64_t>(CompletenessBlocks().Value()),
          static_cast<uint64_t>(CompletenessReceipts().Value())};
}

}  // namespace gapless

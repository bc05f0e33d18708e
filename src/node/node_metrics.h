// node_metrics: what the node's roles count for /metrics (core/metrics.h), in one place so the
// names and help texts are defined once: range outcomes besides commits (the writer counts those,
// store/writer.cc), the frontier, the chain head and the lag between them, the event relay and
// re-orgs. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace gapless {

// A local retry of a range, a range handed back to the queue as failed, a range (or a Kafka block
// message) dead-lettered, a lease lost.
enum class RangeEvent { kRetried, kFailed, kDeadLettered, kLeaseLost };
void CountRangeEvent(RangeEvent event);

// The leader's frontier (the next block not known to be committed) and the chain head it tracks;
// gapless_lag_blocks is head + 1 - frontier once both are known.
void SetFrontierMetric(uint64_t next_block);
void SetChainHeadMetric(uint64_t head_block);

// A re-org rolled back: its depth in blocks.
void CountReorg(uint64_t depth);

// The leader's index builder (node/index_builder.h): partitions due for their secondary indexes
// and still without them, as of its last step, and one partition's build (every data table).
void SetPartitionsAwaitingIndexes(uint64_t partitions);
void CountPartitionIndexBuild(double seconds);

// The event relay of one bus (label: its name as BusName gives it, no credentials): events
// published, a batch that failed, the blocks committed but not yet published to it, and a batch's
// time from reading the outbox to the bus's confirmation.
void CountEventsPublished(const std::string& bus, uint64_t events, double batch_seconds);
void CountPublishFailure(const std::string& bus);
void SetOutboxBacklog(const std::string& bus, uint64_t blocks);

// A Kafka worker (label: its worker id): the block text it holds now, and messages it handed back
// to the stream because it was above its share of --memory-budget with nothing it could write
// (node/kafka_worker.h, Memory).
void SetKafkaHeldBytes(const std::string& worker, uint64_t bytes);
void CountKafkaHandedBack(const std::string& worker, uint64_t messages);

// --verify-complete (node/events_complete.h): `blocks` more headers whose logsBloom was tested,
// `with_receipts` more blocks whose receipts were fetched (those the bloom admits); a range
// fetched again counts again: the cost, not the chain. And the process's totals so far, for the
// command's last log line.
void CountCompletenessCheck(uint64_t blocks, uint64_t with_receipts);
struct CompletenessTotals {
  uint64_t blocks = 0;
  uint64_t with_receipts = 0;
};
CompletenessTotals CompletenessChecked();

}  // namespace gapless

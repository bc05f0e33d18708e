// memory_budget: how many blocks a fetching thread may hold so that the process stays within
// --memory-budget (issue 19), whatever --range-size, --concurrency / --workers and --batch say.
//
// What grows with the flags is per fetching thread (bench/memory_bench.sh measured it):
//   - the decoded blocks of the range it holds until the write (range_size of them): about
//     kDecodedPerJsonByte times the JSON the node sent for them (2.0: one `gapless run` worker
//     grew by 0.80 MiB a block of 0.40 MiB of JSON from ranges of 10 to 50; four workers, whose
//     peaks do not all meet, 0.61. 1.25, the first figure, let --memory-budget 128 measure 137
//     MiB with --prefetch on: bench/RESULTS.md);
//   - the batch being decoded (`batch` blocks): the response text, the per-block JSON, simdjson's
//     copy and tape, which stay allocated at their largest: about kInFlightPerJsonByte times it;
//   - a COPY buffer, a connection, a stack: about kThreadBytes.
// The rest (the binary, the connection pools, Redis, the relay) is about constant: kBaseBytes.
//
// A thread's share is (budget - kBaseBytes) / threads - kThreadBytes. Within it, at most a quarter
// goes to the batch in flight (BatchBlocks caps the request size) and the rest to the decoded
// blocks held (PartBlocks caps how many): a range larger than that is fetched and written in parts,
// in order, each part its own range write (store/writer.h: fenced, one transaction, idempotent),
// so a crash between two parts leaves whole parts and the retry rewrites them unchanged.
//
// The JSON size of a block is learned from what the threads fetched (Observe): it starts at a
// heavy mainnet block's (kInitialJsonBytesPerBlock), takes the first batch's average, then follows
// each batch's average down slowly and up at once, so a run of large blocks shrinks the parts
// before the next fetch. A part is at least
// one block and a batch at least one: a block larger than the whole share is still fetched (the
// budget is then exceeded by that block, which is logged once).
//
// A stream consumer (node/kafka_worker.h) is a fetching thread too, whose blocks arrive before it
// decides to write them. Its share is cut in eighths: one for librdkafka's prefetch queue and one
// for a fetch response in flight (StreamQueueBytes, each), two for the messages it holds
// (StreamHeldBytes: above it the worker writes what it holds, and hands back what it polls while
// it cannot), one for the batch being decoded (StreamBatchBlocks), two for the decoded part being
// written (StreamPartBlocks), and one left for the consumer's own state (per broker and
// partition: bench/memory_bench.sh --source kafka measured the defaults 1.4% over the budget
// with three eighths held and none left).
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace gapless {

class MemoryBudget {
 public:
  static constexpr uint64_t kMiB = 1 << 20;
  static constexpr uint64_t kBaseBytes = 48 * kMiB;
  static constexpr uint64_t kThreadBytes = 2 * kMiB;
  static constexpr double kDecodedPerJsonByte = 2.0;
  static constexpr double kInFlightPerJsonByte = 1.75;
  static constexpr uint64_t kInitialJsonBytesPerBlock = 512 * 1024;

  // `budget_bytes` for the whole process, shared by `threads` fetching threads. 0: no budget
  // (every method returns what it was asked for).
  MemoryBudget(uint64_t budget_bytes, uint32_t threads);

  bool limited() const { return budget_bytes_ > 0; }
  uint64_t budget_bytes() const { return budget_bytes_; }
  // The share of one thread for the blocks it holds and fetches; 0 when the budget is below the
  // fixed needs (then every part and batch is one block).
  uint64_t thread_share_bytes() const { return share_; }

  // The blocks per request to use instead of `requested` (>= 1).
  uint32_t BatchBlocks(uint32_t requested) const;
  // The most blocks of a range of `range_blocks` to fetch and write at once (>= 1), given batches
  // of `batch_blocks` (BatchBlocks' answer), for a thread that holds `held_parts` decoded parts at
  // once (2 for a fleet worker that fetches its next part while the last one is written:
  // node/worker.h "Prefetch"); the batch in flight is counted once.
  uint64_t PartBlocks(uint64_t range_blocks, uint32_t batch_blocks, uint32_t held_parts = 1) const;

  // A stream consumer's shares (see the file comment). StreamQueueBytes: 0 without a budget (the
  // library's defaults), at least 1 MiB with one. StreamHeldBytes: UINT64_MAX without a budget;
  // 0 when the share is 0 (every message is written as it comes).
  uint64_t StreamQueueBytes() const;
  uint64_t StreamHeldBytes() const;
  uint32_t StreamBatchBlocks(uint32_t requested) const;
  uint64_t StreamPartBlocks(uint64_t range_blocks) const;

  // `blocks` blocks arrived as `json_bytes` of JSON (blocks, receipts, traces).
  void Observe(uint64_t blocks, uint64_t json_bytes);
  uint64_t json_bytes_per_block() const { return json_per_block_.load(); }

 private:
  // How many blocks of the learned JSON size, at `per_json_byte` bytes held per byte of JSON, fit
  // in `bytes`: 1 to `most` (`most` itself without a budget).
  uint64_t BlocksFitting(double bytes, double per_json_byte, uint64_t most) const;

  uint64_t budget_bytes_;
  uint64_t share_;
  std::atomic<uint64_t> json_per_block_{kInitialJsonBytesPerBlock};
  std::atomic<bool> observed_{false};
};

}  // namespace gapless

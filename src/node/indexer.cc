#include "node/indexer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "node/node_metrics.h"
#include "store/decoded.h"
#include "store/queries.h"

namespace gapless {

Indexer::Indexer(IndexerOptions options, RpcClientFactory rpc_factory, PgPool* pool)
    : options_(std::move(options)), rpc_factory_(std::move(rpc_factory)), pool_(pool) {}

Result<uint64_t> Indexer::Plan() {
  if (options_.from > options_.to) {
    return FailedPrecondition(
        fmt::format("--from {} is above --to {}", options_.from, options_.to));
  }
  auto conn = pool_->Acquire();
  Datasets asked = options_.datasets;
  // A sparse write (--data events) holds no "blocks" (store/writer.h RangeWrite::sparse).
  if (!options_.events_filter.has_value()) asked.Add(kBlocksDataset);
  GAPLESS_ASSIGN_OR_RETURN(auto done, CommittedRanges(*conn, options_.from, options_.to, asked));
  ranges_ = PendingRanges(options_.from, options_.to, options_.range_size, std::move(done));
  uint64_t blocks = 0;
  for (const auto& r : ranges_) blocks += r.size();
  // Of those, the blocks committed already (without a dataset asked for): the backfill.
  GAPLESS_ASSIGN_OR_RETURN(auto lacking, RangesLacking(*conn, asked, options_.from, options_.to));
  std::vector<std::pair<uint64_t, uint64_t>> backfill;
  for (const DatasetGap& gap : lacking) backfill.emplace_back(gap.from, gap.to);
  std::sort(backfill.begin(), backfill.end());
  // A backfill replaces the ranges' rows: refused before anything is fetched where they hold a
  // dataset this run does not ask for (the writer refuses it too, store/writer.h "Datasets").
  for (const auto& [a, b] : backfill) {
    const uint64_t first = std::max(options_.from, a / options_.range_size * options_.range_size);
    const uint64_t last =
        std::min(options_.to, (b / options_.range_size + 1) * options_.range_size - 1);
    GAPLESS_ASSIGN_OR_RETURN(Datasets beyond, HeldBeyond(*conn, first, last, asked));
    if (!beyond.empty()) return BackfillWouldDrop(first, last, beyond);
  }
  backfill_blocks_ = 0;
  uint64_t counted_to = 0;  // blocks below it are counted (the datasets' gaps may overlap)
  bool any = false;
  for (const auto& [a, b] : backfill) {
    uint64_t lo = any ? std::max(a, counted_to) : a;
    if (lo <= b) backfill_blocks_ += b - lo + 1;
    if (!any || b + 1 > counted_to) counted_to = b + 1;
    any = true;
  }
  return blocks;
}

void Indexer::Stop() { stop_.store(true); }

void Indexer::Fail(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  stop_.store(true);
}

Status Indexer::Run() {
  uint32_t workers = std::max<uint32_t>(1, options_.fetch_workers);
  budget_ = std::make_unique<MemoryBudget>(options_.memory_budget_bytes, workers);
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (uint32_t i = 0; i < workers; ++i) threads.emplace_back([this] { WorkerLoop(); });
  for (auto& t : threads) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_error_.ok()) return first_error_;
  if (next_range_.load() < ranges_.size() || stop_.load()) {
    // Stopped from outside before every range was taken (or while some were in flight).
    bool all_done = counters_.ranges.load() == ranges_.size();
    if (!all_done) return Interrupted();
  }
  return Status::Ok();
}

void Indexer::WorkerLoop() {
  RpcBlockSource source(rpc_factory_());
  const EnrichOptions enrich = EnrichWithStore(options_.token_metadata, pool_);
  while (!stop_.load()) {
    size_t i = next_range_.fetch_add(1);
    if (i >= ranges_.size()) return;
    const BlockRange& range = ranges_[i];
    // Committed whole and lacking only the config's tables: decoded from the stored logs.
    bool decoded = false;
    if (Status st = DecodeStored(range, &decoded); !st.ok()) {
      if (!stop_.load() || st.code() != Code::kAborted) Fail(st);
      return;
    }
    if (decoded) {
      counters_.blocks += range.size();
      counters_.decoded_from_store += range.size();
      counters_.ranges += 1;
      continue;
    }
    // In parts of what the memory budget lets this thread hold, in order (one part without one).
    for (uint64_t from = range.from; from <= range.to;) {
      const uint32_t batch = budget_->BatchBlocks(options_.blocks_per_request);
      RangeWrite write;
      write.from_block = from;
      write.to_block = from + budget_->PartBlocks(range.to - from + 1, batch) - 1;
      Status st =
          WithRetries(fmt::format("fetch blocks {}-{}", write.from_block, write.to_block), [&] {
            write.blocks.clear();
            if (options_.events_filter.has_value()) {
              write.sparse = true;
              Status fetched = FetchEventsRange(source, *options_.events_filter, write.from_block,
                                                write.to_block, batch,
                                                BlockChecks{options_.chain_id, options_.verify},
                                                /*limiter=*/nullptr, &stop_, &write.blocks);
              if (fetched.ok() && options_.contracts != nullptr &&
                  options_.contracts->has_factories()) {
                options_.contracts->KeepMatching(&write.blocks);
              }
              return fetched;
            }
            return FetchAndDecodeRange(source, write.from_block, write.to_block, batch,
                                       BlockChecks{options_.chain_id, options_.verify},
                                       /*limiter=*/nullptr, &stop_, &write.blocks, &enrich,
                                       budget_.get(), /*check=*/nullptr, &write.datasets);
          });
      if (st.ok()) st = WriteRangeWithRetries(write);
      if (!st.ok()) {
        if (!stop_.load() || st.code() != Code::kAborted) Fail(st);
        return;
      }
      uint64_t txs = 0, logs = 0, transfers = 0;
      for (const auto& b : write.blocks) {
        txs += b.transactions.size();
        logs += b.logs.size();
        transfers += b.token_transfers.size();
      }
      counters_.transactions += txs;
      counters_.logs += logs;
      counters_.token_transfers += transfers;
      counters_.blocks += write.to_block - write.from_block + 1;
      from = write.to_block + 1;
    }
    counters_.ranges += 1;
  }
}

Status Indexer::DecodeStored(const BlockRange& range, bool* decoded) {
  *decoded = false;
  if (options_.contracts == nullptr || options_.events_filter.has_value()) return Status::Ok();
  Datasets asked = options_.datasets;
  asked.Add(kBlocksDataset);
  return WithRetries(
      fmt::format("decode blocks {}-{} from the stored logs", range.from, range.to), [&] {
        auto conn = pool_->Acquire();
        RangeWrite write;
        write.from_block = range.from;
        write.to_block = range.to;
        GAPLESS_ASSIGN_OR_RETURN(*decoded,
                                 ReadStoredForDecoding(*conn, *options_.contracts, asked, &write));
        if (!*decoded) return Status::Ok();
        WriteOptions write_options;
        write_options.contracts = options_.contracts;
        Status st = WriteRange(*conn, write, write_options);
        if (!st.ok()) *decoded = false;
        return st;
      });
}

Status Indexer::WriteRangeWithRetries(const RangeWrite& write) {
  return WithRetries(fmt::format("write blocks {}-{}", write.from_block, write.to_block), [&] {
    auto conn = pool_->Acquire();
    WriteOptions write_options;
    write_options.mode = options_.write_mode;
    write_options.copy_format = options_.copy_format;
    write_options.contracts = options_.contracts;
    return WriteRange(*conn, write, write_options);
  });
}

Status Indexer::WithRetries(const std::string& what, const std::function<Status()>& op) {
  for (int attempt = 1;; ++attempt) {
    Status st = op();
    if (st.ok()) return st;
    if (stop_.load()) return st.code() == Code::kAborted ? st : Interrupted();
    if (!st.retriable() || attempt >= options_.max_attempts) {
      if (attempt > 1) {
        // The code and the typed reason stay the last attempt's: callers decide on them
        // (a verify mismatch, a stale fence), never on the message.
        return Status(st.code(),
                      fmt::format("{} (gave up after {} attempts)", st.message(), attempt))
            .WithReason(st.reason());
      }
      return st;
    }
    int64_t delay = BackoffMicros(options_.env, attempt - 1, options_.retry_base_micros,
                                  options_.retry_cap_micros);
    counters_.retries += 1;
    CountRangeEvent(RangeEvent::kRetried);
    spdlog::warn("{} failed (attempt {}/{}): {}; retrying in {:.1f} s", what, attempt,
                 options_.max_attempts, st.ToString(), static_cast<double>(delay) / 1e6);
    options_.env->SleepMicros(delay);
  }
}

}  // namespace gapless

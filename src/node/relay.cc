#include "node/relay.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/failpoint.h"
#include "core/mutation.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "fmt/ranges.h"
#include "node/node_metrics.h"
#include "store/outbox.h"
#include "store/reader.h"
#include "store/retractions.h"
#include "store/rollback.h"
#include "store/state.h"

namespace gapless {

RelayDuty::RelayDuty(PgPool* pool, Publisher* publisher, RelayOptions options)
    : pool_(pool),
      publisher_(publisher),
      options_(std::move(options)),
      bus_(publisher->name()),
      metric_label_(BusName(bus_)),
      name_("relay " + bus_) {}

Status RelayDuty::Step(uint64_t epoch) {
  auto conn = pool_->Acquire();
  const auto start = std::chrono::steady_clock::now();
  const auto budget = std::chrono::milliseconds(options_.step_budget_ms);
  while (std::chrono::steady_clock::now() - start < budget) {
    bool idle = false;
    GAPLESS_RETURN_IF_ERROR(PublishBatch(*conn, epoch, &idle));
    if (idle) break;
  }
  return Status::Ok();
}

Status RelayDuty::PublishBatch(PgConn& conn, uint64_t epoch, bool* idle) {
  *idle = true;
  const auto started = std::chrono::steady_clock::now();
  // Every read of a batch in one snapshot: a rollback commits wholly before or wholly after it,
  // so the batch never mixes forks, never misses the retractions a rollback recorded with the
  // lowered cursor, and never finds an outbox row whose block was deleted since.
  PgTransaction snapshot(conn);
  GAPLESS_RETURN_IF_ERROR(snapshot.Begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  if (!events_from_.has_value()) {
    // Recorded once and never changed: read it once.
    GAPLESS_ASSIGN_OR_RETURN(events_from_, EventsFrom(conn));
    if (!events_from_.has_value()) {
      return FailedPrecondition("events are not enabled in this database (no events_from)");
    }
  }
  GAPLESS_ASSIGN_OR_RETURN(std::optional<EventCursor> cursor, LoadCursor(conn, bus_));
  const uint64_t next = cursor.has_value() ? cursor->next_block : *events_from_;
  cursor_ = next;
  // Retractions first: every block.reverted before any outbox row above the fork.
  const uint64_t retracted = cursor.has_value() ? cursor->retracted_through : 0;
  GAPLESS_ASSIGN_OR_RETURN(std::vector<Retraction> retractions,
                           ReadRetractions(conn, retracted, options_.max_blocks));
  if (!retractions.empty()) {
    GAPLESS_RETURN_IF_ERROR(snapshot.Commit());
    return PublishRetractions(conn, epoch, next, retracted, retractions, idle);
  }
  GAPLESS_ASSIGN_OR_RETURN(uint64_t generation, ReorgGeneration(conn));
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> frontier, LoadFrontier(conn));
  if (options_.to.has_value() && frontier.has_value() && next > *options_.to &&
      *frontier > *options_.to) {
    done_ = true;
  }
  SetOutboxBacklog(metric_label_, frontier.has_value() && *frontier > next ? *frontier - next : 0);
  if (!frontier.has_value() || *frontier <= next) {
    GAPLESS_RETURN_IF_ERROR(snapshot.Commit());
    // Idle: also the moment to prune rows that a late rewrite of a published range added (at
    // most every 5 s: a DELETE per idle tick would be a write for nothing).
    const auto now = std::chrono::steady_clock::now();
    if (now - last_prune_ < std::chrono::seconds(5) && !done_.load()) return Status::Ok();
    last_prune_ = now;
    return PruneOutbox(conn, options_.buses);
  }

  GAPLESS_ASSIGN_OR_RETURN(std::vector<OutboxRow> rows,
                           ReadOutbox(conn, next, *frontier, options_.max_blocks));
  // Contiguity: every block below the frontier is committed (store/state.h), so the rows must be
  // next, next + 1, ... A missing one is a block committed without its outbox row (before events
  // were enabled, or by a run without --events): publish up to it, and at it, backfill. Never
  // step over it.
  const uint64_t window_end = std::min<uint64_t>(*frontier, next + options_.max_blocks);
  size_t contiguous = 0;
  while (contiguous < rows.size() && rows[contiguous].block_number == next + contiguous) {
    ++contiguous;
  }
  const bool hole = !Mutated("relay-contiguity") && next + contiguous < window_end;
  if (hole && contiguous == 0) {
    GAPLESS_RETURN_IF_ERROR(snapshot.Commit());
    return BackfillHole(conn, next, window_end, *frontier, idle);
  }
  if (hole) rows.resize(contiguous);
  // The batch: whole blocks, up to max_events (at least one block).
  size_t take = 0;
  uint64_t events = 0;
  while (take < rows.size() &&
         (take == 0 || events + rows[take].event_count <= options_.max_events)) {
    events += rows[take].event_count;
    ++take;
  }
  rows.resize(take);
  // Past the batch's last block (rows is never empty here unless the contiguity check is
  // compiled out for a mutation test: then over the hole, to the frontier).
  uint64_t target = rows.empty() ? *frontier : rows.back().block_number + 1;
  std::vector<OutgoingEvent> batch;
  if (!rows.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(
        std::vector<BlockData> blocks,
        ReadBlocks(conn, rows.front().block_number, rows.back().block_number, kEventReadOptions));
    // Blocks orphaned before and back again are published under their incarnation (event.h).
    std::vector<std::string> hashes;
    for (const OutboxRow& row : rows) hashes.push_back(row.block_hash);
    GAPLESS_ASSIGN_OR_RETURN(auto incarnations, BlockIncarnations(conn, hashes));
    size_t b = 0;
    batch.reserve(events);
    for (const OutboxRow& row : rows) {
      while (b < blocks.size() && blocks[b].block.number < row.block_number) ++b;
      if (b == blocks.size() || blocks[b].block.number != row.block_number ||
          blocks[b].block.hash != row.block_hash) {
        return DataLoss("event outbox: block " + std::to_string(row.block_number) + " (" +
                        row.block_hash +
                        ") has an outbox row but its committed data is missing or has another "
                        "hash");
      }
      auto incarnation = incarnations.find(row.block_hash);
      for (OutgoingEvent& e :
           BlockEvents(options_.chain_id, blocks[b],
                       incarnation == incarnations.end() ? 0 : incarnation->second)) {
        batch.push_back(std::move(e));
      }
    }
  }
  GAPLESS_RETURN_IF_ERROR(snapshot.Commit());
  if (!batch.empty()) {
    Status published = publisher_->Publish(batch);
    if (!published.ok()) {
      CountPublishFailure(metric_label_);
      return published.WithContext("relay: publishing blocks " +
                                   std::to_string(rows.front().block_number) + ".." +
                                   std::to_string(rows.back().block_number) + " to " + bus_);
    }
    if (FailpointFiresOnce("relay-crash-after-publish")) {
      spdlog::warn("failpoint relay-crash-after-publish: killing the process");
      raise(SIGKILL);
    }
  }
  // Refused (Aborted) when a rollback lowered the cursor or orphaned blocks since the snapshot:
  // the next step reads again and publishes the retractions first.
  GAPLESS_RETURN_IF_ERROR(
      AdvanceCursor(conn, bus_, next, target, batch.size(), epoch, options_.buses, generation));
  events_published_ += batch.size();
  CountEventsPublished(
      metric_label_, batch.size(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  cursor_ = target;
  if (options_.to.has_value() && target > *options_.to) done_ = true;
  if (!batch.empty()) {
    spdlog::debug("{}: published blocks {}..{} ({} events)", name_, next, target - 1, batch.size());
  }
  *idle = false;
  return Status::Ok();
}

Status RelayDuty::BackfillHole(PgConn& conn, uint64_t next, uint64_t window_end, uint64_t frontier,
                               bool* idle) {
  GAPLESS_ASSIGN_OR_RETURN(OutboxBackfill backfill, BackfillOutbox(conn, next, window_end));
  if (backfill.added == 0 && backfill.has_from) {
    // Another bus's relay backfilled this hole first: read again.
    *idle = false;
    return Status::Ok();
  }
  if (!backfill.has_from) {
    return DataLoss(fmt::format(
        "event outbox: block {} is below the frontier {} but its data is not committed; the "
        "relay will not publish past it (run `gapless verify` and `gapless reconcile`)",
        next, frontier));
  }
  spdlog::info(
      "{}: blocks from {} were committed without events (before events were enabled, or by a "
      "run without --events): added {} outbox rows below block {}",
      name_, next, backfill.added, window_end);
  *idle = false;
  return Status::Ok();
}

Status RelayDuty::PublishRetractions(PgConn& conn, uint64_t epoch, uint64_t next,
                                     uint64_t retracted, const std::vector<Retraction>& retractions,
                                     bool* idle) {
  std::vector<OutgoingEvent> batch;
  batch.reserve(retractions.size());
  for (const Retraction& r : retractions) {
    batch.push_back(
        BlockRevertedEvent(options_.chain_id, r.block, r.generation, r.reverted_at, r.incarnation));
  }
  Status published = publisher_->Publish(batch);
  if (!published.ok()) {
    return published.WithContext(fmt::format(
        "relay: publishing the retractions of blocks {}..{} "
        "to {}",
        retractions.front().block.block.number, retractions.back().block.block.number, bus_));
  }
  GAPLESS_RETURN_IF_ERROR(AdvanceRetractions(conn, bus_, retracted, retractions.back().seq,
                                             batch.size(), epoch, next, options_.buses));
  events_published_ += batch.size();
  spdlog::info("{}: published block.reverted for blocks {}..{} (reorg generation {})", name_,
               retractions.front().block.block.number, retractions.back().block.block.number,
               retractions.back().generation);
  *idle = false;
  return Status::Ok();
}

Result<std::unique_ptr<EventRelays>> EventRelays::Open(const EventsOptions& options, PgPool* pool,
                                                       uint64_t chain_id, uint64_t from,
                                                       std::optional<uint64_t> to,
                                                       LeaderLease* lease,
                                                       const RpcClientFactory& make_client) {
  std::unique_ptr<EventRelays> out(new EventRelays());
  if (options.buses.empty()) return out;
  RelayOptions relay;
  relay.chain_id = chain_id;
  relay.max_blocks = options.batch_blocks;
  relay.max_events = options.batch_events;
  relay.to = to;
  for (const std::string& url : options.buses) {
    Result<std::unique_ptr<Publisher>> publisher = OpenPublisher(url, options.publisher);
    if (!publisher.ok()) return publisher.status().WithContext("--events");
    relay.buses.push_back((*publisher)->name());
    out->publishers_.push_back(std::move(publisher).value());
  }
  {
    auto conn = pool->Acquire();
    GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> frontier, LoadFrontier(*conn));
    // The frontier never passes a missing block (store/state.h): below `from` it marks a hole this
    // run will not fill, and events go out in chain order, so none of this run's could.
    if (frontier.has_value() && *frontier < from) {
      return FailedPrecondition(fmt::format(
          "--events: blocks {}..{} are not indexed in this database (its frontier is block {}) "
          "and events are published in chain order, so no event of blocks from {} on could be "
          "published: start this run at --from {} (blocks already committed are skipped)",
          *frontier, from - 1, *frontier, from, *frontier));
    }
    GAPLESS_ASSIGN_OR_RETURN(uint64_t events_from, EnableEvents(*conn, frontier.value_or(from)));
    spdlog::info("events: publishing blocks from {} on to {}", events_from,
                 fmt::join(relay.buses, ", "));
  }
  for (auto& publisher : out->publishers_) {
    auto duty = std::make_unique<RelayDuty>(pool, publisher.get(), relay);
    auto host = std::make_unique<DutyHost>(lease, options.tick_ms, duty->name());
    host->Add(duty.get());
    // Woken by every frontier move; without the LISTEN connection it polls at its tick.
    Result<std::unique_ptr<PgWaker>> waker =
        PgWaker::Open(pool->url(), {std::string(kFrontierChannel)}, pool->options());
    if (waker.ok()) {
      host->set_waker(waker->get());
      out->wakers_.push_back(std::move(waker).value());
    } else {
      spdlog::warn("{}: no LISTEN connection ({}); polling every {} ms", duty->name(),
                   waker.status().ToString(), options.tick_ms);
    }
    out->relays_.push_back(std::move(duty));
    out->hosts_.push_back(std::move(host));
  }
  if (options.mempool) {
    std::vector<Publisher*> publishers;
    for (const std::string& url : options.buses) {
      Result<std::unique_ptr<Publisher>> publisher = OpenPublisher(url, options.publisher);
      if (!publisher.ok()) return publisher.status().WithContext("--events");
      publishers.push_back(publisher->get());
      out->mempool_publishers_.push_back(std::move(publisher).value());
    }
    out->mempool_rpc_ = make_client();
    MempoolOptions mempool;
    mempool.chain_id = chain_id;
    EventRelays* relays = out.get();
    mempool.done_when = [relays] { return relays->done(); };
    out->mempool_ =
        std::make_unique<MempoolWatcher>(out->mempool_rpc_.get(), std::move(publishers), mempool);
    auto host = std::make_unique<DutyHost>(lease, options.mempool_tick_ms, "mempool");
    host->Add(out->mempool_.get());
    out->hosts_.push_back(std::move(host));
    spdlog::info("events: watching the node's mempool for transaction.pending");
  }
  return out;
}

EventRelays::~EventRelays() { static_cast<void>(Join()); }

void EventRelays::Start(const std::atomic<bool>& stop) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    results_.assign(hosts_.size(), Status::Ok());
    finished_ = 0;
  }
  for (size_t i = 0; i < hosts_.size(); ++i) {
    threads_.emplace_back([this, i, &stop] {
      Status st = hosts_[i]->Run(stop);
      if (!st.ok()) spdlog::error("{}: stopped: {}", hosts_[i]->name(), st.ToString());
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_[i] = std::move(st);
        ++finished_;
      }
      finished_cv_.notify_all();
    });
  }
}

Status EventRelays::FirstError() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Status& st : results_) GAPLESS_RETURN_IF_ERROR(st);
  return Status::Ok();
}

Status EventRelays::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  finished_cv_.wait(lock, [this] {
    return finished_ == results_.size() ||
           std::any_of(results_.begin(), results_.end(), [](const Status& s) { return !s.ok(); });
  });
  for (const Status& st : results_) GAPLESS_RETURN_IF_ERROR(st);
  return Status::Ok();
}

Status EventRelays::Join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  return FirstError();
}

bool EventRelays::done() const {
  for (const auto& r : relays_) {
    if (!r->done()) return false;
  }
  return true;
}

uint64_t EventRelays::events_published() const {
  uint64_t n = 0;
  for (const auto& r : relays_) n += r->events_published();
  return n;
}

}  // namespace gapless

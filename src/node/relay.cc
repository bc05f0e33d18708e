#include "node/relay.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <future>
#include <system_error>

#include "core/failpoint.h"
#include "core/mutation.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "fmt/ranges.h"
#include "node/node_metrics.h"
#include "store/decoded_events.h"
#include "store/outbox.h"
#include "store/reader.h"
#include "store/retractions.h"
#include "store/rollback.h"
#include "store/state.h"

namespace gapless {

Result<std::vector<OutgoingEvent>> CommittedBlockEvents(PgConn& conn, uint64_t chain_id,
                                                        const std::vector<BlockData>& blocks,
                                                        const ContractTables* contracts,
                                                        size_t expected) {
  std::vector<OutgoingEvent> out;
  if (blocks.empty()) return out;
  const uint64_t first = blocks.front().block.number;
  const uint64_t last = blocks.back().block.number;
  // Blocks orphaned before and back again are published under their incarnation (event.h).
  std::vector<std::string> hashes;
  for (const BlockData& d : blocks) hashes.push_back(d.block.hash);
  GAPLESS_ASSIGN_OR_RETURN(auto incarnations, BlockIncarnations(conn, hashes));
  GAPLESS_ASSIGN_OR_RETURN(std::vector<uint64_t> live, LiveBlocks(conn, first, last));
  std::vector<DecodedRow> decoded;
  if (contracts != nullptr) {
    GAPLESS_ASSIGN_OR_RETURN(decoded, ReadDecodedRows(conn, *contracts, first, last));
  }
  out.reserve(expected);
  size_t d = 0;
  for (const BlockData& block : blocks) {
    const Block& b = block.block;
    auto found = incarnations.find(b.hash);
    const uint64_t incarnation = found == incarnations.end() ? 0 : found->second;
    const EventPhase phase = std::binary_search(live.begin(), live.end(), b.number)
                                 ? EventPhase::kLive
                                 : EventPhase::kBackfill;
    for (OutgoingEvent& e : BlockEvents(chain_id, block, incarnation, phase)) {
      out.push_back(std::move(e));
    }
    for (; d < decoded.size() && decoded[d].block_number <= b.number; ++d) {
      const DecodedRow& r = decoded[d];
      if (r.block_number < b.number) continue;  // a block not asked for (a gap in `blocks`)
      if (r.block_hash != b.hash) {
        return DataLoss(fmt::format("{}: a row of block {} holds block hash {}, the block's is {}",
                                    r.event_type, r.block_number, r.block_hash, b.hash));
      }
      out.push_back(DecodedLogEvent(chain_id, r.event_type, b.hash, r.log_index, r.block_timestamp,
                                    r.fields_json, incarnation, phase));
    }
  }
  return out;
}

RelayDuty::RelayDuty(PgPool* pool, Publisher* publisher, RelayOptions options)
    : pool_(pool),
      publisher_(publisher),
      options_(std::move(options)),
      bus_(publisher->name()),
      metric_label_(BusName(bus_)),
      name_("relay " + bus_) {}

// A batch handed to the publishing thread; `confirmed` is its Publish's result.
struct RelayDuty::InFlight {
  Prepared batch;  // its events moved to the publishing thread
  size_t events = 0;
  std::future<Status> confirmed;
};

Status RelayDuty::Step(uint64_t epoch) {
  auto conn = pool_->Acquire();
  const auto start = std::chrono::steady_clock::now();
  const auto budget = std::chrono::milliseconds(options_.step_budget_ms);
  // The batch being published (step 4) while the next is read; waited for before any return.
  std::unique_ptr<InFlight> in_flight;
  while (std::chrono::steady_clock::now() - start < budget) {
    Prepared read;
    Status prepared = Prepare(*conn, in_flight ? &in_flight->batch : nullptr, &read);
    if (in_flight) {
      // Batch n confirmed before anything of batch n+1 is acted on; a failed publish drops batch
      // n+1 unpublished.
      Status confirmed = Confirmed(*in_flight);
      if (!confirmed.ok()) return confirmed;
      // Batch n+1 goes to the publishing thread before batch n's advance (a transaction and a
      // commit, which would otherwise keep the broker waiting), if the bus is still where both
      // reads found it (BusUnmoved).
      std::unique_ptr<InFlight> next;
      if (prepared.ok() && read.kind == Prepared::Kind::kBatch) {
        Result<bool> unmoved = BusUnmoved(*conn, epoch, in_flight->batch);
        if (unmoved.ok() && *unmoved) next = StartPublish(std::move(read));
      }
      Status advanced = Advance(*conn, epoch, *in_flight);
      in_flight.reset();
      if (!advanced.ok()) {
        // Nothing in flight on return. Batch n+1 reached the broker or not; either way the
        // cursor is where batch n starts, and its events are sent again (the same ids).
        if (next != nullptr) static_cast<void>(Confirmed(*next));
        return advanced;
      }
      if (next != nullptr) {
        in_flight = std::move(next);
        continue;
      }
      GAPLESS_RETURN_IF_ERROR(prepared);
      // Caught up as of a snapshot taken after batch n's rows were read: the next wake-up or
      // tick reads again.
      if (read.kind == Prepared::Kind::kIdle) break;
      // Anything else (a batch the bus moved under included) is read again with nothing in
      // flight.
      continue;
    } else {
      GAPLESS_RETURN_IF_ERROR(prepared);
      cursor_ = read.start;
      if (read.done) done_ = true;
      if (read.kind != Prepared::Kind::kBatch) {
        bool idle = false;
        GAPLESS_RETURN_IF_ERROR(ActAlone(*conn, epoch, read, &idle));
        if (idle) break;
        continue;
      }
    }
    in_flight = StartPublish(std::move(read));
  }
  if (in_flight) return FinishPublish(*conn, epoch, *in_flight);
  return Status::Ok();
}

Status RelayDuty::Prepare(PgConn& conn, const Prepared* in_flight, Prepared* out) {
  out->started = std::chrono::steady_clock::now();
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
  const uint64_t stored = cursor.has_value() ? cursor->next_block : *events_from_;
  out->retracted = cursor.has_value() ? cursor->retracted_through : 0;
  // Read ahead: the batch in flight has not moved the cursor yet; this one follows it, and only
  // if nothing else moved the bus meanwhile (a rollback lowered the cursor, or another relay of
  // this bus published).
  if (in_flight != nullptr &&
      (stored != in_flight->start || out->retracted != in_flight->retracted)) {
    out->kind = Prepared::Kind::kStale;
    return snapshot.Commit();
  }
  const uint64_t next = in_flight != nullptr ? in_flight->target : stored;
  out->start = next;
  // Retractions first: every block.reverted before any outbox row above the fork.
  GAPLESS_ASSIGN_OR_RETURN(out->retractions,
                           ReadRetractions(conn, out->retracted, options_.max_blocks));
  if (!out->retractions.empty()) {
    out->kind = Prepared::Kind::kRetractions;
    return snapshot.Commit();
  }
  GAPLESS_ASSIGN_OR_RETURN(out->generation, ReorgGeneration(conn));
  if (in_flight != nullptr && out->generation != in_flight->generation) {
    out->kind = Prepared::Kind::kStale;
    return snapshot.Commit();
  }
  GAPLESS_ASSIGN_OR_RETURN(std::optional<uint64_t> frontier, LoadFrontier(conn));
  out->done = options_.to.has_value() && frontier.has_value() && next > *options_.to &&
              *frontier > *options_.to;
  SetOutboxBacklog(metric_label_, frontier.has_value() && *frontier > next ? *frontier - next : 0);
  if (!frontier.has_value() || *frontier <= next) {
    out->kind = Prepared::Kind::kIdle;
    return snapshot.Commit();
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
    out->kind = Prepared::Kind::kHole;
    out->frontier = *frontier;
    out->window_end = window_end;
    return snapshot.Commit();
  }
  if (hole) rows.resize(contiguous);
  // Blocks whose decoded rows may be missing end the batch; at the cursor, the relay waits.
  if (!rows.empty() && options_.contracts != nullptr) {
    GAPLESS_ASSIGN_OR_RETURN(
        std::optional<uint64_t> missing,
        FirstBlockWithoutDecoded(conn, *options_.contracts, rows.front().block_number,
                                 rows.back().block_number));
    if (missing.has_value() && *missing == rows.front().block_number) {
      if (warned_decoded_ != *missing) {
        warned_decoded_ = *missing;
        spdlog::warn(
            "{}: block {} is committed without the decoded tables of --contracts (a contract "
            "added to the config since): its events wait until `gapless index --contracts ...` "
            "writes its range again",
            name_, *missing);
      }
      out->kind = Prepared::Kind::kIdle;
      return snapshot.Commit();
    }
    if (missing.has_value()) rows.resize(*missing - rows.front().block_number);
  }
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
  out->kind = Prepared::Kind::kBatch;
  out->target = rows.empty() ? *frontier : rows.back().block_number + 1;
  if (!rows.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(
        std::vector<BlockData> blocks,
        ReadBlocks(conn, rows.front().block_number, rows.back().block_number, kEventReadOptions));
    size_t b = 0;
    std::vector<BlockData> batch;
    batch.reserve(rows.size());
    for (const OutboxRow& row : rows) {
      while (b < blocks.size() && blocks[b].block.number < row.block_number) ++b;
      if (b == blocks.size() || blocks[b].block.number != row.block_number ||
          blocks[b].block.hash != row.block_hash) {
        return DataLoss("event outbox: block " + std::to_string(row.block_number) + " (" +
                        row.block_hash +
                        ") has an outbox row but its committed data is missing or has another "
                        "hash");
      }
      batch.push_back(std::move(blocks[b]));
    }
    GAPLESS_ASSIGN_OR_RETURN(out->events, CommittedBlockEvents(conn, options_.chain_id, batch,
                                                               options_.contracts, events));
  }
  GAPLESS_RETURN_IF_ERROR(snapshot.Commit());
  ++batches_read_;
  return Status::Ok();
}

std::unique_ptr<RelayDuty::InFlight> RelayDuty::StartPublish(Prepared batch) {
  auto in_flight = std::make_unique<InFlight>();
  in_flight->events = batch.events.size();
  if (batch.events.empty()) {
    // Nothing to confirm (only over a hole, with the contiguity check switched off by a mutation
    // test): the cursor moves at once.
    std::promise<Status> none;
    none.set_value(Status::Ok());
    in_flight->confirmed = none.get_future();
  } else {
    auto publish = [publisher = publisher_, events = std::move(batch.events)] {
      return publisher->Publish(events);
    };
    try {
      in_flight->confirmed = std::async(std::launch::async, std::move(publish));
    } catch (const std::system_error& e) {
      // No thread to be had: publish on this one when the batch is waited for (not overlapped).
      spdlog::warn("{}: publishing without a thread of its own: {}", name_, e.what());
      in_flight->confirmed = std::async(std::launch::deferred, std::move(publish));
    }
  }
  in_flight->batch = std::move(batch);
  return in_flight;
}

Status RelayDuty::FinishPublish(PgConn& conn, uint64_t epoch, InFlight& in_flight) {
  GAPLESS_RETURN_IF_ERROR(Confirmed(in_flight));
  return Advance(conn, epoch, in_flight);
}

Status RelayDuty::Confirmed(InFlight& in_flight) {
  const Prepared& batch = in_flight.batch;
  Status published = in_flight.confirmed.get();
  if (!published.ok()) {
    CountPublishFailure(metric_label_);
    return published.WithContext(
        fmt::format("relay: publishing blocks {}..{} to {}", batch.start, batch.target - 1, bus_));
  }
  if (in_flight.events > 0 && FailpointFiresOnce("relay-crash-after-publish")) {
    spdlog::warn("failpoint relay-crash-after-publish: killing the process");
    raise(SIGKILL);
  }
  return Status::Ok();
}

Result<bool> RelayDuty::BusUnmoved(PgConn& conn, uint64_t epoch, const Prepared& batch) {
  GAPLESS_ASSIGN_OR_RETURN(std::optional<EventCursor> cursor, LoadCursor(conn, bus_));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t generation, ReorgGeneration(conn));
  const uint64_t next = cursor.has_value() ? cursor->next_block : events_from_.value_or(0);
  const uint64_t retracted = cursor.has_value() ? cursor->retracted_through : 0;
  const uint64_t recorded_epoch = cursor.has_value() ? cursor->leader_epoch : 0;
  return next == batch.start && retracted == batch.retracted && recorded_epoch <= epoch &&
         generation == batch.generation;
}

Status RelayDuty::Advance(PgConn& conn, uint64_t epoch, const InFlight& in_flight) {
  const Prepared& batch = in_flight.batch;
  // Refused (Aborted) when a rollback lowered the cursor or orphaned blocks since the batch's
  // snapshot: the next step reads again and publishes the retractions first.
  GAPLESS_RETURN_IF_ERROR(AdvanceCursor(conn, bus_, batch.start, batch.target, in_flight.events,
                                        epoch, options_.buses, batch.generation));
  events_published_ += in_flight.events;
  CountEventsPublished(
      metric_label_, in_flight.events,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - batch.started).count());
  cursor_ = batch.target;
  if (options_.to.has_value() && batch.target > *options_.to) done_ = true;
  if (in_flight.events > 0) {
    spdlog::debug("{}: published blocks {}..{} ({} events)", name_, batch.start, batch.target - 1,
                  in_flight.events);
  }
  return Status::Ok();
}

Status RelayDuty::ActAlone(PgConn& conn, uint64_t epoch, Prepared& read, bool* idle) {
  *idle = false;
  switch (read.kind) {
    case Prepared::Kind::kRetractions:
      return PublishRetractions(conn, epoch, read.start, read.retracted, read.retractions, idle);
    case Prepared::Kind::kHole:
      return BackfillHole(conn, read.start, read.window_end, read.frontier, idle);
    case Prepared::Kind::kIdle: {
      *idle = true;
      // Idle: also the moment to prune rows that a late rewrite of a published range added (at
      // most every 5 s: a DELETE per idle tick would be a write for nothing).
      const auto now = std::chrono::steady_clock::now();
      if (now - last_prune_ < std::chrono::seconds(5) && !done_.load()) return Status::Ok();
      last_prune_ = now;
      return PruneOutbox(conn, options_.buses);
    }
    case Prepared::Kind::kBatch:
    case Prepared::Kind::kStale:
      break;
  }
  return Internal("relay: a read with nothing in flight cannot be a batch or stale here");
}

Status RelayDuty::BackfillHole(PgConn& conn, uint64_t next, uint64_t window_end, uint64_t frontier,
                               bool* idle) {
  GAPLESS_ASSIGN_OR_RETURN(OutboxBackfill backfill,
                           BackfillOutbox(conn, next, window_end, options_.contracts));
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
    batch.push_back(BlockRevertedEvent(options_.chain_id, r.block, r.generation, r.reverted_at,
                                       r.incarnation, r.decoded));
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
  relay.contracts = options.contracts.get();
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

std::string EventRelays::Unfinished() const {
  std::string out;
  for (const auto& r : relays_) {
    if (r->done()) continue;
    out += (out.empty() ? "" : ", ") + BusName(std::string(r->name()).substr(6));  // "relay " + bus
  }
  return out;
}

uint64_t EventRelays::events_published() const {
  uint64_t n = 0;
  for (const auto& r : relays_) n += r->events_published();
  return n;
}

}  // namespace gapless

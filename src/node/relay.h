// relay: the leader duty that publishes the event outbox (store/outbox.h) to one bus.
//
// One RelayDuty per bus, each on its own DutyHost thread under the leader's lease (node/duties.h),
// so a slow or absent broker delays neither the seeder/janitor/frontier duties nor the lease
// (which the elector renews on a thread of its own), nor the other buses. Per batch:
//
//   1. read the bus's cursor (or, before its first publish, events_from) and the frontier
//      persisted in PostgreSQL (the next block not known to be committed);
//   2. take the outbox rows in [cursor, frontier), at most max_blocks blocks / about max_events
//      events, ascending: only committed blocks, and only below the frontier, so consumers see
//      blocks in chain order although workers commit out of order. The rows must be contiguous
//      from the cursor (every block below the frontier is committed, store/state.h): a block
//      without a row (committed before events were enabled, or by a run without --events) ends
//      the batch, and at the cursor its window's rows are backfilled (BackfillOutbox) — never
//      stepped over; a block below the frontier without data is DataLoss;
//   3. build the blocks' events from the committed rows (store/reader.h kEventReadOptions: only
//      the columns the events carry; events/event.h), each block's decoded events (the contracts
//      mode, store/decoded_events.h) after its others, with the phase the block was committed
//      with (store/outbox.h LiveBlocks): the same ids and bytes whenever they are built. A block
//      whose committed range lacks a configured decoded table's dataset (the contract was added
//      to the config since; `index` writes the range again) ends the batch: the relay waits at
//      it, as at the frontier, and never publishes the block without its decoded events;
//   4. publish the batch and wait for the broker's confirmation (Publisher::Publish);
//   5. only then AdvanceCursor from where the batch starts, fenced by the leader's epoch and by
//      the reorg generation read with the batch, which also prunes the outbox.
//
// The order is the safety argument: a crash between 4 and 5 (failpoint relay-crash-after-publish)
// publishes the batch again after the restart, with the same event ids (at least once, never
// lost); a cursor never moves past events the broker has not confirmed. A publish that fails
// (broker down, timeout) is retried at the next tick; the backlog stays in the outbox.
//
// Pipelined (issue 19): batch n's step 4 runs on a thread of its own (std::async, one per batch:
// the publishing thread) while the duty's thread does steps 1-3 of batch n+1, read from where batch
// n ends. Then the duty's thread waits for batch n's confirmation, hands batch n+1 to the
// publishing thread, and does batch n's step 5 while n+1 is being published (the advance is a
// transaction with a commit: the broker is not kept waiting for it). Hence, per bus:
//   - backpressure: at most one batch being confirmed and one prepared; nothing more is read;
//   - batches reach the bus one at a time, in chain order (n+1's Publish starts after n's
//     returned), and the cursor moves in order, each move after its own batch's confirmation;
//   - batch n+1 is handed over only if batch n was confirmed, n+1's snapshot found the cursor and
//     the retraction progress where batch n started, the reorg generation batch n was read with,
//     no pending retraction, and a batch to publish (not idle, not a hole), and if, after n's
//     confirmation, the bus is still so and no newer leader epoch is recorded (BusUnmoved).
//     Otherwise it is dropped unpublished (a failed publish ends the step with the prepared batch
//     unsent) and what to do is read again with nothing in flight, as without pipelining;
//   - should batch n's advance then be refused (a rollback or another leader after that check),
//     batch n+1 is already on its way: it is a batch in flight across a rollback or a deposition
//     (below), waited for before the step returns; its own step 5, a compare-and-set from batch
//     n's end under the generation of its own snapshot, never happens, and its events are sent
//     again from the cursor (the same ids: at least once);
//   - a step ends with nothing in flight: it waits for the last batch's confirmation and advance.
// Only reading overlaps publishing, and publishing the next batch overlaps the last one's advance;
// retractions, backfills and idle prunes run with nothing in flight, so everything the re-org
// argument below says holds as it did for one batch at a time.
//
// A deposed leader's relay may still publish a batch the new leader publishes too (duplicates,
// same ids); it cannot move the cursor (Aborted, kStaleRelayEpochReason), and stands by.
//
// Re-orgs (store/retractions.h): steps 1-3 read in one REPEATABLE READ snapshot, which also reads
// the bus's retraction progress. Pending retractions are published first, as block.reverted
// events in their seq order (within a rollback, the highest orphaned block first), then
// AdvanceRetractions; only a step that finds none publishes outbox rows. A batch read before a
// rollback and confirmed after it is refused at AdvanceCursor (the rollback lowered the cursor or
// changed the reorg generation): the step fails (Aborted, logged), and the next one publishes the
// retractions, which cover that batch's orphaned blocks too (a rollback retracts every orphaned
// block, whatever the cursors say), then the new fork from the lowered cursor.
//
// Thread-safety: Step on the host's thread (which also uses the PostgreSQL connection); the
// publisher is used by one thread at a time (the publishing thread while a batch is in flight, else
// the host's: events/bus.h); the counters are atomics for other threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "events/bus.h"
#include "node/duties.h"
#include "node/mempool.h"
#include "node/range_job.h"
#include "store/decoded.h"
#include "store/pg.h"
#include "store/retractions.h"

namespace gapless {

// The events of committed blocks (ascending, each read with store/reader.h kEventReadOptions), in
// the order they are published: each block's own (events/event.h BlockEvents), then its decoded
// events (`contracts`' tables, store/decoded_events.h; null: none) by log index, with the
// block's incarnation and phase (store/outbox.h LiveBlocks). The relay and `events replay` build
// them so, hence the same ids and bytes. `expected`: the events expected (a reservation).
// DataLoss when a decoded row names another hash than its block's.
Result<std::vector<OutgoingEvent>> CommittedBlockEvents(PgConn& conn, uint64_t chain_id,
                                                        const std::vector<BlockData>& blocks,
                                                        const ContractTables* contracts,
                                                        size_t expected = 0);

struct RelayOptions {
  uint64_t chain_id = 0;
  size_t max_blocks = 200;    // blocks per batch
  size_t max_events = 5'000;  // a batch stops growing at the block that reaches this
  // A step publishes batches until caught up or until this much time has passed.
  int64_t step_budget_ms = 1'000;
  // The fixed range's last block: done() once it is published. nullopt: follow forever.
  std::optional<uint64_t> to;
  // Every bus this process publishes to (cursor names): the outbox is pruned below the slowest.
  std::vector<std::string> buses;
  // The contracts mode (--contracts): each block's decoded rows of these tables are published
  // after its other events (store/decoded_events.h). Borrowed; null: none.
  const ContractTables* contracts = nullptr;
};

class RelayDuty : public Duty {
 public:
  // `pool` and `publisher` are borrowed.
  RelayDuty(PgPool* pool, Publisher* publisher, RelayOptions options);
  const char* name() const override { return name_.c_str(); }
  Status Step(uint64_t epoch) override;
  bool done() const override { return done_.load(); }

  uint64_t events_published() const { return events_published_.load(); }
  // The next block to publish, 0 before the first step.
  uint64_t cursor() const { return cursor_.load(); }
  // Batches read and built so far, published or not (one read ahead while another is in flight
  // counts when its events are built, before its Publish starts, and also when it is dropped).
  uint64_t batches_read() const { return batches_read_.load(); }

 private:
  // What one read of the outbox found: steps 1-3, in one snapshot.
  struct Prepared {
    enum class Kind {
      kBatch,        // events to publish
      kIdle,         // nothing below the frontier
      kRetractions,  // retractions to publish first
      kHole,         // a block without an outbox row at `start`: backfill
      kStale,        // read ahead while a batch was in flight, but the bus moved meanwhile
    };
    Kind kind = Kind::kIdle;
    uint64_t start = 0;       // the bus's next block this read starts at (the cursor it expects)
    uint64_t target = 0;      // kBatch: past its last block (the cursor after it)
    uint64_t generation = 0;  // the reorg generation read
    uint64_t retracted = 0;   // the bus's retraction progress read
    uint64_t frontier = 0;    // kHole
    uint64_t window_end = 0;  // kHole
    // The fixed range is published to its end (as this read knows; applied only when nothing
    // was in flight).
    bool done = false;
    std::vector<Retraction> retractions;  // kRetractions
    std::vector<OutgoingEvent> events;    // kBatch
    std::chrono::steady_clock::time_point started;
  };
  struct InFlight;

  // Steps 1-3. `in_flight` (nullable): the batch being published, which this read follows (it
  // starts at in_flight->target, and is kStale unless the bus is still where that batch started).
  // Reads only; sets no member but events_from_, warned_decoded_ and batches_read_.
  Status Prepare(PgConn& conn, const Prepared* in_flight, Prepared* out);
  // Step 4 of a kBatch on the publishing thread (or at once when it has no events).
  std::unique_ptr<InFlight> StartPublish(Prepared batch);
  // Confirmed, then Advance.
  Status FinishPublish(PgConn& conn, uint64_t epoch, InFlight& in_flight);
  // Waits for the batch's Publish; its error, with the blocks and the bus.
  Status Confirmed(InFlight& in_flight);
  // Step 5 of a confirmed batch: AdvanceCursor (refused when the bus moved since its read).
  Status Advance(PgConn& conn, uint64_t epoch, const InFlight& in_flight);
  // Whether the bus is still where `batch` (confirmed, not yet advanced) was read: its cursor and
  // retraction progress at the batch's start, no newer leader epoch recorded, the same reorg
  // generation. The batch read after it is published only then (a rollback or another leader's
  // move after this check is caught by the advances' compare-and-set, as for any batch in
  // flight).
  Result<bool> BusUnmoved(PgConn& conn, uint64_t epoch, const Prepared& batch);
  // With nothing in flight: acts on a read that found no batch (kIdle, kRetractions, kHole);
  // *idle is set when there was nothing to publish.
  Status ActAlone(PgConn& conn, uint64_t epoch, Prepared& read, bool* idle);
  // [next, window_end) below `frontier` starts with a block without an outbox row: backfill the
  // window's missing rows (store/outbox.h BackfillOutbox); DataLoss when none could be added (the
  // block is not committed although the frontier says it is).
  Status BackfillHole(PgConn& conn, uint64_t next, uint64_t window_end, uint64_t frontier,
                      bool* idle);
  // The block.reverted events of `retractions` (read after the bus's progress `retracted`), then
  // AdvanceRetractions; `next` is the bus's next block (where a new cursor starts).
  Status PublishRetractions(PgConn& conn, uint64_t epoch, uint64_t next, uint64_t retracted,
                            const std::vector<Retraction>& retractions, bool* idle);

  PgPool* pool_;
  Publisher* publisher_;
  RelayOptions options_;
  std::string bus_;
  std::string metric_label_;  // BusName(bus_): the /metrics label, without the user name
  std::string name_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> events_published_{0};
  std::atomic<uint64_t> cursor_{0};
  std::atomic<uint64_t> batches_read_{0};
  std::chrono::steady_clock::time_point last_prune_{};
  std::optional<uint64_t> events_from_;  // indexer_state events_from, read at the first step
  // The block whose missing decoded tables were last warned about (once per block).
  std::optional<uint64_t> warned_decoded_;
};

// The event buses of a leader (`run`, `leader`, `index`): one publisher and RelayDuty per bus,
// each on a DutyHost thread of its own under `lease`. Open enables events in the database
// (EnableEvents: from the persisted frontier, or `from` in a database without one), so from then
// on every range write adds outbox rows.
struct EventsOptions {
  std::vector<std::string> buses;  // --events URLs; empty: no relay
  PublisherOptions publisher;
  size_t batch_blocks = 200;
  size_t batch_events = 5'000;
  // The relay's poll interval; a frontier move wakes it at once (LISTEN, store/notify.h).
  int64_t tick_ms = 200;
  // Also run the mempool watcher (node/mempool.h), on a thread of its own, publishing
  // transaction.pending to every bus.
  bool mempool = false;
  int64_t mempool_tick_ms = 500;
  // --contracts: the decoded events are published too (RelayOptions::contracts); null: none.
  std::shared_ptr<const ContractTables> contracts;
};

class EventRelays {
 public:
  // FailedPrecondition naming the URL for a bad bus URL; the bus need not be reachable yet (the
  // relay retries).
  // `make_client` (for the mempool watcher) is called once, here.
  static Result<std::unique_ptr<EventRelays>> Open(const EventsOptions& options, PgPool* pool,
                                                   uint64_t chain_id, uint64_t from,
                                                   std::optional<uint64_t> to, LeaderLease* lease,
                                                   const RpcClientFactory& make_client);
  ~EventRelays();
  // Starts one thread per bus; each runs until `stop` or until its relay is done (a fixed range
  // published to its end).
  void Start(const std::atomic<bool>& stop);
  // Returns as soon as one relay has stopped with an error (FailedPrecondition, DataLoss), with
  // that error, while the others may still run (the caller stops them: every role of the process
  // stops on it, so no bus goes quiet while the process lives); Ok once every relay returned
  // without one (done, or `stop`).
  Status Wait();
  // The error that stopped a relay, if one has (Ok otherwise); does not wait.
  Status FirstError() const;
  // Joins the threads; the first error that stopped a relay.
  Status Join();
  bool done() const;
  // The buses (redacted URLs, comma-separated) whose relay is not done.
  std::string Unfinished() const;
  uint64_t events_published() const;
  size_t size() const { return relays_.size(); }

 private:
  EventRelays() = default;
  std::vector<std::unique_ptr<Publisher>> publishers_;
  std::vector<std::unique_ptr<RelayDuty>> relays_;
  std::vector<std::unique_ptr<Publisher>> mempool_publishers_;
  std::unique_ptr<JsonRpcClient> mempool_rpc_;
  std::unique_ptr<MempoolWatcher> mempool_;
  std::vector<std::unique_ptr<DutyHost>> hosts_;
  std::vector<std::unique_ptr<PgWaker>> wakers_;  // one LISTEN connection per relay
  std::vector<std::thread> threads_;
  mutable std::mutex mu_;  // guards results_, finished_
  std::condition_variable finished_cv_;
  std::vector<Status> results_;
  size_t finished_ = 0;
};

}  // namespace gapless

// mempool: the optional mempool watcher (`--mempool` on run, leader and index): publishes a
// transaction.pending event for each transaction the node reports as pending, straight to the
// buses (never through the outbox: a pending transaction is not indexed data, and it may never be
// mined).
//
// A leader duty like the relay (node/duties.h), on a DutyHost thread of its own, so in a fleet
// only the leader watches. A step: create the node's pending-transaction filter if there is none
// (eth_newPendingTransactionFilter), read what it collected since the last step
// (eth_getFilterChanges: transaction hashes), drop the hashes seen recently (a bounded set of the
// last `dedup_capacity` hashes: a node may report a hash again, and so may a new filter), fetch
// the new transactions (one eth_getTransactionByHash batch) and publish their events. The filter
// expires on the node when nobody polls it (a few minutes) or when the node restarts: any error of
// eth_getFilterChanges other than a transport failure drops the filter and the next step creates a
// new one.
//
// Event: transaction.pending, event_id = EventId(chain, "transaction.pending", hash), timestamp =
// when it was seen, payload {"chain_id", "hash", "transaction": the node's transaction object
// (null when it was mined or dropped before it could be fetched)}. Delivery is best effort at
// least once while the bus is up: events that a bus did not confirm are kept (up to
// max_unsent, oldest dropped first with a warning) and sent again at the next step.
//
// Thread-safety: Step on the host's thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "events/bus.h"
#include "node/duties.h"
#include "rpc/json_rpc.h"

namespace gapless {

struct MempoolOptions {
  uint64_t chain_id = 0;
  size_t dedup_capacity = 100'000;
  size_t max_unsent = 10'000;
  // The watcher's done() (the host ends when every duty is done): e.g. "the relays are done".
  std::function<bool()> done_when;
};

class MempoolWatcher : public Duty {
 public:
  // `rpc` and the publishers are borrowed.
  MempoolWatcher(JsonRpcClient* rpc, std::vector<Publisher*> publishers, MempoolOptions options);
  const char* name() const override { return "mempool"; }
  Status Step(uint64_t epoch) override;
  bool done() const override { return options_.done_when && options_.done_when(); }

  uint64_t published() const { return published_; }

 private:
  // True the first time `hash` is seen among the last dedup_capacity hashes.
  bool FirstSighting(const std::string& hash);

  JsonRpcClient* rpc_;
  std::vector<Publisher*> publishers_;
  MempoolOptions options_;
  std::string filter_id_;
  std::unordered_set<std::string> seen_;
  std::deque<std::string> seen_order_;
  // Per publisher: events it has not confirmed yet.
  std::vector<std::deque<OutgoingEvent>> unsent_;
  uint64_t published_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace gapless

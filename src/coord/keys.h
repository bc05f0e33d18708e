// Keys: every key of the coordination Redis, built here and only here.
//
// All keys of one chain and database share the prefix "gapless:{chain-<id>-db-<database id>}:"
// (store/state.h EnsureDatabaseId; "gapless:{chain-<id>}:" without one), whose {hash tag} puts
// them in one cluster slot, so any script may touch any of them and the same code runs on a single
// Redis, Sentinel or Redis Cluster. Scripts receive every key they touch in KEYS (none is built
// inside Lua), which is why per-task state lives in hashes keyed by task rather than in per-task
// keys.
//
// A task is a block range "from-to" (inclusive, decimal, from <= to), e.g. "100-149".
//
// Bounds (DESIGN.md principle 5: every key has a TTL or a bound):
//   pending, processing, queued   bounded by the tasks the seeder has issued and not completed;
//                                 the seeder keeps at most its look-ahead window outstanding.
//   leases, attempts              one field per task in processing / per task that has failed
//                                 and not yet completed; removed on complete, DLQ and requeue.
//   expiries                      one field per outstanding task whose lease has expired at
//                                 least once; removed on complete and DLQ (the janitor sends a
//                                 task to the DLQ at its max_expiries), reset by DLQ retry.
//   dlq                           one field per dead task; drained by `gapless dlq retry`.
//   completed                     trimmed below the frontier by frontier_advance.lua.
//   fence_counter, frontier       one integer each; fence_dataset one replication id.
//   rate_limit, heartbeat, rpc_pool, election_lock, range_lock, gap   carry a TTL.
//   election_epoch, election_meta, head_floor, head_incarnation, head_fork, leader_epoch,
//   leader_term, reorg_generation one value each.
//   head_log, head_heights        trimmed to the head-log window by election_write_head.lua.
//   registry, registry_expiries   one field / member per process that beat within its TTL, plus
//                                 dead ones not yet pruned: every beat prunes up to
//                                 Registry::kMaxPrunePerBeat expired entries (registry_beat.lua),
//                                 and List() prunes the dead ones it sees.
//   key_count_samples             at most KeyWatchOptions::max_samples (30) entries, LTRIMmed by
//                                 every write (key_watch_sample.lua), and a TTL (24 h) renewed
//                                 by each sample.
//
// Thread-safety: immutable after construction; safe to share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gapless {

class Keys {
 public:
  // database_id: the identity of the PostgreSQL database the fleet writes (EnsureDatabaseId), so
  // two databases indexing the same chain through one Redis keep apart queues, fences and
  // frontiers. Empty: the chain alone (tests and benchmarks that pick a chain id of their own).
  explicit Keys(int64_t chain_id, std::string_view database_id = {});

  int64_t chain_id() const { return chain_id_; }
  // "gapless:{chain-<id>-db-<database id>}:" — every key below starts with it.
  const std::string& prefix() const { return prefix_; }

  // --- work queue (queue.h) ---
  // List of task ids waiting to be claimed; claimed from the head (LEFT), pushed at the tail.
  std::string pending() const;
  // List of task ids claimed and not yet completed/failed/requeued (each has a lease field).
  std::string processing() const;
  // Set of every task id that is in pending or processing: makes Push idempotent in O(1).
  std::string queued() const;
  // Hash task -> lease, JSON {"worker":..., "token":N, "expires_ms":N} (expiry in Redis TIME
  // milliseconds). A field exists exactly while its task is in processing.
  std::string leases() const;
  // Hash task -> failed attempts so far (integer). Removed when the task completes or goes to
  // the DLQ.
  std::string attempts() const;
  // Hash task -> times the janitor took the task back because its lease expired (integer). At
  // the janitor's max_expiries the task goes to the DLQ, so a range that kills every worker
  // holding it stops circulating. Removed when the task completes or goes to the DLQ.
  std::string expiries() const;
  // Hash task -> dead letter, JSON {"error":..., "attempts":N, "worker":..., "failed_at_ms":N}.
  std::string dlq() const;
  // String, INCR: the fencing token counter. Never expires. Restarts from 0 when Redis loses its
  // data; the PostgreSQL side floors it (queue.h: Queue::FloorFenceCounter).
  std::string fence_counter() const;
  // String: the replication id of the Redis server on which fence_counter was last floored from
  // PostgreSQL (or first granted from); grants on another server are refused until it is floored
  // again (lua/fence_lib.lua). Never expires.
  std::string fence_dataset() const;

  // --- frontier (frontier.h) ---
  // Sorted set of completed ranges: member "from-to", score from. Trimmed below the frontier.
  std::string completed() const;
  // String: the next block not known complete (every block in [start, frontier) is done).
  std::string frontier() const;

  // --- rate limiter (rate_limiter.h) ---
  // Sorted set: sliding-window log of one RPC endpoint's requests; PEXPIREd to the window.
  // `endpoint` is a name or a hash of the URL chosen by the caller (never a URL with a secret).
  std::string rate_limit(std::string_view endpoint) const;

  // --- Kafka block source (range_lock.h) ---
  // String SET NX PX: the worker holding range `task` ("from-to") while it writes it; expires
  // with its holder's heartbeat.
  std::string range_lock(std::string_view task) const;
  // String with a TTL (a few leader ticks): the gap at the frontier the leader sees while blocks
  // come from a stream, JSON {"from":N,"to":N,"open_ms":N,"healing":bool}, for `status`.
  std::string gap() const;

  // --- fleet ---
  // String with a TTL (a few heartbeat intervals): the process is alive while it exists.
  std::string heartbeat(std::string_view worker) const;
  // String with a TTL (15 s past the process's last write): a fleet process's RPC endpoint pool
  // counts (rpc/endpoint_pool.h StatsJson), by process ("host:pid"), for `gapless status`, which
  // finds them with SCAN MATCH rpc_pool("*").
  std::string rpc_pool(std::string_view process) const;
  // Hash worker -> JSON (host, pid, current range, blocks/s) for `gapless status`.
  std::string registry() const;
  // Sorted set worker -> expiry (Redis TIME ms) of its registry entry: how a beat finds dead
  // entries to prune without scanning the hash.
  std::string registry_expiries() const;

  // --- memory watch (key_watch.h) ---
  // List, newest first: "<Redis TIME ms>:<DBSIZE>" samples of the coordination Redis's key count,
  // for the growth warning of `gapless status`.
  std::string key_count_samples() const;

  // --- HA leader (election.h). These live on every lock node (independent redis-servers), not
  // only on the coordination Redis; each node keeps its own copy and a quorum decides. ---
  // String SET NX PX: the owner id of the current leader on this node.
  std::string election_lock() const;
  // Integer: this node's epoch, INCRed by each promotion through it, healed up by the leader.
  std::string election_epoch() const;
  // Hash owner, epoch, since_ms: who was promoted through this node and when (for status).
  std::string election_meta() const;
  // Stream of head entries (height, hash, parent, epoch), in the order this node accepted them.
  std::string head_log() const;
  // Sorted set: score height, member "height:hash:parent:epoch". The O(log n) height index that
  // keeps one hash per height on this node.
  std::string head_heights() const;
  // Integer: heights at or below it were trimmed out of the window and are never written again.
  std::string head_floor() const;
  // String: set on the first write to this node's log; a new value means the node lost its data.
  std::string head_incarnation() const;
  // String "generation:fork point": the last re-org truncation this node applied (absent: none,
  // generation 0). Every head-log write carries the leader's fork; a node behind it truncates its
  // log above the fork point first, a node ahead of it refuses the write
  // (lua/election_write_head.lua).
  std::string head_fork() const;

  // --- on the coordination Redis ---
  // Integer: the highest leader epoch seen by a leader-only script (push, janitor, frontier
  // advance). Those scripts refuse a lower epoch: a deposed leader cannot act after its successor.
  std::string leader_epoch() const;
  // String: the epoch of the leader whose term set up the current state (written after its floors
  // are restored). A leader that finds another value (or none: Redis lost its data) starts its
  // term again.
  std::string leader_term() const;
  // Integer: the PostgreSQL re-org generation (store/rollback.h) whose rollback the coordination
  // state has followed (lua/reorg_reset.lua); absent: 0.
  std::string reorg_generation() const;

 private:
  int64_t chain_id_;
  std::string prefix_;
};

}  // namespace gapless

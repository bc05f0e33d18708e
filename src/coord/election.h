// Election: the HA leader's quorum operations on the lock nodes (seed 001, DESIGN "Leader election
// and the fenced head log") — promote, renew, release, write-head — and the head log as a reader
// sees it. The state machine that drives them (follower, promoting, leader) is coord/elector.h.
//
// Each operation runs one Lua script on every node at once (lock_nodes.h) and counts the nodes
// that accepted it; it takes effect when a quorum floor(N/2)+1 did. Why it is safe:
//  - promote (lua/election_promote.lua): SET NX + INCR epoch on each node. Two candidates cannot
//    both get a quorum of locks (any two quorums share a node, and SET NX lets one win there).
//    The token is the highest epoch of the promotion quorum. A promotion short of a quorum
//    releases the locks it took (the INCRs stay: harmless, they only move epochs up).
//  - the token is persisted (renew, which heals lower epochs up) on a quorum before it is used
//    anywhere else, so every later promotion quorum, which shares a node with this one, returns a
//    higher epoch: tokens used outside the lock nodes increase from leader to leader.
//  - write-head (lua/election_write_head.lua) checks owner, then epoch, then that no other hash
//    is stored at the entry's height, before writing anything; an entry is committed on a quorum.
//    Two quorums share a node, and that node refuses the second hash: no height ever has two
//    committed hashes. A paused leader's write fails on every node a newer leader was promoted
//    through: the owner check while the newer leader's lock is there, the epoch check after (a
//    free lock is retaken only where no newer promotion moved the epoch), so it cannot reach a
//    quorum.
// Lock TTLs and the validity window (TTL - elapsed - drift, drift = TTL/100 + 2 ms) give
// liveness only; no safety argument above uses a clock.
//
// Thread-safety: Election is immutable after construction and may be shared; its operations may
// run from several threads (LockNodes is thread-safe). HeadLogReader is not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "coord/keys.h"
#include "coord/lock_nodes.h"
#include "core/status.h"

namespace gapless {

// One block of the head log.
struct HeadEntry {
  uint64_t height = 0;
  std::string hash;
  std::string parent;
  uint64_t epoch = 0;  // of the leader that first wrote it (0 in entries not yet written)
  bool operator==(const HeadEntry& o) const {
    return height == o.height && hash == o.hash && parent == o.parent;
  }
};

// The head log's re-org generation (lua/election_write_head.lua): 0 until the first re-org; each
// re-org the leader handles is generation + 1 with the fork point, the highest height whose entry
// both forks share. Nodes at a lower generation drop their entries above the point when written
// (all of them when they missed more than one generation).
struct HeadFork {
  uint64_t generation = 0;
  int64_t point = -1;  // -1 with generation 0
  // "generation:point", as the nodes store it; Parse takes it back (generation 0 when malformed).
  std::string ToString() const;
  static HeadFork Parse(std::string_view text);
  bool operator==(const HeadFork&) const = default;
};

// The newest truncation among the forks the lock nodes answered with: the highest generation and,
// should nodes at it differ, the lowest point.
HeadFork NewestFork(std::span<const HeadFork> forks);
// The highest height at which a node at `node_generation` still votes for an entry when `newest`
// is the newest truncation any node applied: every height at the newest generation; one
// generation behind, the heights up to the newest fork point (the truncation it missed removed
// nothing there, and the write that brings it up keeps them); further behind, none (it missed a
// truncation whose point nobody may remember; the write that brings it up empties it). A node
// behind still answers: a truncation that reached one node only must not silence the others
// (chaos seed 323).
int64_t VotesUpTo(uint64_t node_generation, const HeadFork& newest);

// What one node answered.
enum class NodeVerdict {
  kOk,
  kLockHeld,    // promote: someone holds the lock there
  kNotOwner,    // renew/write/release: the lock there is not ours (expired or another's)
  kStaleEpoch,  // renew/write: the node saw a newer epoch
  kConflict,    // write: another hash is stored at one of the heights
  kForkBehind,  // write: the node applied a newer re-org truncation than the writer's fork
  kFailed,      // unreachable, timed out, or an error reply
};
const char* VerdictName(NodeVerdict v);

struct QuorumOutcome {
  std::vector<NodeVerdict> verdicts;  // per node
  std::vector<std::string> details;   // per node: holder, epoch, conflicting entry, error text
  size_t accepted = 0;                // nodes that answered OK
  bool quorum = false;                // accepted >= quorum
  uint64_t max_epoch = 0;             // promote: the highest epoch among the OK answers;
                                      // renew/write: the highest epoch a refusal reported
  int64_t elapsed_micros = 0;         // from sending to the last answer used
  HeadFork newer_fork;                // write: the newest fork a kForkBehind node reported
  // True when some node refused because another leader exists or was promoted since.
  bool deposed() const;
  // "3/3 (ok, ok, ok)" for logs.
  std::string Summary() const;
};

struct ElectionOptions {
  std::string owner;        // unique per process (host/pid/random), the lock's value
  int64_t ttl_ms = 3'000;   // lock TTL
  uint64_t window = 4'096;  // head-log heights kept on each node
};

class Election {
 public:
  // `nodes` is borrowed and must outlive the election.
  Election(LockNodes* nodes, Keys keys, ElectionOptions options);

  LockNodes& nodes() const { return *nodes_; }
  const Keys& keys() const { return keys_; }
  const ElectionOptions& options() const { return options_; }
  // TTL/100 + 2 ms (Redlock's allowance for clock drift between the nodes and us).
  int64_t drift_ms() const { return options_.ttl_ms / 100 + 2; }

  // Promote on every node. On a quorum, max_epoch is the token (NOT yet persisted: call Renew
  // with it). Short of a quorum the locks taken are released before returning.
  QuorumOutcome Promote() const;
  // Renew-if-owner with epoch healing (persists `token` on the nodes that accept).
  QuorumOutcome Renew(uint64_t token) const;
  // Release-if-owner everywhere (graceful stepdown).
  QuorumOutcome Release() const;
  // Write-head: appends `entries` (heights ascending) on every node and renews the lease there.
  // `fork` is the leader's re-org generation: a node at a lower one truncates its log above the
  // fork point first; a node at a higher one refuses (kForkBehind, newer_fork).
  QuorumOutcome WriteHead(uint64_t token, std::span<const HeadEntry> entries,
                          const HeadFork& fork = {}) const;

  // What one node holds, for status.
  struct NodeView {
    bool reachable = false;
    std::string error;
    std::string holder;  // "" when the lock is free
    int64_t lock_ttl_ms = -1;
    uint64_t epoch = 0;
    uint64_t since_ms = 0;    // when the holder was promoted through this node (Redis TIME)
    uint64_t log_length = 0;  // entries in the height index
    std::optional<uint64_t> top_height;
  };
  std::vector<NodeView> Views() const;

  // The hashes committed (present with one hash on a quorum of nodes) at heights [from, to],
  // read from every node's height index. A node behind the highest fork generation among the
  // answers (it missed a re-org truncation and still holds the old fork's entries) votes only as
  // VotesUpTo allows.
  // Heights with no committed entry are absent. Unavailable when fewer than a quorum of nodes
  // answered (nothing can be called committed then).
  Result<std::map<uint64_t, HeadEntry>> Committed(uint64_t from, uint64_t to) const;
  // The lowest height any answering node still keeps in its height index (the log keeps a
  // window: heights below are history it no longer holds), nullopt when every index is empty.
  // Unavailable when fewer than a quorum answered.
  Result<std::optional<uint64_t>> LowestHeight() const;

 private:
  std::string Script(const char* name) const;
  LockNodes* nodes_;
  Keys keys_;
  ElectionOptions options_;
};

// HeadLogReader: a follower's view of the head log, kept current by reading each node's log
// stream from a per-node cursor (lua/election_read_log.lua) and merging by height. A height is
// committed when one hash is on a quorum; entries below a quorum (a leader died mid-write, a node
// lost its data) are what Repair re-proposes after a promotion. A node whose log incarnation
// changed lost its data: its cursor restarts and its old entries no longer count.
class HeadLogReader {
 public:
  explicit HeadLogReader(const Election* election);

  // Reads what is new on every reachable node (up to `max_per_node` entries each). Returns how
  // many entries were read; Unavailable when fewer than a quorum answered.
  Result<size_t> Sync(size_t max_per_node = 10'000);

  // The highest height committed, with its entry (nullopt while nothing is).
  std::optional<HeadEntry> CommittedTip() const;
  // Entries on fewer than a quorum of the nodes that answered the last Sync (committed once, but
  // a node lost its data or is down; or a leader died mid-write), to re-propose (seed 001
  // §4.4), all on one chain: the committed tip's ancestors by parent links, and above the tip
  // what chains onto it, the highest epoch first, then the longest chain. Ascending. Within the
  // window.
  std::vector<HeadEntry> SubQuorum() const;
  // The committed entry at a height, if any.
  std::optional<HeadEntry> CommittedAt(uint64_t height) const;
  // The highest fork generation seen on any node (with its point). Nodes at a lower generation
  // missed a truncation: their entries vote only as VotesUpTo allows until a write brings them
  // up. Never goes down (a node that lost its data forgets its truncation; the reader does not).
  const HeadFork& fork() const { return fork_; }

 private:
  struct Candidate {
    HeadEntry entry;         // epoch = the highest epoch seen for this hash
    uint64_t node_mask = 0;  // nodes that hold it
  };
  void Prune();

  const Election* election_;
  std::vector<std::string> cursors_;       // per node: last stream id read, "-" = none
  std::vector<std::string> incarnations_;  // per node
  std::vector<uint64_t> node_forks_;       // per node: the generation it last answered with
  HeadFork fork_;
  uint64_t reachable_mask_ = 0;  // nodes that answered the last Sync
  std::map<uint64_t, std::vector<Candidate>> by_height_;
};

}  // namespace gapless

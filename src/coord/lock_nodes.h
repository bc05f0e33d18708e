// LockNodes: N independent redis-servers used as a quorum (the HA leader's lock nodes, seed 001):
// one connection per node, every operation sent to all nodes at once and answered by each within a
// per-node timeout. No node replicates to another; agreement comes from quorums of
// floor(N/2) + 1, any two of which share a node.
//
// Each node has a thread of its own that owns its RedisConn (hiredis is blocking), so a slow or
// dead node costs the caller at most the node timeout and never delays the answers of the others.
// The connection's socket timeouts are the node timeout too, and it makes one attempt per
// operation (no retries or backoff inside: the next operation reconnects), so a node thread is
// never stuck for long. Operations of several callers queue per node; a node stuck on one for
// longer than the node timeout answers the next Unavailable at once rather than queueing it.
// An operation may refer to its caller's locals: one not started by the node timeout is never
// started, and All/Each wait for those already running (bounded by the socket timeouts) before
// they return, so no operation outlives its call.
//
// Thread-safety: All/Each may be called from several threads at once (each call waits for its own
// answers); the class is safe to share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coord/redis.h"
#include "core/status.h"

namespace gapless {

struct LockNodesOptions {
  // How long an operation waits for each node (and the nodes' socket timeouts).
  int64_t node_timeout_ms = 100;
  // TCP connect timeout; by default the node timeout.
  int64_t connect_timeout_ms = 0;
};

class LockNodes {
 public:
  // One Redis operation on one node's connection.
  using Op = std::function<Result<RedisReply>(RedisConn&)>;

  // Parses the URLs and starts the node threads; connections are opened by the first operation
  // (and re-opened by later ones after a failure), so Open succeeds with nodes down.
  // FailedPrecondition for an empty list, an even number of nodes (a quorum of an even N
  // tolerates no more failures than N-1 nodes), a duplicate or bad URL.
  static Result<std::unique_ptr<LockNodes>> Open(const std::vector<std::string>& urls,
                                                 LockNodesOptions options = {});
  ~LockNodes();
  LockNodes(const LockNodes&) = delete;
  LockNodes& operator=(const LockNodes&) = delete;

  size_t size() const { return nodes_.size(); }
  size_t quorum() const { return nodes_.size() / 2 + 1; }
  // "host:port" of node i (never a password).
  const std::string& describe(size_t i) const;
  // Node i's URL as given (may hold a password: never log it).
  const std::string& url(size_t i) const;
  const LockNodesOptions& options() const { return options_; }

  // Runs `op` on every node at once and waits for all answers or the node timeout. Element i is
  // node i's answer, or Unavailable naming the node when it did not answer in time.
  std::vector<Result<RedisReply>> All(const Op& op);
  // Like All with a different operation per node: make(i) gives node i's.
  std::vector<Result<RedisReply>> Each(const std::function<Op(size_t)>& make);

 private:
  struct Node;
  struct Batch;
  LockNodes(std::vector<std::unique_ptr<Node>> nodes, LockNodesOptions options);

  std::vector<std::unique_ptr<Node>> nodes_;
  LockNodesOptions options_;
};

// Splits "redis://a:1,redis://b:2" on commas (spaces around items are dropped); a piece without
// "://" continues the URL before it, so "kafka://h1:9092,h2:9092,redis://r" is two URLs and so is
// "redis://p:6379,r:6380/2,redis://n:6379" (a multi-server Redis URL, RedisUrl, stays whole).
std::vector<std::string> SplitUrlList(const std::string& text);

}  // namespace gapless

#include "coord/lock_nodes.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace gapless {

// The answers of one All/Each call, shared by the caller and the node threads. An operation is
// the caller's code and may refer to the caller's locals, so once the caller stops waiting
// (`closed`) no operation of the batch starts, and the caller waits for those still running
// (`running`; each is bounded by the connection's timeouts) before it returns.
struct LockNodes::Batch {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<Result<RedisReply>>> results;
  size_t answered = 0;
  size_t running = 0;
  bool closed = false;
};

struct LockNodes::Node {
  struct Job {
    Op op;
    std::shared_ptr<Batch> batch;
    size_t index = 0;
  };

  std::string url;
  std::string describe;
  std::unique_ptr<RedisConn> conn;  // used by the node thread only
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> jobs;
  bool busy = false;
  std::chrono::steady_clock::time_point busy_since;
  bool stop = false;
  std::thread thread;

  void Loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || !jobs.empty(); });
        if (stop) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      {
        std::lock_guard lock(job.batch->mu);
        if (job.batch->closed) continue;  // its caller had stopped waiting: never started
        ++job.batch->running;
      }
      {
        std::lock_guard lock(mu);
        busy = true;
        busy_since = std::chrono::steady_clock::now();
      }
      Result<RedisReply> r = job.op(*conn);
      {
        std::lock_guard lock(mu);
        busy = false;
      }
      std::lock_guard lock(job.batch->mu);
      job.batch->results[job.index] = std::move(r);
      ++job.batch->answered;
      --job.batch->running;
      job.batch->cv.notify_all();
    }
  }
};

std::vector<std::string> SplitUrlList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) {
      item = item.substr(b, e - b + 1);
      // A piece without a scheme continues the URL before it (kafka://h1:9092,h2:9092).
      if (!out.empty() && item.find("://") == std::string::npos) {
        out.back() += "," + item;
      } else {
        out.push_back(std::move(item));
      }
    }
    start = comma + 1;
  }
  return out;
}

Result<std::unique_ptr<LockNodes>> LockNodes::Open(const std::vector<std::string>& urls,
                                                   LockNodesOptions options) {
  if (urls.empty()) return FailedPrecondition("lock nodes: no URL given");
  if (urls.size() % 2 == 0) {
    return FailedPrecondition(fmt::format(
        "lock nodes: {} given; use an odd number (1, 3 or 5): a quorum of {} tolerates no more "
        "failed nodes than {} would",
        urls.size(), urls.size(), urls.size() - 1));
  }
  if (options.node_timeout_ms <= 0)
    return FailedPrecondition("lock nodes: node timeout must be > 0");
  if (options.connect_timeout_ms <= 0) options.connect_timeout_ms = options.node_timeout_ms;
  RedisOptions redis_options;
  redis_options.connect_timeout_ms = options.connect_timeout_ms;
  redis_options.command_timeout_ms = options.node_timeout_ms;
  redis_options.max_attempts = 1;
  std::set<std::string> seen;
  std::vector<std::unique_ptr<Node>> nodes;
  for (const std::string& url : urls) {
    GAPLESS_ASSIGN_OR_RETURN(auto conn, RedisConn::Connect(url, redis_options,
                                                           /*connect_now=*/false));
    std::string describe = conn->Describe();
    // A node given as several servers (a primary and its replicas) is one node: no server may
    // appear in two nodes, or one server would count twice towards the quorum.
    for (const RedisUrl::Host& host : conn->url().hosts) {
      if (!seen.insert(host.Describe()).second) {
        return FailedPrecondition("lock nodes: " + host.Describe() + " is given twice");
      }
    }
    auto node = std::make_unique<Node>();
    node->url = url;
    node->describe = std::move(describe);
    node->conn = std::move(conn);
    nodes.push_back(std::move(node));
  }
  return std::unique_ptr<LockNodes>(new LockNodes(std::move(nodes), options));
}

LockNodes::LockNodes(std::vector<std::unique_ptr<Node>> nodes, LockNodesOptions options)
    : nodes_(std::move(nodes)), options_(options) {
  for (auto& node : nodes_) {
    Node* n = node.get();
    n->thread = std::thread([n] { n->Loop(); });
  }
}

LockNodes::~LockNodes() {
  for (auto& node : nodes_) {
    {
      std::lock_guard lock(node->mu);
      node->stop = true;
    }
    node->cv.notify_all();
  }
  for (auto& node : nodes_) node->thread.join();
}

const std::string& LockNodes::describe(size_t i) const { return nodes_[i]->describe; }
const std::string& LockNodes::url(size_t i) const { return nodes_[i]->url; }

std::vector<Result<RedisReply>> LockNodes::All(const Op& op) {
  return Each([&](size_t) { return op; });
}

std::vector<Result<RedisReply>> LockNodes::Each(const std::function<Op(size_t)>& make) {
  auto batch = std::make_shared<Batch>();
  batch->results.resize(nodes_.size());
  size_t expected = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = *nodes_[i];
    std::lock_guard lock(node.mu);
    if (node.busy && std::chrono::steady_clock::now() - node.busy_since >
                         std::chrono::milliseconds(options_.node_timeout_ms)) {
      // Stuck on an earlier operation that outlived its timeout: do not queue behind it. (Other
      // callers' operations in progress are queued behind: each takes microseconds.)
      std::lock_guard block(batch->mu);
      batch->results[i] =
          Unavailable("lock node " + node.describe + ": busy with an earlier operation");
      continue;
    }
    node.jobs.push_back(Node::Job{make(i), batch, i});
    node.cv.notify_one();
    ++expected;
  }
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.node_timeout_ms);
  std::unique_lock lock(batch->mu);
  batch->cv.wait_until(lock, deadline, [&] { return batch->answered == expected; });
  // No operation of this call starts from now on, and none is left running (see Batch).
  batch->closed = true;
  batch->cv.wait(lock, [&] { return batch->running == 0; });
  std::vector<Result<RedisReply>> out;
  out.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (batch->results[i].has_value()) {
      out.push_back(std::move(*batch->results[i]));
    } else {
      out.push_back(Unavailable(fmt::format("lock node {}: no answer within {} ms",
                                            nodes_[i]->describe, options_.node_timeout_ms)));
    }
  }
  return out;
}

}  // namespace gapless

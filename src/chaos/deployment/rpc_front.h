// rpc_front: the RPC node as one gapless process of a chaos deployment sees it, an HTTP server
// that forwards every request to anvil and that the `rpc` faults make answer badly (429, 5xx,
// truncated or malformed bodies, gone, or another hash for one block), and the `rpc-other-chain`
// fault makes answer as another chain (OtherChain). Each process has its own;
// each worker also has a spare one that no fault targets (its RPC pool's second endpoint).
//
// Thread-safety: Set may be called from any thread while the server's threads answer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "testing/http_test_server.h"

namespace gapless::chaos {

// The name suffix of a worker's spare RPC front (its pool's second endpoint).
inline constexpr const char* kSpareSuffix = "/spare";

// A worker's own RPC front (a fault target), not its spare.
bool IsWorkerFront(const std::string& name);

// The front's "other-chain" mode, one JSON-RPC body at a time: every 32-byte value ("0x" and 64
// hex digits: block, parent, transaction and log hashes, roots, topics, words) has each hex digit
// complemented (d -> 15 - d), in requests and answers alike, and eth_chainId answers the real id
// plus kOtherChainOffset. The complement is its own inverse and has no fixed point, so the front
// is a consistent chain of its own: block 0 and every block have other hashes that chain to each
// other, and a request by one of its hashes (debug_traceBlockByHash) reaches the real block.
inline constexpr uint64_t kOtherChainOffset = 0x10000;
std::string ComplementWords(std::string body);
// `answer` with the result of every eth_chainId call of `request` (an object or a batch) moved
// by kOtherChainOffset; the answer as it was when either does not parse.
std::string OtherChainId(const std::string& request, const std::string& answer);

// The RPC node as one process sees it: an HTTP server forwarding every request to anvil, which a
// fault makes answer badly (every other request while the fault lasts, so work still moves).
class RpcFront {
 public:
  explicit RpcFront(std::string upstream) : upstream_(std::move(upstream)) {
    server_ = std::make_unique<HttpTestServer>(
        [this](const HttpTestServer::Request& req) { return Handle(req); });
  }
  int port() const { return server_->port(); }
  // mode: "" (healthy), or a fault mode of schedule.h; other-hash serves block `height` (mined
  // later, when it is: the process is about to fetch it) under `fake` instead of its real hash;
  // other-chain answers every request as another chain (OtherChain).
  void Set(std::string mode, uint64_t height = 0, std::string fake = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    mode_ = std::move(mode);
    height_ = height;
    real_.clear();
    fake_ = std::move(fake);
  }

 private:
  HttpTestServer::Response Handle(const HttpTestServer::Request& req);

  std::string upstream_;
  std::unique_ptr<HttpTestServer> server_;
  std::mutex mu_;
  std::string mode_, real_, fake_;
  std::atomic<uint64_t> height_{0};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace gapless::chaos

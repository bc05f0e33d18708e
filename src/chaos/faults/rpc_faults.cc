// rpc_faults: the `rpc` fault (faults.h): a process's RPC front answers badly (429, 5xx,
// truncated or malformed bodies every other request, or not at all: down) until healed; or, mode
// other-hash, every worker's front serves a block about to be fetched under another hash; and the
// `rpc-other-chain` fault: one worker's front (its pool's first endpoint) answers as another chain.
#include <fmt/format.h>

#include "chaos/faults/faults.h"

namespace gapless::chaos {
namespace {

class RpcFault : public FaultType {
 public:
  explicit RpcFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    auto it = d_->rpc_fronts_.find(f.target);
    if (it == d_->rpc_fronts_.end()) return;
    if (f.mode != "other-hash") {
      it->second->Set(f.mode);
      return;
    }
    // The worker's backend serves a block it is about to fetch (two above the tip) under
    // another hash, consistently: the block's hash, its receipts' blockHash and the next
    // block's parentHash. Only the head log can tell.
    // Every worker's front does (a load-balanced backend that lags), so whoever fetches the
    // block gets it first; not the spares, the healthy endpoint each worker's pool refetches
    // from (with them too, every endpoint of every pool served the other hash for the fault's
    // seconds: the range was dead-lettered, seed 5 with --scenario rpc,kill,reorg at ef967ca).
    // Healed with the target's.
    const uint64_t height = d_->Tip() + 2;
    for (auto& [name, front] : d_->rpc_fronts_) {
      if (IsWorkerFront(name)) front->Set(f.mode, height, "0x" + std::string(64, 'e'));
    }
    d_->Note(fmt::format("  other-hash at block {}, for every worker's front", height));
  }
  bool Heal(const Fault& f) override {
    for (auto& [name, front] : d_->rpc_fronts_) {
      if (name == f.target || (f.mode == "other-hash" && IsWorkerFront(name))) front->Set("");
    }
    return true;
  }

 private:
  Deployment* d_;
};

// The target's front, its pool's first endpoint, turns into another chain's node (a load balancer
// that routes to a backend of another network, a devnet restarted behind the URL): another chain
// id, another block 0, every block under other hashes that chain to each other
// (deployment/rpc_front.h OtherChain). Its spare stays on the real chain. Nothing of the other
// chain may be stored: canonical-chain and equals-clean-run compare every stored block with the
// node's. The pool meets it as an endpoint in service whose blocks are not the head log's (the
// range fails, the endpoint is distrusted, then taken out), and its chain check, when the endpoint
// is asked again or the worker restarts meanwhile (the first endpoint of the list that answers
// settles a pool's chain: then the worker's database binding refuses it).
class RpcOtherChainFault : public FaultType {
 public:
  explicit RpcOtherChainFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    auto it = d_->rpc_fronts_.find(f.target);
    if (it == d_->rpc_fronts_.end()) return;
    it->second->Set("other-chain");
    d_->Note(fmt::format("  {}'s first endpoint serves chain id + {:#x}, every hash complemented",
                         f.target, kOtherChainOffset));
  }
  bool Heal(const Fault& f) override {
    auto it = d_->rpc_fronts_.find(f.target);
    if (it == d_->rpc_fronts_.end()) return false;
    it->second->Set("");
    return true;
  }

 private:
  Deployment* d_;
};

}  // namespace

std::unique_ptr<FaultType> MakeRpcFault(Deployment* d) { return std::make_unique<RpcFault>(d); }
std::unique_ptr<FaultType> MakeRpcOtherChainFault(Deployment* d) {
  return std::make_unique<RpcOtherChainFault>(d);
}

}  // namespace gapless::chaos

// chain_faults: the faults on the chain (faults.h), neither healed. reorg: anvil re-orgs the
// chain `depth` deep with new transactions in the new fork; every second one first moves the head
// on a minority of the lock nodes (HeadOnAMinority), so that only the head log's height check
// keeps a node from holding two hashes at a height. flip-flop: fork A is mined and indexed, fork
// B replaces it and is indexed, then A comes back exactly (its transactions, timestamps and base
// fees) with a block on top. Both long ones run off the fault loop (Deployment::chain_ops_),
// holding the chain; a re-org drawn meanwhile is skipped.
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "chaos/faults/faults.h"
#include "coord/keys.h"
#include "store/state.h"

namespace gapless::chaos {
namespace {

// The leaders are cut off from two of the three lock nodes for a second while the chain moves,
// so the leader writes new heads to one node only; the chain then re-orgs under them, and the
// links come back. The leader's next write puts the new fork's hashes at heights that node holds
// with the old one: only the head log's height check keeps it from holding two.
void HeadOnAMinority(Deployment& d, const Fault& f) {
  // Both leader candidates lose lock-2 and lock-3 (a black hole, so neither can be promoted
  // meanwhile); lock-1 still answers. The leader goes on writing the new heads there alone.
  std::vector<TcpProxy*> cut;
  for (const auto& [name, link] : d.links_) {
    if (name.rfind("leader", 0) == 0 && (name.ends_with(">lock-2") || name.ends_with(">lock-3"))) {
      link->Pause();
      cut.push_back(link.get());
    }
  }
  d.Note("targeted: the head moves on a minority: the leaders are cut off from lock-2 and lock-3");
  // With the re-org below, shorter than the leader's lease (1.5 s): it is still the leader when
  // the links come back (a new leader would first repair the minority's heads onto a quorum).
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  auto conn = d.pool_->Acquire();
  auto id = EnsureDatabaseId(*conn);
  const Keys keys(static_cast<int64_t>(kChainId), id.ok() ? *id : "");
  auto top = [&](size_t node) -> int64_t {
    auto redis = RedisConn::Connect(d.lock_nodes_[node]->url());
    if (!redis.ok()) return -1;
    auto r = (*redis)->Command({"ZRANGE", keys.head_heights(), "-1", "-1", "WITHSCORES"});
    if (!r.ok() || r->elements.size() < 2) return -1;
    return std::stoll(r->elements[1].str);
  };
  const int64_t minority = top(0), quorum = std::max(top(1), top(2));
  {
    std::unique_lock<std::mutex> lock(d.chain_mu_, std::try_to_lock);
    if (lock.owns_lock()) {
      auto rpc = Rpc(d.anvil_url_);
      auto n = rpc->BlockNumber();
      const uint64_t tip = n.ok() ? *n : 0;
      // Every height above what a quorum holds goes, those lock-1 holds alone with them.
      uint64_t depth = f.depth;
      if (quorum >= 0 && tip > static_cast<uint64_t>(quorum)) {
        depth = std::clamp<uint64_t>(tip - static_cast<uint64_t>(quorum), 1, 16);
      }
      d.Note(
          fmt::format("  lock-1 holds heights up to {}, a quorum up to {}; the chain re-orgs {} "
                      "deep under tip {}",
                      minority, quorum, depth, tip));
      d.ReorgChain(*rpc, depth, f.at_ms);
      // The leader meets the new fork at heights lock-1 holds with the old one.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } else {
      d.Note("  the re-org skipped: a flip-flop holds the chain");
    }
  }
  // The partition ends with the connections reset: what the black hole held is lost, as a
  // network partition loses it (delivered late, the old heads would reach a quorum).
  for (TcpProxy* l : cut) {
    l->CloseAll();
    l->Resume();
  }
  d.Note("healed: the leaders reach lock-2 and lock-3 again");
}

void FlipFlop(Deployment& d, const Fault& f) {
  std::lock_guard<std::mutex> lock(d.chain_mu_);
  auto rpc = Rpc(d.anvil_url_);
  simdjson::dom::parser parser;
  auto call = [&](const std::string& method, const std::string& params) {
    auto r = rpc->Call(method, params);
    if (!r.ok()) d.Note("  flip-flop: " + method + " failed: " + r.status().ToString());
    return r.ok() ? *r : std::string();
  };
  auto unquote = [](const std::string& s) {
    return s.size() >= 2 && s.front() == '"' ? s.substr(1, s.size() - 2) : s;
  };
  // A block as mined: what replaying it needs, and its hash to compare.
  struct Mined {
    uint64_t number = 0;
    std::string hash, timestamp, base_fee;
    std::vector<std::string> raw;  // signed transactions, in block order
  };
  auto mine = [&](const std::string& tx) -> Mined {
    Mined m;
    if (!tx.empty()) call("eth_sendTransaction", "[" + tx + "]");
    call("evm_mine", "[]");
    const std::string block = call("eth_getBlockByNumber", R"(["latest",false])");
    simdjson::dom::element doc;
    std::string_view v;
    if (parser.parse(block).get(doc)) return m;
    if (!doc["hash"].get_string().get(v)) m.hash = std::string(v);
    if (!doc["timestamp"].get_string().get(v)) m.timestamp = std::string(v);
    if (!doc["baseFeePerGas"].get_string().get(v)) m.base_fee = std::string(v);
    if (!doc["number"].get_string().get(v)) m.number = std::stoull(std::string(v), nullptr, 16);
    simdjson::dom::array txs;
    std::vector<std::string> hashes;
    if (!doc["transactions"].get_array().get(txs)) {
      for (auto t : txs) {
        if (!t.get_string().get(v)) hashes.emplace_back(v);
      }
    }
    for (const std::string& h : hashes) {
      m.raw.push_back(unquote(call("eth_getRawTransactionByHash", "[\"" + h + "\"]")));
    }
    return m;
  };
  const std::string snapshot = call("evm_snapshot", "[]");
  if (snapshot.empty()) return;
  call("anvil_setAutomine", "[false]");
  // Fork A: depth blocks, each with a token transfer; indexed before it goes away.
  std::vector<Mined> a;
  for (uint64_t i = 0; i < f.depth; ++i) {
    a.push_back(mine(TokenCall(d.account0_, d.emitter_, d.account1_, 5'000 + d.seed_ * 10 + i)));
  }
  const uint64_t fork_point = a.front().number;
  d.Note(fmt::format("  flip-flop: fork A is blocks {}..{}", fork_point, a.back().number));
  if (!d.WaitStored(a.back().hash)) d.Note("  flip-flop: fork A was not indexed within 20 s");
  // Fork B, one block longer, other transfers: A is orphaned.
  call("evm_revert", "[" + snapshot + "]");
  const std::string again = call("evm_snapshot", "[]");
  std::vector<Mined> b;
  for (uint64_t i = 0; i <= f.depth; ++i) {
    b.push_back(mine(TokenCall(d.account0_, d.emitter_, d.account0_, 7'000 + d.seed_ * 10 + i)));
  }
  if (d.kafka_source_) d.ProduceAgainFrom(fork_point);
  d.Note(fmt::format("  flip-flop: fork B is blocks {}..{}", fork_point, b.back().number));
  if (!d.WaitStored(b.back().hash)) d.Note("  flip-flop: fork B was not indexed within 20 s");
  // A again, exactly: its transactions, timestamps and base fees; then a block on top.
  call("evm_revert", "[" + again + "]");
  std::string differs;
  for (const Mined& m : a) {
    call("anvil_setNextBlockBaseFeePerGas", "[\"" + m.base_fee + "\"]");
    call("evm_setNextBlockTimestamp", "[\"" + m.timestamp + "\"]");
    for (const std::string& raw : m.raw) call("eth_sendRawTransaction", "[\"" + raw + "\"]");
    const Mined back = mine("");
    if (back.hash != m.hash && differs.empty()) {
      differs = fmt::format("block {} came back as {}, not {}", m.number, back.hash, m.hash);
    }
  }
  mine(fmt::format(R"({{"from":"{}","to":"{}","value":"0x1"}})", d.account0_, d.account1_));
  call("anvil_setAutomine", "[true]");
  if (d.kafka_source_) d.ProduceAgainFrom(fork_point);
  d.Note(differs.empty() ? fmt::format("  flip-flop: fork A is back with its exact blocks {}..{}",
                                       fork_point, a.back().number)
                         : "  flip-flop: A did not come back exactly: " + differs);
}

class ReorgFault : public FaultType {
 public:
  explicit ReorgFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    // Every second re-org is one of the head log's: the head moves on a minority first.
    if (reorg_faults_++ % 2 == 1) {
      Deployment* d = d_;
      d_->chain_ops_.emplace_back([d, f] { HeadOnAMinority(*d, f); });
      return;
    }
    std::unique_lock<std::mutex> lock(d_->chain_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      d_->Note("  skipped: a flip-flop holds the chain");
      return;
    }
    d_->ReorgChain(*d_->rpc_, f.depth, f.at_ms);
  }

 private:
  Deployment* d_;
  int reorg_faults_ = 0;
};

class FlipFlopFault : public FaultType {
 public:
  explicit FlipFlopFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    Deployment* d = d_;
    d_->chain_ops_.emplace_back([d, f] { FlipFlop(*d, f); });
  }

 private:
  Deployment* d_;
};

}  // namespace

std::unique_ptr<FaultType> MakeReorgFault(Deployment* d) { return std::make_unique<ReorgFault>(d); }
std::unique_ptr<FaultType> MakeFlipFlopFault(Deployment* d) {
  return std::make_unique<FlipFlopFault>(d);
}

}  // namespace gapless::chaos

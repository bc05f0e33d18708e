// chain: the anvil chain of a chaos deployment (deployment.h): anvil started with the emitter
// contract, the traffic (a token transfer every 300 ms, a value transfer every third), re-orgs
// with new transactions in the new fork, and with the Kafka source the block producer that
// follows the chain (`gapless produce` every 300 ms, again from the fork point after a re-org).
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>

#include "chaos/deployment/deployment.h"
#include "testing/child_process.h"
#include "testing/free_port.h"

namespace gapless::chaos {

Status Deployment::StartChain() {
  const int port = FreePort();
  anvil_url_ = fmt::format("http://127.0.0.1:{}", port);
  anvil_pid_ = SpawnChild({options_.anvil_bin, "--port", std::to_string(port), "--silent"},
                          dir_ + "/anvil.log");
  rpc_ = Rpc(anvil_url_);
  for (int i = 0; i < 300 && !rpc_->ChainId().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  GAPLESS_RETURN_IF_ERROR(rpc_->ChainId().status().WithContext("anvil did not start"));
  GAPLESS_ASSIGN_OR_RETURN(std::string accounts, rpc_->Call("eth_accounts", "[]"));
  size_t a = accounts.find("0x");
  size_t b = accounts.find("0x", a + 42);
  if (a == std::string::npos || b == std::string::npos) return Internal("anvil: no accounts");
  account0_ = accounts.substr(a, 42);
  account1_ = accounts.substr(b, 42);
  GAPLESS_ASSIGN_OR_RETURN(emitter_, Deploy(EmitterInitCode()));
  // The factory (the contracts mode's children): every call creates an emitter and logs
  // ChildCreated(child).
  GAPLESS_ASSIGN_OR_RETURN(factory_, Deploy(FactoryInitCode()));
  return rpc_->Call("anvil_mine", R"(["0x28"])").status();
}

Result<std::string> Deployment::Deploy(const std::string& init_code) {
  GAPLESS_ASSIGN_OR_RETURN(
      std::string sent,
      rpc_->Call("eth_sendTransaction",
                 R"([{"from":")" + account0_ + R"(","data":"0x)" + init_code + R"("}])"));
  const std::string hash = sent.substr(1, sent.size() - 2);
  for (int i = 0; i < 100; ++i) {
    auto receipt = rpc_->Call("eth_getTransactionReceipt", "[\"" + hash + "\"]");
    size_t at = receipt.ok() ? receipt->find("\"contractAddress\":\"") : std::string::npos;
    if (at != std::string::npos) return receipt->substr(at + 19, 42);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Internal("anvil: a contract was not mined");
}

std::string TokenCall(const std::string& from, const std::string& emitter, const std::string& to,
                      uint64_t amount) {
  return fmt::format(R"({{"from":"{}","to":"{}","data":"0x{:064x}{}{}"}})", from, emitter, amount,
                     std::string(24, '0'), to.substr(2));
}

void Deployment::StartTraffic() {
  traffic_ = std::thread([this] {
    uint64_t n = 1;
    auto rpc = Rpc(anvil_url_);
    while (!traffic_stop_.load()) {
      {
        std::lock_guard<std::mutex> lock(chain_mu_);
        (void)rpc->Call("eth_sendTransaction",
                        "[" + TokenCall(account0_, emitter_, account1_, n) + "]");
        // The contracts mode's factory: a child every 10th round (up to 12), and every second
        // round a transfer on one of them (a child orphaned by a re-org logs nothing: no code).
        if (contracts_ && n % 10 == 5 && children_.size() < 12) MakeChild(*rpc);
        if (contracts_ && n % 2 == 0 && !children_.empty()) {
          (void)rpc->Call(
              "eth_sendTransaction",
              "[" + TokenCall(account0_, children_[n / 2 % children_.size()], account1_, 500 + n) +
                  "]");
        }
        if (n % 3 == 0) {
          (void)rpc->Call("eth_sendTransaction",
                          fmt::format(R"([{{"from":"{}","to":"{}","value":"0x{:x}"}}])", account0_,
                                      account1_, n));
        }
      }
      ++n;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
}

void Deployment::StopTraffic() {
  traffic_stop_ = true;
  if (traffic_.joinable()) traffic_.join();
}

void Deployment::StartProducer() {
  producer_ = std::thread([this] {
    auto rpc = Rpc(anvil_url_);
    while (!producer_stop_.load()) {
      uint64_t from = 0, generation = 0;
      {
        std::lock_guard<std::mutex> lock(produce_mu_);
        from = produce_from_;
        generation = produce_generation_;
      }
      auto tip = rpc->BlockNumber();
      if (tip.ok() && *tip >= from) {
        pid_t pid = SpawnChild(
            {options_.gapless_bin, "produce", "--rpc", anvil_url_, "--brokers", kafka_->bootstrap(),
             "--topic", kBlockTopic, "--from", std::to_string(from), "--to", std::to_string(*tip),
             "--window", "5", "--batch", "20", "--log-level", "warn"},
            dir_ + "/producer.log");
        producer_pid_ = pid;
        const int code = WaitForExit(pid, 120);
        producer_pid_ = -1;
        std::lock_guard<std::mutex> lock(produce_mu_);
        // A re-org while it ran: its fork point is where the next round starts.
        if (code == 0 && produce_generation_ == generation) produce_from_ = *tip + 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
}

void Deployment::StopProducer() {
  producer_stop_ = true;
  if (pid_t pid = producer_pid_.load(); pid > 0) kill(pid, SIGKILL);
  if (producer_.joinable()) producer_.join();
}

void Deployment::ProduceAgainFrom(uint64_t fork_point) {
  std::lock_guard<std::mutex> lock(produce_mu_);
  produce_from_ = std::min(produce_from_, fork_point);
  ++produce_generation_;
}

bool Deployment::WaitStored(const std::string& hash) {
  for (int i = 0; i < 100 && !traffic_stop_.load(); ++i) {
    auto conn = pool_->Acquire();
    auto r =
        conn->Query("SELECT count(*) FROM blocks WHERE hash = decode($1, 'hex')", {hash.substr(2)});
    if (r.ok() && r->GetInt64(0, 0).value() > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

void Deployment::ReorgChain(JsonRpcClient& rpc, uint64_t depth, int64_t salt) {
  auto n = rpc.BlockNumber();
  const uint64_t tip = n.ok() ? *n : 0;
  // Never below block 2: the emitter contract (block 1) stays.
  depth = std::min<uint64_t>(depth, tip > 2 ? tip - 2 : 1);
  // The new fork carries other transactions: a token transfer and a value transfer.
  const std::string txs =
      fmt::format(R"([[{},0],[{{"from":"{}","to":"{}","value":"0x{:x}"}},{}]])",
                  TokenCall(account0_, emitter_, account0_, 1000 + seed_ % 1000), account0_,
                  account1_, 7 + salt % 100, depth > 1 ? 1 : 0);
  auto r = rpc.Call("anvil_reorg", fmt::format("[{}, {}]", depth, txs));
  if (!r.ok()) Note("  anvil_reorg failed: " + r.status().ToString());
  if (r.ok() && kafka_source_) ProduceAgainFrom(tip - depth + 1);
}

}  // namespace gapless::chaos

// contracts: the contracts mode of a chaos deployment (HarnessOptions::contracts, docs/chaos.md):
// the hand-assembled emitter and factory, the children the traffic makes, and the contracts config
// the fleet and the clean run index with.
#include <fmt/format.h>

#include <fstream>

#include "chaos/deployment/deployment.h"
#include "core/keccak.h"

namespace gapless::chaos {
namespace {

// topic 0 of Transfer(address,address,uint256).
constexpr const char* kTransferTopic =
    "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

// The deploy code of a runtime of at most 255 bytes: CODECOPY it to memory 0, RETURN it.
std::string InitCodeOf(const std::string& runtime) {
  return fmt::format("60{:02x}80600b6000396000f3", runtime.size() / 2) + runtime;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

}  // namespace

std::string EmitterInitCode() {
  // Every call logs Transfer(caller, calldata[32..64], calldata[0..32]): CALLDATACOPY the amount
  // to memory 0, LOG3(0, 32, topic, caller, the recipient word). 50 bytes (the same
  // hand-assembled contract as tests/reorg_itest.cc).
  return InitCodeOf(std::string("6020600060003760203533") + "7f" + kTransferTopic + "60206000a300");
}

std::string FactoryInitCode() {
  // Every call CREATEs an emitter from the copy of its deploy code the factory carries after its
  // own 55 bytes of code, and logs ChildCreated(child) (the address, not indexed, in the data):
  //   PUSH1 61, DUP1, PUSH1 55, PUSH1 0, CODECOPY        memory 0..61 = the emitter's deploy code
  //   PUSH1 0, PUSH1 0, CREATE                           (value 0, offset 0, size 61)
  //   PUSH1 0, MSTORE                                    memory 0..32 = the child's address
  //   PUSH32 topic, PUSH1 32, PUSH1 0, LOG1, STOP
  const std::string child = EmitterInitCode();
  const std::string topic = ToHex(Keccak256(kChildCreatedSignature)).substr(2);
  const std::string code =
      fmt::format("60{:02x}8060{:02x}60003960006000f0600052", child.size() / 2, 55) + "7f" + topic +
      "60206000a100";
  return InitCodeOf(code + child);
}

void Deployment::MakeChild(JsonRpcClient& rpc) {
  auto sent = rpc.Call("eth_sendTransaction",
                       R"([{"from":")" + account0_ + R"(","to":")" + factory_ + R"("}])");
  if (!sent.ok() || sent->size() < 3) return;
  const std::string hash = sent->substr(1, sent->size() - 2);
  // Automining: the receipt is there at once (a few tries for a busy node).
  for (int i = 0; i < 20; ++i) {
    auto receipt = rpc.Call("eth_getTransactionReceipt", "[\"" + hash + "\"]");
    const size_t at = receipt.ok() ? receipt->find("\"data\":\"0x") : std::string::npos;
    if (at != std::string::npos && receipt->size() >= at + 10 + 64) {
      children_.push_back("0x" + receipt->substr(at + 10 + 24, 40));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status Deployment::WriteContractsConfig() {
  const std::string transfer = R"({"type":"event","name":"Transfer","anonymous":false,"inputs":[)"
                               R"({"name":"from","type":"address","indexed":true},)"
                               R"({"name":"to","type":"address","indexed":true},)"
                               R"({"name":"value","type":"uint256","indexed":%s}]})";
  auto with_value_indexed = [&](bool indexed) {
    std::string abi = transfer;
    abi.replace(abi.find("%s"), 2, indexed ? "true" : "false");
    return "[" + abi + "]";
  };
  WriteFile(dir_ + "/erc20.json", with_value_indexed(false));
  // A token whose Transfer indexes its value: the emitter's logs (3 topics) do not fit it, so
  // every one is listed in `undecoded`, never decoded wrong.
  WriteFile(dir_ + "/misfit.json", with_value_indexed(true));
  WriteFile(dir_ + "/factory.json",
            R"([{"type":"event","name":"ChildCreated","anonymous":false,"inputs":[)"
            R"({"name":"child","type":"address","indexed":false}]}])");
  std::string yaml = fmt::format(
      "# The chaos deployment's contracts (docs/chaos.md), {} mode.\n"
      "name: {}\n"
      "contracts:\n"
      "  - name: token\n"
      "    abi: erc20.json\n"
      "    address: \"{}\"\n"
      "  - name: misfit\n"
      "    abi: misfit.json\n"
      "    address: \"{}\"\n"
      "  - name: pools\n"
      "    abi: erc20.json\n"
      "    factory: {{address: \"{}\", event: ChildCreated, parameter: child, abi: "
      "factory.json}}\n",
      events_mode_ ? "events" : "full", kContractsSchema, emitter_, emitter_, factory_);
  contracts_file_ = dir_ + "/contracts.yaml";
  WriteFile(contracts_file_, yaml);
  std::ifstream check(contracts_file_);
  if (!check.good()) return Internal("chaos: cannot write " + contracts_file_);
  return Status::Ok();
}

}  // namespace gapless::chaos

// The RPC front's other-chain mode (deployment/rpc_front.h): every 32-byte value complemented, in
// both directions, and eth_chainId moved, so the front is a consistent chain of its own.
#include "chaos/deployment/rpc_front.h"

#include <gtest/gtest.h>

namespace gapless::chaos {
namespace {

const std::string kHash = "0x" + std::string(60, '0') + "12af";
const std::string kOther = "0x" + std::string(60, 'f') + "ed50";

TEST(RpcFrontTest, EveryWordIsComplementedAndNothingElse) {
  const std::string address = "0x" + std::string(40, 'a');
  const std::string body = R"({"hash":")" + kHash + R"(","parentHash":"0x)" + std::string(64, 'f') +
                           R"(","miner":")" + address + R"(","number":"0x1c","logsBloom":"0x)" +
                           std::string(512, '0') + R"("})";
  const std::string out = ComplementWords(body);
  EXPECT_EQ(out, R"({"hash":")" + kOther + R"(","parentHash":"0x)" + std::string(64, '0') +
                     R"(","miner":")" + address + R"(","number":"0x1c","logsBloom":"0x)" +
                     std::string(512, '0') + R"("})");
  // Its own inverse: a request by the other chain's hash reaches the real block.
  EXPECT_EQ(ComplementWords(out), body);
  // Upper-case digits too (a digit has no case: a word comes back lower-case).
  EXPECT_EQ(ComplementWords(R"(["0x)" + std::string(64, 'F') + R"("])"),
            R"(["0x)" + std::string(64, '0') + R"("])");
}

TEST(RpcFrontTest, ChainIdIsMovedInABatchAndAlone) {
  const std::string batch =
      R"([{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},)"
      R"({"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x0",false]}])";
  const std::string answer =
      R"([{"jsonrpc":"2.0","id":1,"result":"0x7a69"},{"jsonrpc":"2.0","id":2,"result":"0x7a69"}])";
  EXPECT_EQ(OtherChainId(batch, answer), R"([{"jsonrpc":"2.0","id":1,"result":"0x17a69"},)"
                                         R"({"jsonrpc":"2.0","id":2,"result":"0x7a69"}])");
  EXPECT_EQ(OtherChainId(R"({"jsonrpc":"2.0","id":"a","method":"eth_chainId"})",
                         R"({"jsonrpc":"2.0","id":"a","result":"0x1"})"),
            R"({"jsonrpc":"2.0","id":"a","result":"0x10001"})");
  // Other calls, and what does not parse, pass as they were.
  const std::string block = R"({"jsonrpc":"2.0","id":3,"result":"0x5"})";
  EXPECT_EQ(OtherChainId(R"({"jsonrpc":"2.0","id":3,"method":"eth_blockNumber"})", block), block);
  EXPECT_EQ(OtherChainId("{", block), block);
}

}  // namespace
}  // namespace gapless::chaos

// CheckChain's bounds against a node whose head moves between two calls. `--to latest` is the
// node's own answer, so a re-org (or another backend behind a load balancer) that answers a lower
// head on the next call is no error of the user's: chaos seed 418, a worker started during a
// 34-block re-org, resolved latest to 43, then read a head of 12 and exited on "--to 43: above
// the node's head block 12". A number above the head is still refused by name.
#include "node/app.h"

#include <gtest/gtest.h>

#include <string>

#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "testing/http_test_server.h"

namespace gapless {
namespace {

using Response = HttpTestServer::Response;

// A node whose "latest" block is 43 while eth_blockNumber answers 12 (the chain re-orged to a
// shorter fork between the two calls). It has no genesis block to give: CheckChain stops there.
Response ShrinkingNode(const HttpTestServer::Request& req) {
  // The request's id, echoed (the client checks it).
  const size_t at = req.body.find(R"("id":)");
  const std::string id = at == std::string::npos
                             ? "1"
                             : req.body.substr(at + 5, req.body.find_first_of(",}", at) - at - 5);
  auto result = [&](const std::string& json) {
    return Response::Json(R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":)" + json + "}");
  };
  if (req.body.find("eth_chainId") != std::string::npos) return result(R"("0x7a69")");
  if (req.body.find("eth_blockNumber") != std::string::npos) return result(R"("0xc")");
  if (req.body.find(R"("latest")") != std::string::npos) {
    return result(R"({"number":"0x2b","hash":"0x)" + std::string(64, '2') +
                  R"(","transactions":[]})");
  }
  return Response::Json(R"({"jsonrpc":"2.0","id":)" + id +
                        R"(,"error":{"code":-32000,"message":"no genesis here"}})");
}

Status Check(const std::string& to) {
  HttpTestServer node(ShrinkingNode);
  CurlTransport transport(node.url());
  JsonRpcClientOptions options;
  options.max_attempts = 1;
  JsonRpcClient rpc(&transport, options);
  ChainRequest request;
  request.from = BlockBound{"0", 0};
  request.to = BlockBound{to, std::nullopt};
  if (to.front() >= '0' && to.front() <= '9') request.to.number = std::stoull(to);
  auto checked = CheckChain(rpc, request, "postgresql://127.0.0.1:1/none", 1);
  return checked.ok() ? Status::Ok() : checked.status();
}

TEST(CheckChainTest, ToLatestIsNeverAboveTheHeadEvenWhenTheHeadMovesBetweenCalls) {
  Status st = Check("latest");
  ASSERT_FALSE(st.ok()) << "the node has no genesis block";
  EXPECT_EQ(st.message().find("--to"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("no genesis here"), std::string::npos) << st.ToString();
}

TEST(CheckChainTest, ANumberAboveTheHeadIsRefusedByName) {
  Status st = Check("44");
  ASSERT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("--to 44: above the node's head block 12"), std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace gapless
